"""Issue 18, items 1-3 and 7: conditions a researcher can compare (baseline with the
conversation in context vs isolated), agents that write memory, and conflicts by value."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.test_recall_world import HEARING_Q, SHIPPED_SCRIPTS, _r, _t, recall_study, run_cell
from workbench.stores.vector import VectorMemory, Weights


class TableEmbedder:
    """Hand-picked unit vectors: the wording of two paraphrases is far apart here."""

    name = "table"
    dim = 3

    def __init__(self, table: dict[str, tuple[float, float, float]]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.table[t] for t in texts], dtype=np.float64)


PARAPHRASES = {
    "The brief is due July 22, 2026.": (1.0, 0.0, 0.0),
    "Deadline for the appellate brief: 22 July 2026 (court order).": (0.6, 0.8, 0.0),
    "The brief is due July 29, 2026.": (0.0, 1.0, 0.0),
    "Noted.": (0.0, 0.0, 1.0),
}


def test_agreeing_paraphrases_never_remove_each_other_and_a_true_conflict_still_does() -> None:
    mem = VectorMemory(TableEmbedder(PARAPHRASES), Weights(beta=0.4), invalidation=True, invalidate_stale=True)
    low = mem.add("The brief is due July 22, 2026.", author_role="paralegal", authority=0.4, turn=1,
                  fact_id="F1", value="2026-07-22")
    # Same value, other words, higher authority: kept side by side, noted as a duplicate.
    high = mem.add("Deadline for the appellate brief: 22 July 2026 (court order).", author_role="senior_lawyer",
                   authority=1.0, turn=2, fact_id="F1", value="2026-07-22")
    assert low.entry is not None and high.entry is not None and high.removed == ()
    assert [e.entry_id for e in mem.entries] == [1, 2]
    assert [(c.type, c.action, c.new.entry_id, c.old.entry_id, c.removed_id) for c in high.conflicts] == \
        [("duplicate", "kept", 2, 1, None)]
    # Same value, lower authority again (an agreeing repeat): not refused either.
    again = mem.add("The brief is due July 22, 2026.", author_role="client_rep", authority=0.2, turn=3,
                    fact_id="F1", value="2026-07-22")
    assert again.entry is not None and again.refused_by is None and len(mem) == 3
    # A different value from a lower authority is refused (lower-authority) ...
    wrong = mem.add("The brief is due July 29, 2026.", author_role="client_rep", authority=0.2, turn=4,
                    fact_id="F1", value="2026-07-29")
    assert wrong.entry is None and wrong.refused_by == 2
    assert [(c.type, c.action, c.removed_id) for c in wrong.conflicts] == [("lower-authority", "refused", 4)]
    # ... and from the top it removes every lower-authority entry of the old value (and,
    # with invalidate_stale, the equal-authority older one as stale).
    fix = mem.add("The brief is due July 29, 2026.", author_role="senior_lawyer", authority=1.0, turn=5,
                  fact_id="F1", value="2026-07-29")
    assert fix.entry is not None and {e.entry_id for e in fix.removed} == {1, 2, 3}
    assert sorted((c.type, c.removed_id) for c in fix.conflicts) == \
        [("lower-authority", 1), ("lower-authority", 3), ("stale", 2)]
    assert [e.entry_id for e in mem.entries] == [5]
    assert [c.type for c in mem.conflicts] == ["duplicate", "duplicate", "duplicate", "lower-authority",
                                               "lower-authority", "stale", "lower-authority"]


def test_without_stale_an_equal_authority_conflict_keeps_both_and_a_value_never_meets_a_wording() -> None:
    mem = VectorMemory(TableEmbedder(PARAPHRASES), Weights(), invalidation=True)
    mem.add("The brief is due July 22, 2026.", author_role="associate", authority=0.7, turn=1, fact_id="F1",
            value="2026-07-22")
    r = mem.add("The brief is due July 29, 2026.", author_role="associate", authority=0.7, turn=2, fact_id="F1",
                value="2026-07-29")
    assert r.removed == () and r.conflicts == () and len(mem) == 2
    # No value on one side: nothing decides, nothing is removed.
    r2 = mem.add("Noted.", author_role="senior_lawyer", authority=1.0, turn=3, fact_id="F1")
    assert r2.removed == () and r2.conflicts == () and len(mem) == 3
    # Without values, wording decides unless the caller says it never does.
    for compare_wording, removed in ((True, 1), (False, 0)):
        m = VectorMemory(TableEmbedder(PARAPHRASES), Weights(), invalidation=True, compare_wording=compare_wording)
        m.add("Noted.", author_role="paralegal", authority=0.4, turn=1, fact_id="F1")
        r3 = m.add("The brief is due July 29, 2026.", author_role="senior_lawyer", authority=1.0, turn=2, fact_id="F1")
        assert len(r3.removed) == removed


# -- baseline: the conversation in context ------------------------------------------------------
def failures(outcomes: list[Any], mode: str | None = None) -> tuple[int, int]:
    rs = [r for o in outcomes for r in o.world["recalls"] if mode is None or r["failure_mode"] == mode]
    return sum(not r["correct"] for r in rs), len(rs)


def test_baseline_puts_the_conversation_in_context_and_beats_isolated_for_a_careful_profile(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "baseline", "model": "sim-recall/careful"},
                                   {"condition": "isolated", "model": "sim-recall/careful"}],
                        defaults={"scripts": str(SHIPPED_SCRIPTS)})
    base = run_cell(path, 0, range(15))
    iso = run_cell(path, 1, range(15))
    wrong_b, n = failures(base)
    wrong_i, n_i = failures(iso)
    assert n == n_i > 0
    acc_b, acc_i = 1 - wrong_b / n, 1 - wrong_i / n
    assert acc_b >= 0.6 and acc_b - acc_i >= 0.4, (acc_b, acc_i)
    w = base[0].world
    assert w["retrieval"]["conversation"] is True and w["memory_log"] == [] and w["retrievals"] == []
    last = w["recalls"][-1]
    assert last["context"]["case_file"] and last["context"]["conversation_turns"] == \
        [t["turn"] for t in w["turns"] if t["turn"] < last["turn"]]
    wi = iso[0].world
    assert wi["retrieval"]["conversation"] is False and all(r["context"]["conversation_turns"] == []
                                                             for r in wi["recalls"])


def test_context_turns_limits_the_conversation_shown(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "baseline", "context_turns": 2},
                                   {"condition": "baseline"}])
    short = run_cell(path, 0, [0])[0].world
    full = run_cell(path, 1, [0])[0].world
    turns = [t["turn"] for t in full["turns"]]
    for r_short, r_full in zip(short["recalls"], full["recalls"]):
        before = [t for t in turns if t < r_short["turn"]]
        assert r_full["context"]["conversation_turns"] == before
        assert r_short["context"]["conversation_turns"] == before[-2:]
    assert short["retrieval"]["context_turns"] == 2 and full["retrieval"]["context_turns"] is None


# -- agents write memory: a profile that repeats a wrong value pollutes it --------------------------
def anchoring_script() -> dict[str, Any]:
    """Three roles first voice the old hearing date (privately: not written), the senior
    lawyer writes the correction, the same three then speak about the hearing without a
    date; external counsel, who never voiced a date, recalls it."""
    return {
        "script_id": "legal_anchor_01", "domain": "legal",
        "initial_facts": [
            {"id": "F1", "text": "Hearing listed for March 3, 2026.", "tier": "contextual", "authority_level": 0.7},
            {"id": "F2", "text": "The expert witness is Dr. Amara Osei.", "tier": "contextual", "authority_level": 1.0},
        ],
        "turns": [
            _t(1, "user", "The Harlow appeal team meets to plan the hearing."),
            _t(2, "paralegal", "The hearing date for the Harlow appeal is March 3, 2026.", fact="F1"),
            _t(3, "associate", "I have the hearing for the Harlow appeal on March 3, 2026.", fact="F1"),
            _t(4, "client_rep", "The client plans travel for the Harlow appeal hearing on March 3, 2026.", fact="F1"),
            _t(5, "senior_lawyer", "Correction from the clerk: the hearing for the Harlow appeal moved to "
                                   "April 14, 2026.", write=True, fact="F1"),
            _t(6, "paralegal", "I am preparing the bundle for the Harlow appeal hearing.", fact="F1"),
            _t(7, "associate", "I will book a room near court for the Harlow appeal hearing.", fact="F1"),
            _t(8, "client_rep", "The client asks who attends the Harlow appeal hearing.", fact="F1"),
            _r(9, "external_counsel", "I am preparing the witness.", "F1", HEARING_Q, ["April 14, 2026"],
               "memory_anchoring"),
        ],
    }


def test_replies_that_repeat_a_wrong_value_raise_anchoring_failures(tmp_path: Path) -> None:
    cells = [{"condition": "naive", "model": f"sim-recall/{p}", "memory_writes": w}
             for p in ("echo", "careful") for w in ("script", "replies", "both")]
    path = recall_study(tmp_path, cells, scripts=[anchoring_script()])
    runs = {(c["model"].split("/")[1], c["memory_writes"]): run_cell(path, i, range(20)) for i, c in enumerate(cells)}
    wrong = {key: failures(out, "memory_anchoring")[0] for key, out in runs.items()}
    # The echoing team restates the date it voiced first; stored, its replies outnumber the correction.
    assert wrong["echo", "replies"] - wrong["echo", "script"] >= 10, wrong
    assert wrong["echo", "both"] - wrong["echo", "script"] >= 10, wrong
    # The same script writes plus acknowledgements (a careful team): no more failures than script alone,
    # so it is the repeated value, not the writing of replies as such.
    assert wrong["careful", "both"] <= wrong["careful", "script"] + 2, wrong
    # Every write records its origin; the echoes are replies stating the old value.
    w = runs["echo", "both"][0].world
    origins = {m["origin"] for m in w["memory_log"]}
    assert origins == {"initial", "script", "reply"}
    echoed = [m for m in w["memory_log"]
              if m["origin"] == "reply" and m["value"] == "date:2026-03-03" and 5 < m["turn"] < 9]
    assert len({m["author_role"] for m in echoed} & {"paralegal", "associate", "client_rep"}) >= 2, echoed
    assert all(m["turn"] > 0 and m["authority"] is not None and m["value_source"] == "rule" for m in echoed)
    assert not any(m["origin"] == "reply" for m in runs["echo", "script"][0].world["memory_log"])


def test_world_records_each_invalidation_event_with_its_type(tmp_path: Path) -> None:
    from tests.test_recall_world import legal_script

    path = recall_study(tmp_path, [{"condition": "lightweight-invalidation"}], scripts=[legal_script()])
    w = run_cell(path, 0, [0])[0].world
    log, events = w["memory_log"], w["conflicts"]
    by_turn = {m["turn"]: m for m in log if m["origin"] == "script"}
    # turns 4 and 5: paralegal and associate state the same hearing date in other words: both kept
    assert not by_turn[4]["refused"] and not by_turn[5]["refused"] and by_turn[5]["removed"] == []
    dup = [events[i] for i in by_turn[5]["conflicts"]]
    assert [(e["type"], e["action"], e["removed_id"]) for e in dup] == [("duplicate", "kept", None)] * 2
    assert {e["old"]["origin"] for e in dup} == {"initial", "script"}
    # turn 6: the client rep's other deadline is refused by the higher-authority statements of it
    refused = [events[i] for i in by_turn[6]["conflicts"]]
    assert by_turn[6]["refused"] and [(e["type"], e["action"]) for e in refused] == [("lower-authority", "refused")]
    assert refused[0]["new"]["value"] == "date:2026-07-08" and refused[0]["removed_id"] == by_turn[6]["entry_id"]
    # turn 8: the senior lawyer's correction removes the lower-authority entries of the old date
    removed = [events[i] for i in by_turn[8]["conflicts"] if events[i]["action"] == "removed"]
    assert removed and all(e["type"] == "lower-authority" and e["old"]["value"] == "date:2026-03-03"
                           and e["new"]["value"] == "date:2026-04-14" for e in removed)
    assert {e["removed_id"] for e in removed} == {x["entry_id"] for x in by_turn[8]["removed"]}
    for e in events:
        assert set(e) == {"turn", "type", "action", "fact_id", "new", "old", "removed_id"}
        assert set(e["new"]) == set(e["old"]) == {"entry_id", "value", "authority", "author_role", "turn", "origin"}


def test_every_turn_retrieval_shows_memory_on_statement_turns(tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "naive", "retrieve": "every-turn"}, {"condition": "naive"}])
    every = run_cell(path, 0, [0])[0]
    recall_only = run_cell(path, 1, [0])[0]
    turn_prompts = [s["request"]["prompt"] for s in every.steps if s["purpose"] == "turn"]
    assert turn_prompts and all("Shared memory (" in p for p in turn_prompts)
    assert {r["purpose"] for r in every.world["retrievals"]} == {"turn", "recall"}
    assert not any("Shared memory (" in s["request"]["prompt"] for s in recall_only.steps if s["purpose"] == "turn")
    assert {r["purpose"] for r in recall_only.world["retrievals"]} == {"recall"}


# -- values ----------------------------------------------------------------------------------------
def test_rule_values_agree_across_wordings_and_take_the_corrected_value() -> None:
    from workbench.worlds.recall.values import judged_value, rule_value

    assert rule_value("The brief is due July 22, 2026.") == rule_value("Deadline: 22 July 2026 (court order).") \
        == "date:2026-07-22"
    assert rule_value("The conference moved from March 3, 2026 to March 17, 2026.") == "date:2026-03-17"
    assert rule_value("Update: the rebalance is now on October 7, 2026 (was September 30, 2026).") == \
        "date:2026-10-07"
    assert rule_value("The deadline is July 29, 2026, not July 22, 2026.") == "date:2026-07-29"
    # two values that are both current (a dose and its interval) are kept as a set
    assert rule_value("Oxycodone 10 mg every 4 hours.") == "num:10|mg;num:4|hours"
    assert rule_value("Offer: $180,000.") != rule_value("Offer: $240,000.")
    assert rule_value("The contact is Dana Whitfield.") == rule_value("Dana Whitfield remains our contact.")
    assert rule_value("Noted.") is None and rule_value("") is None
    assert judged_value("July 22, 2026") == "date:2026-07-22" and judged_value("NONE") is None
    assert judged_value("date:2026-07-22") == "date:2026-07-22"
    # a script's declared value compares with the rule's value of a reply that states it
    from workbench.worlds.recall.values import statement_value

    assert statement_value("July 22, 2026", "Court order: the brief is due July 22, 2026.") == \
        ("date:2026-07-22", "script")
    assert statement_value("Dana Whitfield", "x")[0] == rule_value("Dana Whitfield remains our contact.")
    assert statement_value(None, "Noted.") == (None, None)


def test_values_by_judge_go_through_the_model_interface(tmp_path: Path) -> None:
    from tests.test_recall_world import legal_script

    path = recall_study(tmp_path, [{"condition": "lightweight-invalidation", "values": "judge"},
                                   {"condition": "lightweight-invalidation"}], scripts=[legal_script()])
    judged = run_cell(path, 0, [0])[0]
    ruled = run_cell(path, 1, [0])[0]
    value_steps = [s for s in judged.steps if s["purpose"] == "value"]
    assert len(value_steps) == len(judged.world["memory_log"]) > 0
    assert {s["agent"] for s in value_steps} == {"value_judge"}
    assert {m["value_source"] for m in judged.world["memory_log"]} <= {"judge", None}
    # the simulated judge answers by the rule, so the memory and its conflicts are the same
    assert [m["value"] for m in judged.world["memory_log"]] == [m["value"] for m in ruled.world["memory_log"]]
    assert [(c["type"], c["action"]) for c in judged.world["conflicts"]] == \
        [(c["type"], c["action"]) for c in ruled.world["conflicts"]]
    assert judged.world["retrieval"]["values"] == "judge"


def test_a_short_context_loses_what_no_longer_fits_and_memory_conditions_may_add_the_conversation(
        tmp_path: Path) -> None:
    path = recall_study(tmp_path, [{"condition": "baseline", "model": "sim-recall/careful", "context_turns": 2},
                                   {"condition": "baseline", "model": "sim-recall/careful"},
                                   {"condition": "naive", "conversation": True}],
                        defaults={"scripts": str(SHIPPED_SCRIPTS)})
    short, _ = failures(run_cell(path, 0, range(15)))
    full, n = failures(run_cell(path, 1, range(15)))
    assert short - full >= n // 4, (short, full, n)  # corrections said early fall out of a two-turn window
    w = run_cell(path, 2, [0])[0].world
    assert w["retrieval"]["memory"] and w["retrieval"]["conversation"]
    assert all(r["context"]["entry_ids"] and r["context"]["conversation_turns"] for r in w["recalls"])


def test_a_statement_of_several_values_agrees_with_one_of_them_and_conflicts_with_another() -> None:
    table = {"Oxycodone 10 mg every 4 hours.": (1.0, 0.0, 0.0), "Dose: 10 mg.": (0.0, 1.0, 0.0),
             "Oxycodone 5 mg every 4 hours.": (0.0, 0.0, 1.0)}
    mem = VectorMemory(TableEmbedder(table), Weights(), invalidation=True, compare_wording=False)
    mem.add("Dose: 10 mg.", author_role="nurse", authority=0.4, turn=1, fact_id="F1", value="num:10|mg")
    r = mem.add("Oxycodone 10 mg every 4 hours.", author_role="attending_physician", authority=1.0, turn=2,
                fact_id="F1", value="num:10|mg;num:4|hours")
    assert r.removed == () and [c.type for c in r.conflicts] == ["duplicate"]
    r2 = mem.add("Oxycodone 5 mg every 4 hours.", author_role="attending_physician", authority=1.0, turn=3,
                 fact_id="F1", value="num:5|mg;num:4|hours")
    assert [e.text for e in r2.removed] == ["Dose: 10 mg."]  # shares the interval, not the dose: a conflict


def test_context_turns_without_a_conversation_is_refused_naming_the_field(tmp_path):
    import pytest
    import yaml

    from workbench.params import ParamsError, load_study

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"world": "recall", "name": "bad", "seed": 1, "worlds_per_cell": 1,
                                    "cells": [{"model": "sim-recall/careful", "condition": "naive",
                                               "context_turns": 3}]}))
    with pytest.raises(ParamsError, match="context_turns"):
        load_study(path)
