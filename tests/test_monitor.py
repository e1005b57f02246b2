"""The monitor as part of the design: its prompt is a locked template file, its labels
are recorded with what they mean, and the report counts them on read steps."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import json  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from tests.conftest import MONITOR_PROMPT, PROMPTS, study_dict  # noqa: E402
from tests.fake_openai import FAKE_KEY, FakeOpenAI  # noqa: E402
from tests.fault_study import ENTRY, write_catalogue  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::ResourceWarning")

MARK = "MONITOR-PROMPT-MARKER"
# pair_a lists, reads pair_b's key, then submits; everyone else lists and submits
SCRIPT = ['{"op": "write", "key": "mine", "value": 3}', '{"op": "list"}', '{"op": "read", "key": "mine"}',
          '{"op": "submit", "answer": 0}']


def _agent(body: dict) -> str:
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return SCRIPT[min(n, len(SCRIPT) - 1)]


def _monitor(body: dict) -> str:
    step = body["messages"][-1]["content"]
    return '{"label": "mentions_other"}' if '"read"' in step else '{"label": "none"}'


@pytest.fixture
def project(tmp_path, monkeypatch):
    from workbench.models.litellm_client import reset_limits

    srv = FakeOpenAI().start()
    srv.responder = lambda body: _monitor(body) if MARK in body["messages"][-1]["content"] else _agent(body)
    reset_limits()
    monkeypatch.setenv("WORKBENCH_MODELS", str(write_catalogue(tmp_path, srv.url)))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts" / "monitor").mkdir(parents=True)
    shutil.copytree(PROMPTS, tmp_path / "prompts" / "stigmergy")
    prompt = tmp_path / "prompts" / "monitor" / "default.txt"
    prompt.write_text(f"{MARK}\n" + MONITOR_PROMPT.read_text())
    spec = study_dict(name="monitored", worlds_per_cell=2, cells=[{"model": "sim/diligent"}, {"model": ENTRY}],
                      monitor={"model": ENTRY})  # prompt: the default, relative to the params file
    spec["defaults"] = {"prompts": "prompts/stigmergy", "max_steps": 6}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    yield path, prompt, srv
    srv.stop()
    reset_limits()


def test_the_monitor_prompt_is_the_study_file_and_is_recorded(project, tmp_path):
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.study import run_study

    path, prompt, srv = project
    out = tmp_path / "run"
    run_study(load_study(path), out, progress=False)
    sent = [r["body"]["messages"][-1]["content"] for r in srv.requests]
    assert sum(MARK in s for s in sent) > 0 and not any("You label one step" in s and MARK not in s for s in sent)
    records = load_run(out)
    facts = records.manifest["monitor"]
    assert facts["prompt"] == str(prompt.resolve()) and facts["flag"] == "mentions_other"
    import hashlib

    assert facts["prompt_sha256"] == hashlib.sha256(prompt.read_bytes()).hexdigest()
    assert all(w["monitor"] == facts for w in records.worlds)


def test_bad_monitor_settings_name_the_field(project, tmp_path):
    from workbench.params import ParamsError, load_study

    path, prompt, _ = project
    spec = yaml.safe_load(path.read_text())
    for monitor, field in (({"model": ENTRY, "prompt": "nope.txt"}, "monitor.prompt"),
                           ({"model": ENTRY, "labels": ["a", "b"], "flag": "c"}, "monitor")):
        spec["monitor"] = monitor
        path.write_text(yaml.safe_dump(spec))
        with pytest.raises(ParamsError, match=field):
            load_study(path)
    (tmp_path / "empty.txt").write_text("no placeholder here")
    spec["monitor"] = {"model": ENTRY, "prompt": "empty.txt"}
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ParamsError, match=r"monitor.prompt.*\$step"):
        load_study(path)


def test_a_lock_covers_the_monitor_prompt(project, tmp_path, capsys):
    from workbench import locks as L
    from workbench.cli import main

    path, prompt, _ = project
    lock = json.loads(L.create_lock("M1", path, tmp_path / "locks").read_text())
    assert any(n.endswith("prompts/monitor/default.txt") for n in lock["files"])
    assert ENTRY in lock["routes"]
    prompt.write_text(prompt.read_text() + "\nAlso label optimism.\n")
    assert any("default.txt" in c for c in L.changes(lock))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) != 0
    assert "default.txt" in capsys.readouterr().err


def test_report_tables_count_monitor_labels_on_read_steps(project, tmp_path):
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.study import run_study
    from workbench.worlds.stigmergy.export import cell_tables

    path, _, _ = project
    out = tmp_path / "run"
    study = load_study(path)
    run_study(study, out, progress=False)
    tables = cell_tables(load_run(out))
    signal = tables["text_signal"].set_index("cell_id")
    real = next(c.cell_id for c in study.cells if c.spec.model == ENTRY)
    row = signal.loc[real]
    # every read step is flagged, so every monitored reader is
    n = int(row["readers"])
    assert n > 0 and row["monitored_readers"] == n and row["monitor_flag_on_read"] == n
    assert row["monitor k/n"] == f"{n}/{n}"
    labels = tables["monitor_labels"]
    flagged = labels[(labels["cell_id"] == real) & (labels["label"] == "mentions_other")]
    assert int(flagged["steps"].iloc[0]) == int(flagged["read_steps"].iloc[0]) > 0
    none = labels[(labels["cell_id"] == real) & (labels["label"] == "none")]
    assert int(none["read_steps"].iloc[0]) == 0
