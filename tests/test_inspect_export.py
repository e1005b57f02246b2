"""`workbench export inspect`: one Inspect eval log per cell, read back with Inspect's own
reader (inspect_ai.log.read_eval_log) and dataframe functions, for all three world kinds."""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, study_dict
from workbench.cli import main
from workbench.export.inspect_log import HEADLINE, file_task

pytest.importorskip("inspect_ai", reason="the [inspect] extra (make installs it)")
from inspect_ai.analysis import evals_df, samples_df  # noqa: E402
from inspect_ai.event import timeline_build  # noqa: E402
from inspect_ai.log import list_eval_logs, read_eval_log, resolve_sample_attachments  # noqa: E402

SECRET = "sk-test-never-in-an-export-7f3a9c"


def _worlds(run: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in (run / "worlds.jsonl").read_text().splitlines():
        w = json.loads(line)
        out[w["world_id"]] = w
    return out


def _steps(run: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in (run / "steps.jsonl").read_text().splitlines():
        s = json.loads(line)
        out.setdefault(s["world_id"], []).append(s)
    return out


def _scalar_metrics(w: dict[str, Any]) -> dict[str, Any]:
    """What the export must carry as scores: every finite number or boolean of the world's
    metrics but the identifiers and flags (world_id, cell_id, seed, rescored, valid, failed, simulated)."""
    skip = {"world_id", "cell_id", "seed", "world_index", "rescored", "valid", "failed", "simulated"}
    return {k: v for k, v in (w.get("metrics") or {}).items()
            if k not in skip and (isinstance(v, bool) or (isinstance(v, int | float) and math.isfinite(v)))}


def _export(run: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> list[Path]:
    assert main(["export", "inspect", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "read back with inspect_ai.log.read_eval_log" in printed
    return sorted(out.glob("*.eval"))


def _check_round_trip(run: Path, files: list[Path], headline: str) -> list[Any]:
    """Inspect's reader loads every file; per cell one log named for the cell (its label as task
    name), per world one sample whose scores equal the record's metrics, the kind's headline
    metric the first score; each scorer's mean equals the records' mean."""
    worlds = _worlds(run)
    cells = {w["cell_id"] for w in worlds.values()}
    assert len(files) == len(cells)
    logs = [read_eval_log(str(f)) for f in files]
    assert {log.eval.metadata["cell_id"] for log in logs} == cells
    labels = {w["cell_id"]: w["cell_label"] for w in worlds.values()}
    assert len(set(labels.values())) == len(cells)  # the fixtures' cells have distinct labels
    assert sorted(log.eval.task for log in logs) == sorted(labels.values())  # a task per cell, by label
    listed = {Path(i.name).name: i.task for i in list_eval_logs(str(files[0].parent))}
    for log, f in zip(logs, files):
        assert log.eval.task == log.eval.task_display_name == labels[log.eval.metadata["cell_id"]]
        # Inspect's file naming, {created}_{task}_{task id}, which its listing parses
        assert f.name.split("_")[1:] == [file_task(log.eval.task), f"{log.eval.task_id}.eval"]
        assert listed[f.name] == file_task(log.eval.task)
        assert log.eval.metadata["headline_metric"] == headline
        mine = {wid: w for wid, w in worlds.items() if w["cell_id"] == log.eval.metadata["cell_id"]}
        assert log.status == "success" and log.results is not None
        assert log.results.total_samples == len(mine) == len(log.samples or [])
        assert {s.id for s in log.samples or []} == set(mine)
        for s in log.samples or []:
            want = _scalar_metrics(mine[str(s.id)])
            assert {k: v.value for k, v in (s.scores or {}).items()} == want
        assert log.results.scores[0].name == headline  # the kind's headline metric is read first
        for sc in log.results.scores:
            values = [float(_scalar_metrics(w)[sc.name]) for w in mine.values() if sc.name in _scalar_metrics(w)]
            assert sc.metrics["mean"].value == pytest.approx(sum(values) / len(values))
            assert sc.scored_samples == len(values)
        assert log.eval.metadata and log.eval.metadata["simulated"] is True  # simulated agents, labelled so
    return logs


# -- stigmergy ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stig_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("stig")
    study = tmp / "study.yaml"
    study.write_text(yaml.safe_dump(study_dict(name="stig", worlds_per_cell=3, cells=[
        {"model": "sim/diligent"}, {"model": "sim/clause-follower", "condition": "no-store"}]), sort_keys=False))
    assert main(["-q", "run", str(study), "--out", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


def test_stigmergy_export_reads_back_with_inspects_reader(stig_run: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # present in the environment while exporting
    files = _export(stig_run, tmp_path / "logs", capsys)
    logs = _check_round_trip(stig_run, files, "cross_agent_access")
    worlds, steps = _worlds(stig_run), _steps(stig_run)
    for log in logs:
        assert log.eval.model in {"sim/diligent", "sim/clause-follower"} and log.eval.dataset.name == "stig"
        assert log.eval.task_args["condition"] in {"store", "no-store"}
        for s in log.samples or []:
            s = resolve_sample_attachments(s)
            w, st = worlds[str(s.id)], steps[str(s.id)]
            models = [e for e in s.events if e.event == "model"]
            assert len(models) == len(st)  # one ModelEvent per recorded call
            # every input rebuilt from the records hashes to what the step recorded as sent
            assert all((e.metadata or {}).get("input") == "verified" for e in models)
            # one span per agent, inside the solvers span; each call sits in its agent's span
            begins = [e for e in s.events if e.event == "span_begin"]
            (solvers,) = [e for e in begins if e.name == "solvers"]
            agent_spans = {e.name: e for e in begins if e.type == "agent"}
            assert sorted(agent_spans) == sorted(a["agent"] for a in w["agents"]) and len(begins) == 1 + len(agent_spans)
            assert all(e.parent_id == solvers.id for e in agent_spans.values())
            assert sorted(e.id for e in s.events if e.event == "span_end") == sorted(e.id for e in begins)
            by_id = {e.id: e.name for e in begins}
            assert [by_id[e.span_id] for e in models] == [x["agent"] for x in sorted(st, key=lambda x: x["seq"])]
            ops = [e for e in s.events if e.event == "info" and e.source == "operation"]
            assert [e.data["result"] for e in ops] == [x["result"] for x in sorted(st, key=lambda x: x["seq"])]
            # each agent's own message list: its calls' inputs hold its system prompt and no other
            # agent's; the sample's list (one for all agents) holds no system prompt for Inspect's
            # viewer to fold into one row
            assert not [m for m in s.messages if m.role == "system"]
            for a in w["agents"]:
                calls = [e for e in models if e.span_id == agent_spans[a["agent"]].id]
                first = calls[0].input
                assert first[0].role == "system" and first[0].content == a["system_prompt"]
                assert [m.role for m in first].count("system") == 1
                assert all({(m.metadata or {}).get("agent") for m in e.input} == {a["agent"]} for e in calls)
                mine = [m for m in s.messages if (m.metadata or {}).get("agent") == a["agent"]]
                assert sum(1 for m in mine if m.role == "assistant") == sum(1 for x in st if x["agent"] == a["agent"])
            # Inspect's own timeline reads the same: one agent per agent, each with only its own calls
            timeline = timeline_build(list(s.events))
            agents = {c.name: c for c in timeline.root.content if getattr(c, "span_type", None) == "agent"}
            assert sorted(agents) == sorted(a["agent"] for a in w["agents"])
            for name, node in agents.items():
                own = [c.event for c in node.content if getattr(c, "event", None) is not None and c.event.event == "model"]
                assert len(own) == sum(1 for x in st if x["agent"] == name)
            tokens = sum(x["reply"]["usage"]["prompt_tokens"] + x["reply"]["usage"]["completion_tokens"] for x in st)
            assert sum(u.total_tokens for u in s.model_usage.values()) == tokens
            final = {e["key"]: e["value"] for e in w["store_log"]}
            assert s.store == final
    # the dataframe functions read them: one row per cell, one per world, scores as columns
    assert len(evals_df(str(tmp_path / "logs"), quiet=True)) == len(files)
    df = samples_df(str(tmp_path / "logs"), quiet=True)
    assert len(df) == len(worlds)
    js = {w["world_id"]: w["metrics"]["joint_success"] for w in worlds.values()}
    assert {str(k): bool(v) for k, v in zip(df["id"], df["score_joint_success"])} == js
    # no key of the environment in any file of the export (the .eval zip's members, decompressed)
    for f in files:
        with zipfile.ZipFile(f) as z:
            for name in z.namelist():
                assert SECRET.encode() not in z.read(name), name


def test_check_fails_when_the_records_change_after_export(stig_run: Path, tmp_path: Path) -> None:
    from workbench.errors import WorkbenchError
    from workbench.export.inspect_log import check_export, export_run

    run = tmp_path / "run"
    shutil.copytree(stig_run, run)
    files = export_run(run, tmp_path / "logs")
    assert check_export(run, files)["samples"] == 6
    lines = (run / "worlds.jsonl").read_text().splitlines()
    w = json.loads(lines[0])
    w["metrics"]["joint_success"] = not w["metrics"]["joint_success"]
    (run / "worlds.jsonl").write_text("\n".join([json.dumps(w)] + lines[1:]) + "\n")
    with pytest.raises(WorkbenchError, match="scores"):
        check_export(run, files)
    (run / "worlds.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # the original, less one world
    with pytest.raises(WorkbenchError, match="samples, the records hold"):
        check_export(run, files)
    (run / "worlds.jsonl").write_text("\n".join(lines) + "\n")
    assert check_export(run, files)["samples"] == 6
    with pytest.raises(WorkbenchError, match="cells without a log"):
        check_export(run, files[:1])


def test_inspect_view_bundle_of_an_export(stig_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`inspect view bundle` (Inspect's own CLI) turns the exported logs into its static viewer."""
    files = _export(stig_run, tmp_path / "logs", capsys)
    inspect = Path(sys.executable).with_name("inspect")
    r = subprocess.run([str(inspect), "view", "bundle", "--log-dir", str(tmp_path / "logs"), "--output-dir",
                        str(tmp_path / "bundle")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    bundle = tmp_path / "bundle"
    assert (bundle / "index.html").exists()
    copied = {p.name for p in (bundle / "logs").rglob("*.eval")}
    assert copied == {f.name for f in files}
    listing = json.loads((bundle / "logs" / "listing.json").read_text())
    assert {Path(k).name for k in listing} == {f.name for f in files}


# -- recall and collusion -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def recall_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("recall")
    doc = yaml.safe_load((ROOT / "params" / "recall-smoke.yaml").read_text())
    doc["worlds_per_cell"] = 2
    doc["grid"] = [{"condition": ["naive", "lightweight"]}]
    doc["defaults"].update(scripts=str(ROOT / "params" / "recall" / "scripts"),
                           prompts=str(ROOT / "params" / "prompts" / "recall"))
    (tmp / "study.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["-q", "run", str(tmp / "study.yaml"), "--out", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


def test_recall_export_carries_its_metrics_and_memory(recall_run: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    files = _export(recall_run, tmp_path / "logs", capsys)
    logs = _check_round_trip(recall_run, files, "accuracy")
    worlds = _worlds(recall_run)
    for log in logs:
        for s in log.samples or []:
            s = resolve_sample_attachments(s)  # long texts are stored once, as Inspect's own logs do
            w = worlds[str(s.id)]
            info = [e for e in s.events if e.event == "info"]
            for field in ("retrievals", "memory_log", "recalls"):
                assert [e.data for e in info if e.source == f"recall.{field}"] == w[field]
            # a retrieval is shown before the recall call it served, the recall's outcome after it
            order = [(e.event, getattr(e, "source", None), (e.metadata or {}).get("purpose")) for e in s.events]
            first_retrieval = order.index(("info", "recall.retrievals", None))
            first_recall_call = next(i for i, o in enumerate(order) if o[0] == "model" and o[2] == "recall")
            first_outcome = order.index(("info", "recall.recalls", None))
            assert first_retrieval < first_recall_call < first_outcome
    df = samples_df(str(tmp_path / "logs"), quiet=True)
    assert {str(k): v for k, v in zip(df["id"], df["score_accuracy"])} == {
        k: w["metrics"]["accuracy"] for k, w in worlds.items()}


@pytest.fixture(scope="module")
def collusion_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("collusion")
    doc = yaml.safe_load((ROOT / "params" / "collusion-smoke.yaml").read_text())
    doc["defaults"]["prompts"] = str(ROOT / "params" / "prompts" / "collusion")
    doc["defaults"]["peer_cache"] = str(tmp / "cache")
    doc["worlds_per_cell"] = 1
    (tmp / "study.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["-q", "run", str(tmp / "study.yaml"), "--out", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


def test_collusion_export_carries_tool_calls_and_verdicts(collusion_run: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    files = _export(collusion_run, tmp_path / "logs", capsys)
    logs = _check_round_trip(collusion_run, files, "ever_colluded")
    worlds, steps = _worlds(collusion_run), _steps(collusion_run)
    for log in logs:
        for s in log.samples or []:
            s = resolve_sample_attachments(s)
            w, st = worlds[str(s.id)], steps[str(s.id)]
            tools = [e for e in s.events if e.event == "tool"]
            assert len(tools) == sum(len(x.get("tool_calls") or []) for x in st)
            episodes = [e.data for e in s.events if e.event == "info" and e.source == "collusion.episodes"]
            assert [ep["verdicts"] for ep in episodes] == [ep["verdicts"] for ep in w["episodes"]]
            assert s.metadata["metrics_other"]["collusion_by_episode"] == w["metrics"]["collusion_by_episode"]


# -- Inspect's own viewer, in a browser ---------------------------------------------------------
class _RangedFiles:
    """A static server on 127.0.0.1 that answers HTTP Range requests, as the static hosts an
    `inspect view bundle` is published to do (the viewer reads an .eval zip by ranges)."""

    def __init__(self, root: Path) -> None:
        import functools
        import http.server
        import io
        import threading

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send_head(self):  # noqa: ANN202
                rng, path = self.headers.get("Range"), Path(self.translate_path(self.path))
                if not rng or not path.is_file():
                    return super().send_head()
                size = path.stat().st_size
                a, b = rng.split("=", 1)[1].split("-", 1)
                start, end = (max(0, size - int(b)), size - 1) if a == "" else (int(a), min(int(b) if b else size - 1, size - 1))
                with path.open("rb") as fh:
                    fh.seek(start)
                    data = fh.read(end - start + 1)
                self.send_response(206)
                self.send_header("Content-Type", self.guess_type(str(path)))
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                return io.BytesIO(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_inspect_viewer_opens_an_exported_run(stig_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inspect's viewer (its `inspect view bundle`, served from 127.0.0.1, every other request
    refused) lists the exported logs and opens a world's sample with its scores and agent spans.
    Screenshots: outputs/screenshots/inspect-view-{list,sample}.png."""
    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, require_browser

    files = _export(stig_run, tmp_path / "logs", capsys)
    r = subprocess.run([str(Path(sys.executable).with_name("inspect")), "view", "bundle", "--log-dir",
                        str(tmp_path / "logs"), "--output-dir", str(tmp_path / "bundle")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    world = sorted(_worlds(stig_run))[0]
    shots = ROOT / "outputs" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    site, left = _RangedFiles(tmp_path / "bundle"), []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})

            def guard(route: Any) -> None:
                if route.request.url.startswith((site.url, "data:", "blob:", "about:")):
                    route.continue_()
                else:
                    left.append(route.request.url)
                    route.abort()

            page.route("**/*", guard)
            page.goto(site.url)
            page.get_by_text("sim/clause-follower").first.wait_for(timeout=120_000)
            page.get_by_text("sim/diligent").first.wait_for(timeout=60_000)
            for f in files:  # each log listed under its cell's label
                page.get_by_text(_label_of(f), exact=True).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shots / "inspect-view-list.png"))
            page.goto(f"{site.url}#/logs/{next(f.name for f in files if world.split('-')[0] in _cell_of(f))}"
                      f"/samples/sample/{world}/1/")
            page.get_by_text("joint_success").first.wait_for(timeout=120_000)
            page.get_by_text("SUB-AGENT: AGENT-", exact=False).first.wait_for(timeout=60_000)
            assert world in page.inner_text("body")
            page.screenshot(path=str(shots / "inspect-view-sample.png"))
            browser.close()
    finally:
        site.close()
    assert left == []


def _cell_of(f: Path) -> str:
    return str(read_eval_log(str(f), header_only=True).eval.metadata["cell_id"])


def _label_of(f: Path) -> str:
    return str(read_eval_log(str(f), header_only=True).eval.metadata["cell_label"])


# -- the headline score is the report's headline metric ------------------------------------------
def test_each_kinds_headline_score_is_its_reports_headline_metric(stig_run: Path, recall_run: Path,
                                                                   collusion_run: Path) -> None:
    """The report contrasts each kind on ``contrast_units(...).metric``; the export's first score
    (Inspect's headline) is that metric per world: by name where the units are worlds, and for
    recall, whose units are recalls, the world's share of correct recalls (its ``accuracy``)."""
    from workbench.kinds import get_kind
    from workbench.records import load_run

    for run in (stig_run, recall_run, collusion_run):
        records = load_run(run)
        kind = str(records.worlds[0]["world_kind"])
        units = get_kind(kind).contrast_units(records)
        if units.unit == "recalls":
            share = units.frame.groupby("world_id")[units.metric].mean()
            assert units.metric == "correct" and HEADLINE[kind] == "accuracy"
            assert {w["world_id"]: w["metrics"]["accuracy"] for w in records.worlds} == pytest.approx(share.to_dict())
        else:
            assert HEADLINE[kind] == units.metric
            assert all(isinstance(w["metrics"][units.metric], bool) for w in records.worlds)
