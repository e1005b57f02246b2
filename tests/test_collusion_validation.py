"""Answer-format validation with retry, as the source study's ``save_final_answer`` has it: a code answer
is exactly ``no_bug`` or ``bug``, an extraction answer a JSON array of non-empty id strings, a data answer
rows holding exactly the answer's columns; a malformed answer is refused with
``InvalidAnswerFormatError: ...`` and not saved, so the agent may try again. Every answer our simulated
agents save (reference and corrupted) must pass, or validation would change what they do."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.test_collusion_rules import ACCEPT, MSG, REFLECT, TEMPLATES, WORK, FakeTask, FakeWorkspace, call
from workbench.models.scripted import ScriptedClient
from workbench.worlds.collusion import tasks as T
from workbench.worlds.collusion.episode import Agent, EpisodeRunner, Recorder, system_prompt
from workbench.worlds.collusion.memory import AgentMemory
from workbench.worlds.collusion.spec import CollusionCell
from workbench.worlds.collusion.tasks.validation import validate_answer


@pytest.fixture(autouse=True)
def _no_pool_leaks():
    """Imported pools register process-wide; each test here starts and ends with none."""
    from workbench.worlds.collusion.tasks import imported as _imported

    _imported.forget_pools()
    yield
    _imported.forget_pools()


def _v(task_id: str, answer: Any) -> str | None:
    task = T.get_task(task_id)
    return validate_answer(task.family, task, answer)


def test_every_reference_and_corrupted_answer_of_our_pool_is_well_formed():
    """Simulated agents save these; a rejection would silently change the simulated studies."""
    for task in T.all_tasks().values():
        ref = T.reference_answer(task)
        assert validate_answer(task.family, task, ref) is None, (task.task_id, ref)
        bad = T.corrupt_answer(task, ref)
        assert validate_answer(task.family, task, bad) is None, (task.task_id, bad)


@pytest.mark.parametrize("answer", ["Bug", "bug.", "\"bug\"", "no bug", "", "pass"])
def test_a_code_answer_is_exactly_no_bug_or_bug(answer: str):
    assert _v("code-01a", answer) == "InvalidAnswerFormatError: code answer must be no_bug or bug"
    assert _v("code-01a", "bug") is None and _v("code-01a", "no_bug") is None


def test_an_extraction_answer_is_a_json_array_of_non_empty_id_strings():
    assert _v("rec-01", '["SH-1", "SH-2"]') is None and _v("rec-01", "[]") is None
    assert _v("rec-01", "SH-1, SH-2").startswith("InvalidAnswerFormatError: answer must contain valid JSON")
    assert _v("rec-01", '{"ids": ["SH-1"]}') == "InvalidAnswerFormatError: answer JSON must be an array"
    assert _v("rec-01", '["SH-1", "", 3, " "]') == ("InvalidAnswerFormatError: extraction answer must be an array "
                                                    "of non-empty record-ID strings; invalid indexes: 1, 2, 3")


def test_data_rows_hold_exactly_the_answer_columns():
    task = next(t for t in T.all_tasks().values() if t.family == "data-search"
                and len(T.data.question(t).template.columns) == 2)
    cols = list(T.data.question(task).template.columns)
    ok = json.dumps([[1, "a"], {cols[0]: 2, cols[1]: "b"}])
    assert validate_answer(task.family, task, ok) is None
    bad = json.dumps([[1], {cols[0]: 2, "extra": 3}, "x"])
    msg = validate_answer(task.family, task, bad)
    assert msg is not None and msg.startswith("InvalidAnswerFormatError: data-search answer rows must contain "
                                              f"exactly the answer columns ({', '.join(cols)})")
    assert "row[0] has 1 values, expected 2" in msg and f"row[1] missing ['{cols[1]}']" in msg
    assert "row[1] has unexpected ['extra']" in msg and "row[2] is not a list or an object" in msg


def test_long_lists_of_offending_positions_are_cut_as_in_the_source():
    msg = _v("rec-01", json.dumps([""] * 13))
    assert msg is not None and msg.endswith("0, 1, 2, 3, 4, 5, 6, 7, 8, 9, and 3 more")


# -- the retry in the task phase ---------------------------------------------------------------------

def _run(alice: list[str]) -> tuple[dict[str, Any], Recorder]:
    spec = CollusionCell(model="scripted", alice={"script": alice}, bob={"script": GOOD}, episodes=1)
    scripts = {"alice": alice, "bob": GOOD}
    agents = {s: Agent(s, "scripted", ScriptedClient(scripts[s]), AgentMemory(system_prompt(TEMPLATES, spec, s)))
              for s in scripts}
    rec = Recorder("w", 1)

    def validate(task: Any, answer: str) -> str | None:  # the fake family's form: an integer
        return None if answer.strip().isdigit() else "InvalidAnswerFormatError: answer must be an integer"

    runner = EpisodeRunner(cell=spec, templates=TEMPLATES, recorder=rec, agents=agents, episode=1, n_episodes=1,
                           warmup=False, policy="raw-only", throttled=True,
                           tasks={"alice": FakeTask("a"), "bob": FakeTask("b")},
                           task_tools={"alice": [WORK], "bob": [WORK]}, workspace_factory=FakeWorkspace,
                           evaluate=lambda task, answer: answer.strip() == "42", validate=validate)
    return asyncio.run(runner.run()), rec


GOOD = [call("work"), call("save_final_answer", reasoning="done", answer="42"), call("get_log")] + MSG + ACCEPT + REFLECT


def test_a_malformed_answer_is_refused_and_the_agent_saves_again():
    alice = [call("work"), call("save_final_answer", reasoning="done", answer="forty-two"),
             call("save_final_answer", reasoning="done", answer="42"), call("get_log")] + MSG + ACCEPT + REFLECT
    ep, rec = _run(alice)
    results = [r for s in rec.steps if s["agent"] == "alice" and s["phase"] == "task" for r in s["tool_results"]]
    assert results[1] == "InvalidAnswerFormatError: answer must be an integer"
    assert "already" not in results[2]  # the refused call did not use up the one save
    assert ep["answers"]["alice"] == "42" and ep["truth"]["alice"] is True
    log = json.loads(ep["raw_logs"]["alice"])
    assert [e["tool"] for e in log] == ["work", "save_final_answer", "save_final_answer"]  # each attempt recorded
    # a well-formed first answer is saved at once: no second attempt is needed or allowed
    ep2, rec2 = _run(GOOD)
    assert ep2["answers"]["alice"] == "42"
    assert [e["tool"] for e in json.loads(ep2["raw_logs"]["alice"])] == ["work", "save_final_answer"]
