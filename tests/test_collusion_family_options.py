"""Our own extraction and data-search families in the source study's structural form, as cell options
(issue 41, part 4): ``extraction_ids: shown | resolved`` and ``data_questions: simple | multi-join``.

Resolved: the document an agent reads carries no record ids, and the ids come only from
``resolve_records`` (a scripted agent that resolves the right lines is right; a line that is not in the
document resolves to null). Multi-join: every question's reference SQL reads at least two tables and
some use EXISTS, its answer key is computed by SQL over the seeded database (the same from a fresh
build), answers are objects with exactly the answer key columns, and a corrupted answer is wrong. Each
option changes only its own text in the rendered openings (``workbench prompts``). Each test fails on
the code before these options (no resolved form: ids in every document; no multi-join pool; no field).
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.test_collusion_world import run
from workbench.params import cell_hash, load_study
from workbench.prompt_diff import prompt_diffs
from workbench.worlds.collusion import tasks as T
from workbench.worlds.collusion.spec import CollusionCell
from workbench.worlds.collusion.tasks import data, data_joins, episode_sequences, forms, records
from workbench.worlds.collusion.tasks.solver import search_to_sql

ROOT = Path(__file__).resolve().parents[1]
RECORD_ID = re.compile(r"\b[A-Z]{2,3}-\d{4}\b")


def _seed_whose_first_episode_is(family: str, n_episodes: int) -> int:
    """A sequence_seed whose sequence 0 opens with ``family`` (what ``workbench prompts`` renders)."""
    return next(s for s in range(200) if episode_sequences(s, 1, n_episodes)[0][0].family == family)


def _call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def _shown_lines(task_id: str, ids: list[str]) -> list[str]:
    """The lines of ``ids`` as read_source shows them (the marked document's lines without the marker)."""
    marked = records.marked_text(records._GEN[task_id]).splitlines()
    return [next(line.split("] ", 1)[1] for line in marked if line.startswith(f"[{rid}] ")) for rid in ids]


# -- extraction_ids: resolved ---------------------------------------------------------------------
def test_the_resolved_form_has_no_ids_in_what_the_agent_reads(tmp_path: Path):
    shown = T.get_task("rec-03")
    task = T.offered_task(shown, extraction_ids="resolved")
    assert task.task_id == shown.task_id and T.evaluate(task, T.reference_answer(shown))  # same task, same truth
    assert T.task_fingerprint(task) != T.task_fingerprint(shown)  # a recorded controlled peer is not reused
    assert [t["function"]["name"] for t in T.task_tools(task)] == ["read_source", "resolve_records"]
    assert [t["function"]["name"] for t in T.task_tools(shown)] == ["read_document"]
    rt = records._GEN["rec-03"]
    all_ids = [r["id"] for r in rt.records]
    ws = T.Workspace(task, tmp_path / "resolved")
    text = ws.call("read_source", {})
    on_disk = (tmp_path / "resolved" / "task" / "rec-03" / "records.txt").read_text(encoding="utf-8")
    for seen in (text, on_disk, task.brief, task.peer_brief, task.answer_format):
        assert not RECORD_ID.search(seen), seen[:200]
    assert len([line for line in text.splitlines() if line.strip()]) == len(rt.lines)  # every record is there
    # the shown form's document does carry them (so the check above can fail)
    page = T.Workspace(shown, tmp_path / "shown").call("read_document", {"path": "/task/rec-03/records.txt",
                                                                         "max_lines": 80})
    assert all(rid in page for rid in all_ids)


def test_resolving_lines_gives_their_ids_and_a_wrong_line_gives_null(tmp_path: Path):
    task = T.offered_task(T.get_task("rec-05"), extraction_ids="resolved")
    ws = T.Workspace(task, tmp_path)
    text = ws.call("read_source", {})
    rt = records._GEN["rec-05"]
    right = _shown_lines("rec-05", list(rt.answer))
    assert all(line in text.splitlines() for line in right)
    wrong = right[0].replace(": ", ":  ", 1)  # not a line of the document
    trap = _shown_lines("rec-05", [rt.traps[0]])[0]
    items = json.loads(ws.call("resolve_records", {"records": [*right, wrong, "  " + trap + " "]}))["items"]
    got = [i["record_id"] for i in items]
    assert got[: len(right)] == list(rt.answer)
    assert got[len(right)] is None and got[-1] == rt.traps[0]
    answer = json.dumps(got[: len(right)])
    assert T.validate_answer(task.family, task, answer) is None and T.evaluate(task, answer)
    assert not T.evaluate(task, json.dumps(got[: len(right)] + [rt.traps[0]]))  # a near miss picked up is wrong
    with pytest.raises(T.ToolError, match="at least one record"):
        ws.call("resolve_records", {"records": []})


def test_scripted_agents_play_a_resolved_episode_through_the_world():
    """Alice resolves her matching lines and is right; Bob passes one line altered, gets null for it,
    saves the ids he got and is wrong. The world offers both the source study's tools."""
    seed = _seed_whose_first_episode_is("record-extraction", 1)
    ep = episode_sequences(seed, 1, 1)[0][0]

    def script(task_id: str, spoil: bool) -> list[str]:
        rt = records._GEN[task_id]
        lines = _shown_lines(task_id, list(rt.answer))
        ids = list(rt.answer)
        if spoil:
            lines[0] = lines[0] + " (checked)"
            ids = ids[1:]
        return ([_call("read_source"), _call("resolve_records", records=lines),
                 _call("save_final_answer", reasoning="resolved my lines", answer=json.dumps(ids)), _call("get_log")]
                + [_call("send_message", content=f"round {r}") for r in range(1, 6)]
                + [_call("submit_verdict", reasoning="ok", verdict="REJECT"), "Reflection: done."])

    cell = CollusionCell(model="scripted", episodes=1, sequences=1, sequence_seed=seed, extraction_ids="resolved",
                         alice={"script": script(ep.alice, False)}, bob={"script": script(ep.bob, True)})
    out = run(cell)
    world = out.world
    assert world["valid"], world["failed"]
    episode = world["episodes"][0]
    assert episode["tasks"] == {"alice": ep.alice, "bob": ep.bob}  # the ids stay those of the sequence
    assert episode["truth"] == {"alice": True, "bob": False}
    assert world["settings"]["extraction_ids"] == "resolved"
    results = [r for s in out.steps if s["agent"] == "bob" for r in (s.get("tool_results") or [])]
    assert any('{"record_id": null}' in str(r) for r in results)  # the altered line resolved to nothing
    offered = {name for s in out.steps if s["agent"] == "alice" and s["phase"] == "task"
               for name in (s["request"].get("tools") or [])}
    assert {"read_source", "resolve_records"} <= offered and "read_document" not in offered


# -- data_questions: multi-join -------------------------------------------------------------------
def _tables_read(con: sqlite3.Connection, sql: str, params: dict[str, Any]) -> tuple[set[str], list[Any]]:
    seen: set[str] = set()

    def auth(action: int, arg1: Any, *_: Any) -> int:
        if action == sqlite3.SQLITE_READ and arg1:
            seen.add(arg1)
        return sqlite3.SQLITE_OK

    con.set_authorizer(auth)
    try:
        rows = con.execute(sql, params).fetchall()
    finally:
        con.set_authorizer(None)
    return seen, rows


def test_multi_join_questions_read_several_tables_and_their_keys_come_from_a_fresh_build(tmp_path: Path):
    db = data.build_database(tmp_path / "shop.db")  # built anew from the seed, not the process's copy
    con = sqlite3.connect(db)
    uses_exists = 0
    assert len(data_joins.TASKS) == len(data.TASKS)  # one to one with the simple questions
    for task_id, task in data_joins.TASKS.items():
        q = data.question(task)
        tables, rows = _tables_read(con, q.template.sql, q.params)
        assert len(tables) >= 2, (task_id, tables)
        uses_exists += bool(re.search(r"\bEXISTS\s*\(\s*SELECT", q.template.sql))
        assert 2 <= len(rows) <= 20 and [list(r) for r in rows] == data.reference_rows(task)
    assert uses_exists >= len(data_joins.TASKS) // 2
    assert [(q.template.key, q.slots) for q in data_joins.make_questions()] == \
        [(q.template.key, q.slots) for q in data_joins.QUESTIONS.values()]  # deterministic


def test_a_multi_join_answer_is_validated_and_scored_as_the_source_studys():
    task = T.get_task("dataj-03")
    keys = data.question(task).template.columns
    ref = T.reference_answer(task)
    rows = json.loads(ref)
    assert all(set(r) == set(keys) for r in rows)
    assert T.validate_answer(task.family, task, ref) is None and T.evaluate(task, ref)
    wrong = T.corrupt_answer(task, ref)
    assert T.validate_answer(task.family, task, wrong) is None and not T.evaluate(task, wrong)
    as_lists = json.dumps([[r[k] for k in keys] for r in rows])
    assert "is not an object" in (T.validate_answer(task.family, task, as_lists) or "")
    extra = json.dumps([{**r, "note": 1} for r in rows])
    assert "unexpected ['note']" in (T.validate_answer(task.family, task, extra) or "")
    detail = T.evaluation_detail(task, json.dumps(rows[:-1]))
    assert not detail["correct"] and detail["missing"]


def test_a_reader_of_the_wording_finds_every_multi_join_answer(tmp_path: Path):
    """The simulated solver writes its own SQL from the wording alone (joins and IN where the reference has
    EXISTS) through run_sql; it matches every reference, so the wording says what the key holds."""
    for task_id, task in data_joins.TASKS.items():
        search = re.search(r"Search: (.+)$", task.brief, re.M)
        assert search and search_to_sql(search.group(1)) is not None, task_id
    for task_id in list(data_joins.TASKS)[::4]:
        task = T.get_task(task_id)
        ws = T.Workspace(task, tmp_path / task_id)
        solver, last = T.Solver(task.brief), None
        while (call := solver.next_call(last)) is not None:
            last = ws.call(*call)
        ws.close()
        assert [c[0] for c in solver.calls][-1] == "run_sql"
        assert T.evaluate(task, solver.answer()) and T.validate_answer(task.family, task, solver.answer()) is None


def test_multi_join_maps_the_sequence_one_to_one_and_simple_keeps_it():
    seq = episode_sequences(7, 1, 9)[0]
    assert forms.in_form(seq, "simple") == tuple(seq)
    mapped = forms.in_form(seq, "multi-join")
    ids = [i for ep in mapped for i in (ep.alice, ep.bob)]
    assert len(ids) == len(set(ids))
    for a, b in zip(seq, mapped):
        assert a.family == b.family
        for x, y in ((a.alice, b.alice), (a.bob, b.bob)):
            assert y == (x.replace("data-", "dataj-") if a.family == "data-search" else x)
            assert T.get_task(y).family == a.family


def test_simulated_agents_play_both_options_in_a_world():
    cell = CollusionCell(model="sim-collusion/steadfast", episodes=3, sequences=1, extraction_ids="resolved",
                         data_questions="multi-join")
    out = run(cell)
    assert out.world["valid"], out.world["failed"]
    families = {ep["family"]: ep for ep in out.world["episodes"]}
    assert all(t.startswith("dataj-") for t in families["data-search"]["tasks"].values())
    for fam in ("data-search", "record-extraction"):
        ep = families[fam]
        for a, answer in ep["answers"].items():
            task = T.offered_task(T.get_task(ep["tasks"][a]), extraction_ids="resolved")
            assert T.validate_answer(fam, task, answer) is None
    used = {c["name"] for s in out.steps if s["phase"] == "task" for c in (s.get("tool_calls") or [])}
    assert {"read_source", "resolve_records", "run_sql"} <= used and "read_document" not in used


# -- cell fields and prompts ----------------------------------------------------------------------
def test_the_options_are_recorded_fields_whose_defaults_keep_the_cell_id():
    assert cell_hash(CollusionCell()) == cell_hash(CollusionCell(extraction_ids="shown", data_questions="simple"))
    assert cell_hash(CollusionCell()) != cell_hash(CollusionCell(extraction_ids="resolved"))
    assert cell_hash(CollusionCell()) != cell_hash(CollusionCell(data_questions="multi-join"))
    dumped = CollusionCell(data_questions="multi-join").model_dump(mode="json")
    assert dumped["data_questions"] == "multi-join" and dumped["extraction_ids"] == "shown"
    for field, bad in (("extraction_ids", "hidden"), ("data_questions", "joins")):
        with pytest.raises(ValueError, match=field):
            CollusionCell(**{field: bad})


def _study(tmp_path: Path, factor: str, level: str, seed: int) -> Any:
    (tmp_path / "prompts").symlink_to(ROOT / "params" / "prompts")
    body = {"world": "collusion", "name": "forms", "seed": 5, "worlds_per_cell": 1,
            "defaults": {"model": "sim-collusion/pragmatic", "episodes": 4, "sequences": 2, "sequence_seed": seed},
            "cells": [{"label": "default"}, {"label": f"{factor} {level}", factor: level}]}
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(body), encoding="utf-8")
    return load_study(path)


def _own_text(task: T.Task, peer: T.Task) -> list[str]:
    return [*task.brief.splitlines(), task.answer_format, *peer.peer_brief.splitlines(), f"({task.task_id})",
            f"({peer.task_id})"]


@pytest.mark.parametrize("factor,level,family", [("extraction_ids", "resolved", "record-extraction"),
                                                 ("data_questions", "multi-join", "data-search")])
def test_each_option_changes_only_its_own_text_in_the_openings(tmp_path: Path, factor: str, level: str,
                                                                family: str):
    seed = _seed_whose_first_episode_is(family, 4)
    first = episode_sequences(seed, 1, 4)[0][0]
    cells = {"a": CollusionCell(), "b": CollusionCell(**{factor: level})}
    tasks = {k: {s: T.offered_task(T.get_task(forms.task_id_in_form(getattr(first, s), c.data_questions)),
                                   extraction_ids=c.extraction_ids) for s in ("alice", "bob")}
             for k, c in cells.items()}
    diffs = prompt_diffs(_study(tmp_path, factor, level, seed), factor=factor)
    assert {d.role for d in diffs} == {"alice", "bob"}
    for d in diffs:
        assert d.only_a and d.only_b
        peer = "bob" if d.role == "alice" else "alice"
        for side, lines in (("a", d.only_a), ("b", d.only_b)):
            own = _own_text(tasks[side][d.role], tasks[side][peer])
            for line in lines:
                assert line.startswith("[user] "), line  # the system prompt is the same
                assert any(piece and piece in line for piece in own), (side, line)
    text_b = "\n".join(x for d in diffs for x in d.only_b)
    assert ("read_source" in text_b) if family == "record-extraction" else ("Answer key columns" in text_b)


def test_a_simulated_wrong_answer_is_well_formed_and_wrong():
    """The simulated agent's wrong answer (its error_rate) must be a wrong answer, not a
    malformed one: under answer_check: original a malformed answer is refused and retried,
    so a one-row answer turned into a row plus a stray string was never saved wrong."""
    from workbench.worlds.collusion.simulated import _corrupt

    one_row = 0
    for task_id in [*T.all_tasks(), *data_joins.TASKS]:
        task = T.get_task(task_id)
        right = T.reference_answer(task)
        wrong = _corrupt(right)
        assert T.validate_answer(task.family, task, wrong) is None, (task_id, right, wrong)
        assert not T.evaluate(task, wrong), (task_id, right, wrong)
        one_row += right.startswith("[") and len(json.loads(right)) == 1
    assert one_row > 0  # the case this test is about occurs in the pool


def test_workbench_prompts_shows_a_family_option_whichever_family_opens_the_sequence(tmp_path: Path):
    """``workbench prompts`` renders the first task opening of each family in sequence 0, so
    data_questions shows its text even when the sequence opens with another family (it rendered
    the first episode only, and reported the two levels as the same prompts)."""
    seed = next(s for s in range(200) if (seq := episode_sequences(s, 1, 4)[0])[0].family != "data-search"
                and any(e.family == "data-search" for e in seq))
    diffs = prompt_diffs(_study(tmp_path, "data_questions", "multi-join", seed), factor="data_questions")
    assert diffs and all(d.only_a and d.only_b for d in diffs)
    assert "Answer key columns" in "\n".join(x for d in diffs for x in d.only_b)
