"""Issue 18, items 1-3 and 7: conditions a researcher can compare (baseline with the
conversation in context vs isolated), agents that write memory, and conflicts by value."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.test_recall_world import SHIPPED_SCRIPTS, recall_study, run_cell
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
