"""The recall world: failure modes arise from the mechanism (retrieval weights,
namespaces, invalidation, agent dispositions), records are complete, scripted
agents and the judge go through the one model interface, replay reproduces a
world, and the CLI runs a recall study end to end.

The helpers at the top (a small legal script and study writers) are imported by
the other recall test files."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "params" / "prompts" / "recall"
SHIPPED_SCRIPTS = ROOT / "params" / "recall" / "scripts"

DEADLINE_Q = "What is the filing deadline for the Harlow appeal?"
OFFER_Q = "What is the current settlement offer in the Harlow matter?"
HEARING_Q = "What is the hearing date for the Harlow appeal?"


def _t(turn: int, role: str, content: str, *, write: bool = False, fact: str | None = None) -> dict[str, Any]:
    return {"turn": turn, "role": role, "content": content, "is_recall": False, "target_fact_id": None,
            "ground_truth": [], "recall_query": None, "failure_mode": "", "write_to_memory": write, "fact_id": fact}


def _r(turn: int, role: str, content: str, fact: str, query: str, truth: list[str], mode: str) -> dict[str, Any]:
    return {"turn": turn, "role": role, "content": content, "is_recall": True, "target_fact_id": fact,
            "ground_truth": truth, "recall_query": query, "failure_mode": mode, "write_to_memory": False,
            "fact_id": None}


def legal_script(script_id: str = "legal_test_01") -> dict[str, Any]:
    """Authority collapse on the deadline (a client rep's wrong date worded like the
    question), belief asymmetry on the offer (the associate voiced the old figure;
    external counsel writes the update), memory anchoring on the hearing date (three
    roles repeat the old date; one correction)."""
    return {
        "script_id": script_id, "domain": "legal",
        "initial_facts": [
            {"id": "F1", "text": "Appeal filing due 22 July 2026 per the court order.", "tier": "structural",
             "authority_level": 1.0},
            {"id": "F2", "text": "Opposing side's settlement offer: $450,000.", "tier": "contextual",
             "authority_level": 0.9},
            {"id": "F3", "text": "Hearing listed for March 3, 2026.", "tier": "contextual", "authority_level": 0.7},
            {"id": "F4", "text": "The expert witness is Dr. Amara Osei.", "tier": "contextual", "authority_level": 1.0},
        ],
        "turns": [
            _t(1, "user", "The Harlow appeal team meets to plan the brief."),
            _t(2, "senior_lawyer", "Per the court order, the Harlow appeal must be filed by July 22, 2026.",
               write=True, fact="F1"),
            _t(3, "associate", "Noting for my memo that the settlement offer in the Harlow matter is $450,000.",
               fact="F2"),
            _t(4, "paralegal", "The hearing date for the Harlow appeal is March 3, 2026.", write=True, fact="F3"),
            _t(5, "associate", "Confirming the hearing date for the Harlow appeal is March 3, 2026.", write=True,
               fact="F3"),
            _t(6, "client_rep", "The client believes the filing deadline for the Harlow appeal is July 8, 2026.",
               write=True, fact="F1"),
            _t(7, "external_counsel", "Update: the settlement offer in the Harlow matter is now $520,000.",
               write=True, fact="F2"),
            _t(8, "senior_lawyer", "Correction from the clerk: the hearing for the Harlow appeal moved to April 14, 2026.", write=True,
               fact="F3"),
            _t(9, "paralegal", "Dr. Amara Osei confirmed availability for the hearing."),
            _r(10, "paralegal", "Before I docket it, let me check.", "F1", DEADLINE_Q, ["July 22, 2026"],
               "authority_collapse"),
            _r(11, "associate", "I need the figure for the memo.", "F2", OFFER_Q, ["$520,000"], "belief_asymmetry"),
            _r(12, "client_rep", "The client wants to book travel.", "F3", HEARING_Q, ["April 14, 2026"],
               "memory_anchoring"),
        ],
    }


def write_scripts(folder: Path, scripts: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in scripts:
        (folder / f"{s['script_id']}.json").write_text(json.dumps(s, indent=1), encoding="utf-8")
    return folder


def recall_study(tmp_path: Path, cells: list[dict[str, Any]], *, worlds: int = 1, seed: int = 5,
                 scripts: list[dict[str, Any]] | None = None, name: str = "rt", defaults: dict[str, Any] | None = None,
                 scripts_dir: Path | None = None) -> Path:
    """Write a recall study (and its scripts) into tmp_path; returns the study path."""
    if scripts_dir is None:
        scripts_dir = write_scripts(tmp_path / "scripts", scripts or [legal_script()])
    doc = {"world": "recall", "name": name, "seed": seed, "worlds_per_cell": worlds,
           "defaults": {"prompts": str(PROMPTS), "scripts": str(scripts_dir), **(defaults or {})}, "cells": cells}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def run_cell(path: Path, cell_index: int, world_indices: range | list[int]) -> list[Any]:
    from workbench.params import load_study
    from workbench.study import run_one_world

    study = load_study(path)

    async def go() -> list[Any]:
        return [await run_one_world(study, study.cells[cell_index], i) for i in world_indices]
    return asyncio.run(go())


def accuracy(outcomes: list[Any], mode: str) -> float:
    rs = [r for o in outcomes for r in o.world["recalls"] if r["failure_mode"] == mode]
    assert rs, f"no {mode} recalls"
    return sum(bool(r["correct"]) for r in rs) / len(rs)


SCRIPTED = {  # one reply per turn each role voices, recall turns included
    "senior_lawyer": {"script": ["Noted.", "Noted."]},
    "associate": {"script": ["Noted.", "Noted.", "The offer is now $520,000."]},
    "paralegal": {"script": ["Noted.", "Noted.", "July 8, 2026"]},
    "client_rep": {"script": ["Noted.", "Answer: April 14, 2026"]},
    "external_counsel": {"script": ["Noted."]},
}


# -- failure modes from the mechanism ------------------------------------------------------
def test_authority_collapse_under_naive_shrinks_under_lightweight(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "naive", "model": "sim-recall/trusting"},
                                   {"condition": "lightweight", "model": "sim-recall/trusting"}])
    naive = accuracy(run_cell(path, 0, range(30)), "authority_collapse")
    light = accuracy(run_cell(path, 1, range(30)), "authority_collapse")
    assert naive <= 0.3 and light >= 0.7 and light - naive >= 0.5, (naive, light)


def test_authority_collapse_over_shipped_scripts(tmp_path: Path) -> None:
    """The same over the shipped scripts: a profile that trusts retrieval recalls the
    authority-collapse facts clearly better when authority is weighed."""
    if not any(SHIPPED_SCRIPTS.rglob("*.json")):
        pytest.skip("no shipped scripts yet")
    path = recall_study(tmp_path, [{"condition": "naive", "model": "sim-recall/trusting"},
                                   {"condition": "lightweight", "model": "sim-recall/trusting"}],
                        scripts_dir=SHIPPED_SCRIPTS)
    n = len({p.stem for p in SHIPPED_SCRIPTS.rglob("*.json")})
    naive = accuracy(run_cell(path, 0, range(n)), "authority_collapse")
    light = accuracy(run_cell(path, 1, range(n)), "authority_collapse")
    assert light - naive >= 0.3, (naive, light)


def test_belief_asymmetry_grows_with_self_trust(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "naive", "model": "sim-recall/self-anchored"},
                                   {"condition": "naive", "model": "sim-recall/trusting"}])
    stubborn = accuracy(run_cell(path, 0, range(30)), "belief_asymmetry")
    open_minded = accuracy(run_cell(path, 1, range(30)), "belief_asymmetry")
    assert (1 - stubborn) - (1 - open_minded) >= 0.4, (stubborn, open_minded)


# -- conditions -------------------------------------------------------------------------------
@pytest.mark.parametrize("condition", ["baseline", "isolated"])
def test_baseline_and_isolated_have_no_memory(tmp_path: Path, condition: str) -> None:
    """Neither retrieves; baseline has the case file and the conversation in context
    (a separate message), isolated its own turns only (the old baseline)."""
    path = recall_study(tmp_path, [{"condition": condition}])
    o = run_cell(path, 0, [0])[0]
    w = o.world
    assert w["retrievals"] == [] and w["memory_log"] == [] and not w["retrieval"]["memory"]
    assert len(w["recalls"]) == 3 and all(r["context"]["entry_ids"] == [] for r in w["recalls"])
    prompts = [s["request"]["prompt"] for s in o.steps if s["purpose"] == "recall"]
    assert prompts and not any("Shared memory (" in p or "22 July 2026" in p for p in prompts)
    assert w["metrics"]["n_retrievals"] == 0
    assert all(r["context"]["case_file"] is (condition == "baseline") for r in w["recalls"])
    n_messages = [s["request"]["n_messages"] for s in o.steps]
    if condition == "baseline":  # system, case file + conversation, the turn
        assert set(n_messages) == {3}
    else:  # the private history grows
        assert max(n_messages) > 3


def test_namespaced_retrieves_own_role_and_initial_facts_only(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "namespaced"}, {"condition": "naive"}])
    w = run_cell(path, 0, [0])[0].world
    for r in w["retrievals"]:
        assert r["namespaces"] == [r["agent"]]
        for h in r["hits"]:
            assert (h["author_role"], h["namespace"]) in {(r["agent"], r["agent"]), ("record", None)}, h
    naive = run_cell(path, 1, [0])[0].world
    foreign = [h for r in naive["retrievals"] for h in r["hits"] if h["author_role"] not in (r["agent"], "record")]
    assert foreign, "the naive condition should retrieve other roles' entries (else the test proves nothing)"


def test_invalidation_records_removals(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "lightweight-invalidation"}, {"condition": "lightweight"}])
    w = run_cell(path, 0, [0])[0].world
    assert w["retrieval"]["invalidation"] is True
    gone = [x for e in w["memory_log"] for x in e["removed"]] + [e for e in w["memory_log"] if e["refused"]]
    assert gone, w["memory_log"]
    # the client rep's wrong deadline (fact F1, authority 0.2) never survives next to the senior lawyer's
    live_texts = [h["text"] for r in w["retrievals"] for h in r["hits"]]
    assert not any("July 8, 2026" in t for t in live_texts)
    assert w["metrics"]["n_removed"] + w["metrics"]["n_refused"] == len(gone)
    plain = run_cell(path, 1, [0])[0].world
    assert not any(e["removed"] or e["refused"] for e in plain["memory_log"])


def test_authors_shown_puts_author_and_authority_in_the_prompt(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "authors-shown"}, {"condition": "naive"}])
    shown = [s["request"]["prompt"] for s in run_cell(path, 0, [0])[0].steps if s["purpose"] == "recall"]
    hidden = [s["request"]["prompt"] for s in run_cell(path, 1, [0])[0].steps if s["purpose"] == "recall"]
    assert all("authority" in p for p in shown) and not any("authority" in p for p in hidden)


# -- records ------------------------------------------------------------------------------------
def test_records_are_complete_and_deterministic(tmp_path: Path) -> None:
    from workbench.replay import comparable

    path = recall_study(tmp_path, [{"condition": "lightweight"}])
    a, b = run_cell(path, 0, [1])[0], run_cell(path, 0, [1])[0]
    assert comparable(a.world) == comparable(b.world) and [comparable(s) for s in a.steps] == [comparable(s) for s in b.steps]
    w = a.world
    assert w["kind"] == "world" and w["world_kind"] == "recall" and w["valid"] and w["failed"] is None
    assert w["script"]["script_id"] == "legal_test_01" and len(w["script"]["sha256"]) == 64
    assert w["repetition"] == 1 and w["script_index"] == 0  # one script: world 1 is its second repetition
    assert [s["seq"] for s in a.steps] == list(range(len(a.steps)))
    assert {s["agent"] for s in a.steps} == {a["agent"] for a in w["agents"]}
    r = w["retrievals"][0]
    assert r["memory_size"] >= 4 and r["hits"] and {"entry_id", "text", "author_role", "authority", "similarity",
                                                     "recency", "score", "rank"} <= set(r["hits"][0])
    assert [h["rank"] for h in r["hits"]] == list(range(1, len(r["hits"]) + 1))
    rc = w["recalls"][1]
    assert rc["failure_mode"] == "belief_asymmetry" and rc["target_fact_id"] == "F2"
    assert rc["ground_truth"] == ["$520,000"] and rc["context"]["own_turns"] == [3, 5]
    assert rc["context"]["entry_ids"] == [h["entry_id"] for h in w["retrievals"][1]["hits"]]
    json.dumps(w, ensure_ascii=True)
    assert w["memory_log"][0]["source"] == "initial_fact" and w["memory_log"][0]["author_role"] == "record"


def test_scripted_replies_drive_a_world_exactly(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "naive", "agents": SCRIPTED}])
    o = run_cell(path, 0, [0])[0]
    w = o.world
    assert [r["answer"] for r in w["recalls"]] == ["July 8, 2026", "The offer is now $520,000.", "April 14, 2026"]
    assert [r["correct"] for r in w["recalls"]] == [False, True, True]
    assert w["valid"] and {a["route"] for a in w["agents"]} == {"scripted"}
    assert w["metrics"]["n_correct"] == 2


def test_a_failed_call_ends_the_world_invalid(tmp_path: Path) -> None:
    agents = {**SCRIPTED, "client_rep": {"script": ["Noted."]}}  # runs out before its recall
    path = recall_study(tmp_path, [{"condition": "naive", "agents": agents}])
    w = run_cell(path, 0, [0])[0].world
    assert w["failed"] and "exhausted" in w["failed"]["error"] and not w["valid"]
    assert w["failed"]["role"] == "client_rep" and w["failed"]["purpose"] == "recall"


# -- the judge ------------------------------------------------------------------------------------
def test_simulated_judge_accepts_paraphrases_and_refuses_wrong_values() -> None:
    import workbench.worlds.recall  # noqa: F401 - registers sim-recall
    from workbench.models.factory import make_client
    from workbench.templates import template_set
    from workbench.worlds.recall import prompts as P
    from workbench.worlds.recall.scoring import exact_match, judge_verdict

    t = template_set(PROMPTS)
    judge = make_client("sim-recall/judge", seed=3)

    def verdict(answer: str, accepted: list[str]) -> bool | None:
        msgs = P.judge_messages(t, query="What is the deadline?", accepted=accepted, answer=answer)
        reply = asyncio.run(judge.complete(__import__("workbench.models.base", fromlist=["ModelRequest"])
                                           .ModelRequest(messages=msgs)))
        assert reply.extra["simulated"] is True and reply.route == "sim-recall/judge"
        return judge_verdict(reply.text)

    assert not exact_match("22 July 2026", ["July 22, 2026"])
    assert verdict("22 July 2026", ["July 22, 2026"]) is True
    assert verdict("The deadline is 2026-07-22.", ["July 22, 2026"]) is True
    assert verdict("$1.2 million", ["$1,200,000"]) is True
    assert verdict("July 15, 2026", ["July 22, 2026"]) is False
    assert verdict("5 mg twice daily", ["50 mg"]) is False
    assert verdict("Dr. Amara Osei", ["Amara Osei"]) is True
    assert verdict("Dr. John Smith", ["Amara Osei"]) is False


def test_judge_scoring_in_a_world(tmp_path: Path) -> None:
    agents = {**SCRIPTED, "paralegal": {"script": ["Noted.", "Noted.", "22 July 2026"]}}
    path = recall_study(tmp_path, [{"condition": "naive", "agents": agents, "scoring": "judge"}])
    o = run_cell(path, 0, [0])[0]
    first = o.world["recalls"][0]
    assert first["correct_exact"] is False and first["judge"]["verdict"] is True and first["correct"] is True
    judge_steps = [s for s in o.steps if s["agent"] == "judge"]
    assert len(judge_steps) == 3 and all(s["purpose"] == "judge" for s in judge_steps)
    assert o.world["valid"] and any(a["agent"] == "judge" for a in o.world["agents"])


# -- replay, CLI, embedders, validation -------------------------------------------------------------
def test_replay_verify_reproduces_recall_worlds(tmp_path: Path) -> None:
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.replay import verify_world
    from workbench.study import run_study

    path = recall_study(tmp_path, [{"condition": "lightweight-invalidation"},
                                   {"condition": "naive", "scoring": "judge", "model": "sim-recall/careful"}],
                        worlds=2)
    out = tmp_path / "run"
    run_study(load_study(path), out, progress=False)
    records = load_run(out)
    assert len(records.worlds) == 4
    for w in records.worlds:
        assert verify_world(records, w["world_id"]) == [], w["world_id"]


def test_replay_verify_detects_a_changed_reply(tmp_path: Path) -> None:
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.replay import verify_world
    from workbench.study import run_study

    path = recall_study(tmp_path, [{"condition": "naive"}])
    out = tmp_path / "run"
    run_study(load_study(path), out, progress=False)
    records = load_run(out)
    wid = records.worlds[0]["world_id"]
    step = next(s for s in records.steps[wid] if s["purpose"] == "recall")
    step["reply"]["text"] = "something else, 1 January 1999"
    assert verify_world(records, wid)


def test_cli_runs_the_smoke_study_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    out = tmp_path / "smoke"
    assert main(["validate", str(ROOT / "params" / "recall-smoke.yaml")]) == 0
    assert main(["run", str(ROOT / "params" / "recall-smoke.yaml"), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "SIMULATED" in text and "authority_collapse" in text and "accuracy" in text
    assert main(["metrics", str(out)]) == 0
    text = capsys.readouterr().out
    assert "by_mode_condition" in text and (out / "metrics" / "tables" / "differences.csv").is_file()
    from workbench.records import load_run

    wid = load_run(out).worlds[0]["world_id"]
    assert main(["replay", str(out), "--world", wid]) == 0
    assert "RECALL" in capsys.readouterr().out
    assert main(["replay", str(out), "--world", wid, "--verify"]) == 0


def test_minilm_embedder_runs_a_world(tmp_path: Path) -> None:
    from workbench.embeddings import EmbedderUnavailable, get_embedder

    try:
        get_embedder("minilm")
    except EmbedderUnavailable as exc:
        pytest.skip(f"MiniLM not installed: {exc}")
    path = recall_study(tmp_path, [{"condition": "lightweight", "embedder": "minilm"}])
    w = run_cell(path, 0, [0])[0].world
    assert w["valid"] and w["retrieval"]["embedder"] == "minilm" and w["retrievals"][0]["hits"]


def test_bad_inputs_fail_with_the_file_and_field(tmp_path: Path) -> None:
    from workbench.inputs import InputFileError
    from workbench.params import ParamsError, load_study

    with pytest.raises(ParamsError, match=r"cells\[0\]\.condition"):
        load_study(recall_study(tmp_path, [{"condition": "shared"}]))
    with pytest.raises(ParamsError, match="trusting"):
        load_study(recall_study(tmp_path, [{"model": "sim-recall/nobody"}]))
    with pytest.raises(ParamsError, match="known roles|expected roles"):
        load_study(recall_study(tmp_path, [{"agents": {"janitor": {"model": "sim-recall/trusting"}}}]))
    bad = legal_script("legal_bad")
    bad["turns"][-1]["ground_truth"] = []
    with pytest.raises(InputFileError, match=r"legal_bad\.json.*ground_truth"):
        load_study(recall_study(tmp_path, [{"condition": "naive"}], scripts=[bad], name="bad"))
    with pytest.raises(InputFileError, match="script_ids"):
        load_study(recall_study(tmp_path, [{"script_ids": ["nope"]}], name="ids",
                                scripts_dir=write_scripts(tmp_path / "good", [legal_script()])))
