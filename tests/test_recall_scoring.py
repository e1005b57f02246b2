"""Recall scoring and the tables built on it, on hand-written records: exact match
reading numbers as numbers (and every value the generator renders round-tripping),
hedged answers (the stale and the accepted value both) as an outcome of their own,
partial_score (never for another number) and matched, the offline rule judge
(paraphrases accepted, near misses refused, so it can disagree with exact match),
judge-vs-exact agreement with Cohen's kappa, which value a failed recall gave, memory
writes by origin and invalidations by type (records with and without the new
fields), and the new design factors kept apart in every table."""
from __future__ import annotations

import math
from typing import Any

import pytest

from workbench.worlds.recall.metrics import (
    cohen_kappa,
    given_values,
    judge_agreement,
    judge_disagreements,
    memory_events,
    memory_table,
    metric_tables,
    recall_frame,
)
from workbench.worlds.recall.outcomes import GIVEN_KINDS, OUTCOMES, given_value, hedged, rescore, stale_values
from workbench.worlds.recall.scoring import canonical_values, exact_match, judge_rule, partial_score, score_answer


# -- partial_score and matched ----------------------------------------------------------------
def test_score_answer_names_the_accepted_answer_found_and_scores_partial_overlap() -> None:
    s = score_answer("We moved it to 7 October 2026.", ["October 7, 2026", "7 October 2026"])
    assert s == {"correct_exact": True, "matched": "7 October 2026", "partial_score": 1.0}
    s = score_answer("September 30, 2026", ["October 7, 2026"])
    assert s["correct_exact"] is False and s["matched"] is None
    assert s["partial_score"] == 0.0  # another date: the shared year earns nothing
    assert partial_score("July 22", ["July 22, 2026"]) == pytest.approx(2 / 3)  # the right date, year left out
    assert score_answer(None, ["x"]) == {"correct_exact": False, "matched": None, "partial_score": 0.0}
    # best over the accepted answers; a repeated word counts as often as it is needed
    assert partial_score("5 of NAV", ["8% of NAV", "5 percent of NAV"]) == pytest.approx(3 / 4)
    assert partial_score("of", ["of of"]) == pytest.approx(1 / 2)


# -- the rule judge ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, values", [
    ("July 22, 2026", {"date:2026-07-22"}), ("22 July 2026", {"date:2026-07-22"}),
    ("2026-07-22", {"date:2026-07-22"}), ("07/22/2026", {"date:2026-07-22"}),
    ("on the 22nd of July, 2026", {"date:2026-07-22"}), ("by July 22", {"date:--07-22"}),
    ("$1.2 million", {"num:1200000|$"}), ("1,200,000 dollars", {"num:1200000|$"}), ("USD 1.2m", {"num:1200000|$"}),
    ("5 mg/kg", {"num:5|mg/kg"}), ("five mg", {"num:5|mg"}), ("8 percent of NAV", {"num:8|%"}),
    ("one of the team", set()), ("€3m", {"num:3000000|€"}), ("3 million euros", {"num:3000000|€"}),
])
def test_canonical_values(text: str, values: set[str]) -> None:
    assert canonical_values(text) == values


@pytest.mark.parametrize("answer, accepted, exact, verdict, reason", [
    # paraphrases: exact match misses them, the judge accepts
    ("The deadline is 22 July 2026.", ["July 22, 2026"], False, True, "paraphrase"),
    ("2026-07-22", ["July 22, 2026"], False, True, "paraphrase"),
    ("five mg", ["5 mg"], False, True, "paraphrase"),
    # the same number in another notation: exact match reads numbers as numbers now
    ("8 percent of NAV", ["8% of NAV"], True, True, "same"),
    ("$1.2 million", ["$1,200,000"], True, True, "same"),
    # another number that holds the accepted one's digits: refused by both (exact match took them once)
    ("2.5 mg", ["5 mg"], False, False, "wrong value"),
    ("5 mg/kg twice daily", ["5 mg"], False, False, "wrong value"),
    ("15.5%", ["15%"], False, False, "wrong value"),
    ("1,200,000", ["1,200"], False, False, "wrong value"),
    # near miss: an accepted bare number leaves the unit open to exact match; the judge reads the unit
    ("5 mg/kg", ["5"], True, False, "near miss"),
    # agreement
    ("moved from September 30, 2026 to October 7, 2026", ["October 7, 2026"], True, True, "same"),
    ("July 22, 2025", ["July 22, 2026"], False, False, "wrong value"),
    ("I do not know.", ["5 mg"], False, False, "no value"),
    ("the MSCI World index", ["MSCI World"], True, True, "words"),
    ("MSCI Europe", ["MSCI World"], False, False, "missing words"),
    (None, ["5 mg"], False, False, "no answer"),
])
def test_rule_judge_accepts_paraphrases_and_refuses_near_misses(answer: str | None, accepted: list[str], exact: bool,
                                                               verdict: bool, reason: str) -> None:
    assert exact_match(answer, accepted) is exact
    r = judge_rule(answer, accepted)
    assert (r.verdict, r.reason) == (verdict, reason)


# -- Cohen's kappa -------------------------------------------------------------------------------
@pytest.mark.parametrize("table", [(20, 5, 10, 15), (3, 0, 0, 6), (0, 4, 4, 0), (7, 2, 1, 0), (1, 1, 1, 1)])
def test_cohen_kappa_equals_statsmodels(table: tuple[int, int, int, int]) -> None:
    from statsmodels.stats.inter_rater import cohens_kappa

    yy, yn, ny, nn = table
    assert cohen_kappa(yy, yn, ny, nn) == pytest.approx(cohens_kappa([[yy, yn], [ny, nn]]).kappa)


def test_cohen_kappa_is_undefined_when_both_raters_give_one_verdict_throughout() -> None:
    assert math.isnan(cohen_kappa(0, 0, 0, 9)) and math.isnan(cohen_kappa(0, 0, 0, 0))
    assert cohen_kappa(5, 0, 0, 5) == 1.0


# -- hand-written world records ------------------------------------------------------------------
AGENTS = [{"agent": r, "role": r, "route": "sim-recall/trusting", "authority": a}
          for r, a in (("senior_lawyer", 1.0), ("associate", 0.7), ("paralegal", 0.4), ("client_rep", 0.2))]
FACTS = [{"id": "F1", "text": "Filing deadline: July 8, 2026.", "tier": "contextual", "authority_level": 0.6},
         {"id": "F2", "text": "Settlement offer on the table: $180,000.", "tier": "contextual", "authority_level": 0.5}]


def log(turn: int, role: str, authority: float, fact: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"op": "add", "turn": turn, "source": "turn", "author_role": role, "authority": authority,
            "namespace": role, "fact_id": fact, "text": text, "entry": {"entry_id": f"m{turn}"}, "refused": False,
            "refused_by": None, "removed": [], **extra}


def recall(turn: int, mode: str, fact: str, truth: list[str], answer: str | None, correct: bool | None, *,
           judge: bool | None = None) -> dict[str, Any]:
    exact = score_answer(answer, truth)
    return {"turn": turn, "agent": "associate", "role": "associate", "route": "sim-recall/trusting",
            "failure_mode": mode, "target_fact_id": fact, "query": "q?", "ground_truth": truth, "answer": answer,
            "correct": correct, "correct_exact": exact["correct_exact"],
            "judge": None if judge is None else {"verdict": judge, "step": 0, "text": "x"},
            "context": {"entry_ids": [], "own_turns": [], "memory_shown": True}, "truth_rank": None,
            "top_entry_correct": False, "step": 0}


def world(cell_id: str, recalls: list[dict[str, Any]], *, condition: str = "naive", memory_log: list | None = None,
          turns: list | None = None, cell: dict[str, Any] | None = None, repetition: int = 0,
          **extra: Any) -> dict[str, Any]:
    return {"kind": "world", "world_kind": "recall", "world_id": f"{cell_id}-{repetition}", "cell_id": cell_id,
            "cell_label": cell_id, "run": 1, "seed": 1, "world_index": repetition, "repetition": repetition,
            "cell": {"model": "sim-recall/trusting", "condition": condition, **(cell or {})},
            "script": {"script_id": "legal_x", "domain": "legal", "initial_facts": FACTS}, "valid": True,
            "failed": None, "agents": AGENTS, "turns": turns or [], "retrievals": [],
            "memory_log": memory_log or [], "recalls": recalls, **extra}


DEADLINE = ["July 22, 2026", "22 July 2026"]
OFFER = ["$240,000", "240,000"]


def story() -> dict[str, Any]:
    """F1: July 8 (record, 0.6) corrected to July 22 by the senior lawyer at turn 5, then
    a paralegal says June 30 at turn 7. F2: $180,000 repeated by the paralegal and the
    client representative, corrected to $240,000 by the associate at turn 6."""
    mlog = [log(2, "paralegal", 0.4, "F2", "The offer stands at $180,000."),
            log(3, "client_rep", 0.2, "F2", "We are still at 180,000 dollars, as I understand it."),
            log(5, "senior_lawyer", 1.0, "F1", "Correction: the filing deadline is now July 22, 2026."),
            log(6, "associate", 0.7, "F2", "Update: the offer was raised to $240,000."),
            log(7, "paralegal", 0.4, "F1", "I have the deadline as June 30, 2026.")]
    turns = [{"turn": 4, "role": "associate", "content": "I noted the deadline of July 8, 2026 in my diary.",
              "fact_id": "F1", "is_recall": False, "write_to_memory": False, "reply": "Noted."}]
    recalls = [recall(10, "belief_asymmetry", "F1", DEADLINE, "My diary says July 8, 2026.", False),
               recall(11, "authority_collapse", "F1", DEADLINE, "The deadline is June 30, 2026.", False),
               recall(12, "memory_anchoring", "F2", OFFER, "The offer is $180,000.", False),
               recall(13, "memory_anchoring", "F2", OFFER, "It is 999 dollars.", False),
               recall(14, "memory_anchoring", "F2", OFFER, "I do not know.", False),
               recall(15, "belief_asymmetry", "F1", DEADLINE, "22 July 2026", True, judge=True)]
    return world("A", recalls, memory_log=mlog, turns=turns)


def test_given_value_names_stale_lower_authority_anchored_other_and_no_value() -> None:
    w = story()
    kinds = [given_value(w, r)["kind"] for r in w["recalls"]]
    assert kinds == ["stale", "lower-authority", "anchored", "other", "no value", None]
    g = given_value(w, w["recalls"][2])
    assert g["value"] == "num:180000|$" and g["anchored"] and g["stale"]
    assert g["said_by"] == ["client_rep", "paralegal", "record"]
    # the own statement that made the belief-asymmetry answer stale is a turn's content
    assert given_value(w, w["recalls"][0])["said_by"] == ["associate", "record"]
    # statements after the recall do not count: at turn 6 the June 30 value was not yet said
    early = {**w["recalls"][1], "turn": 6}
    assert given_value(w, early)["kind"] == "other"


def test_given_values_table_counts_failed_recalls_per_cell_and_mode() -> None:
    t = given_values(recall_frame([story()]))
    row = t[t["failure_mode"] == "memory_anchoring"].iloc[0]
    assert (row["failed"], row["anchored"], row["other"], row["no value"]) == (3, 1, 1, 1)
    assert int(t["failed"].sum()) == 5 and list(t.columns[-6:]) == ["hedged", "anchored", "stale", "lower-authority",
                                                                     "other", "no value"]
    assert int(t["hedged"].sum()) == 0


def test_judge_agreement_counts_and_kappa_per_cell_never_pooled() -> None:
    truth = ["5 mg"]
    a = world("J", [recall(1, "authority_collapse", "F1", truth, "5 mg", True, judge=True),
                    recall(2, "authority_collapse", "F1", truth, "five mg", True, judge=True),  # paraphrase
                    recall(3, "authority_collapse", "F1", ["5"], "5 mg/kg", False, judge=False),  # near miss
                    recall(4, "authority_collapse", "F1", truth, "7 mg", False, judge=False)],
              cell={"scoring": "judge"}, condition="lightweight")
    b = world("N", [recall(1, "authority_collapse", "F1", truth, "5 mg", True)], condition="naive")
    t = judge_agreement(recall_frame([a, b]))
    j = t[(t["condition"] == "lightweight") & (t["judge"] == "judge")].iloc[0]
    assert (j["recalls"], j["both correct"], j["both wrong"], j["judge only"], j["exact only"]) == (4, 1, 1, 1, 1)
    assert j["agreement"] == 0.5 and j["kappa"] == pytest.approx(cohen_kappa(1, 1, 1, 1)) == 0.0
    rule = t[(t["condition"] == "lightweight") & (t["judge"] == "rule")].iloc[0]
    assert (rule["paraphrase"], rule["near miss"]) == (1, 1)
    n = t[t["condition"] == "naive"]
    assert list(n["judge"]) == ["rule"] and int(n["recalls"].iloc[0]) == 1  # no judge ran there; never pooled
    d = judge_disagreements(recall_frame([a, b]))
    assert sorted(zip(d["judge"], d["answer"])) == [("judge", "5 mg/kg"), ("judge", "five mg"), ("rule", "5 mg/kg"),
                                                    ("rule", "five mg")]


# -- memory writes and invalidations ----------------------------------------------------------------
def test_memory_events_read_new_fields_and_older_records() -> None:
    new = world("M", [], condition="lightweight-invalidation", memory_log=[
        {**log(0, "record", 0.6, "F1", "x"), "source": "initial_fact", "origin": "initial"},
        {**log(2, "paralegal", 0.4, "F1", "y"), "origin": "script"},
        {**log(3, "associate", 0.7, "F1", "z"), "source": "reply", "origin": "reply", "refused": True},
        {**log(4, "associate", 0.7, "F1", "w"), "source": "reply", "origin": "reply"}],
        conflicts=[{"turn": 3, "type": "lower-authority", "action": "refused"},
                   {"turn": 4, "type": "lower-authority", "action": "removed"},
                   {"turn": 4, "type": "duplicate", "action": "kept"},
                   {"turn": 4, "type": "stale", "action": "removed"}])
    e = memory_events(new)
    assert (e["writes initial"], e["writes script"], e["writes reply"], e["writes refused"]) == (1, 1, 2, 1)
    assert (e["lower-authority refused"], e["lower-authority removed"], e["duplicate kept"], e["stale removed"]) == (
        1, 1, 1, 1)
    old = world("O", [], condition="lightweight-invalidation", memory_log=[
        {**log(0, "record", 0.6, "F1", "x"), "source": "initial_fact"},
        {**log(2, "paralegal", 0.4, "F1", "y"), "refused": True},
        {**log(3, "senior_lawyer", 1.0, "F1", "z"), "removed": [{"entry_id": "m1"}, {"entry_id": "m2"}]}])
    e = memory_events(old)
    assert (e["writes initial"], e["writes script"], e["writes reply"]) == (1, 2, 0)
    assert (e["untyped refused"], e["untyped removed"]) == (1, 2)
    t = memory_table([new, new])
    assert len(t) == 1 and t["worlds"].iloc[0] == 2
    r = t.iloc[0]
    assert (r["writes reply"], r["stale removed"], r["duplicate kept"], r["duplicate refused"]) == (4, 2, 2, 0)
    # every origin and every type x action has a column, zero where none happened
    t = memory_table([old])
    assert t.iloc[0]["stale removed"] == 0 and t.iloc[0]["writes reply"] == 0
    assert (t.iloc[0]["untyped removed"], t.iloc[0]["untyped refused"]) == (2, 1)


# -- design factors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("factor, level", [("memory_writes", "replies"), ("retrieve", "every-turn"),
                                           ("context_turns", 4), ("vector_backend", "chroma")])
def test_new_factors_keep_cells_apart_in_every_table(factor: str, level: Any) -> None:
    def w(cid: str, cell: dict[str, Any], ok: bool) -> dict[str, Any]:
        return world(cid, [recall(10, "memory_anchoring", "F2", OFFER, "$240,000" if ok else "$180,000", ok)],
                     cell=cell)

    worlds = [w("plain", {}, True), w("changed", {factor: level}, False)]
    tables = metric_tables(worlds)
    for name in ("by_condition", "by_mode_condition", "by_domain_mode_condition", "judge_agreement", "memory"):
        t = tables[name]
        assert len(t) == 2, name
        assert f"{factor}={level}" in set(t["variant"]), name
    assert set(tables["by_condition"]["k/n"]) == {"1/1", "0/1"}


def test_isolated_is_a_condition_of_its_own() -> None:
    worlds = [world("I", [recall(10, "belief_asymmetry", "F1", DEADLINE, "I do not know.", False)],
                    condition="isolated"),
              world("B", [recall(10, "belief_asymmetry", "F1", DEADLINE, "July 22, 2026", True)],
                    condition="baseline")]
    t = metric_tables(worlds)["by_condition"]
    assert dict(zip(t["condition"], t["k/n"])) == {"baseline": "1/1", "isolated": "0/1"}


def test_recall_frame_rescores_matched_and_partial_score_from_the_answer() -> None:
    """Records without the fields and records scored by older rules read alike: the
    frame scores every answer again (a recorded 0.75 for "10 percent of NAV" against
    "8 percent of NAV" was the old rule's; another number earns nothing now)."""
    nav = ["8 percent of NAV"]
    r = recall(10, "belief_asymmetry", "F1", nav, "10 percent of NAV", False)
    older = {k: v for k, v in r.items() if k not in ("matched", "partial_score")}
    f = recall_frame([world("A", [older]), world("B", [{**r, "matched": "8 percent of NAV", "partial_score": 0.75}])])
    assert list(f["partial_score"]) == [0.0, 0.0]
    assert f["matched"].isna().all()


def test_summary_names_each_cell_by_what_sets_it_apart() -> None:
    from workbench.worlds.recall.metrics import summary_text

    long = {"scripts": "/a/very/long/path/to/the/scripts/of/this/study/that/every/cell/shares"}
    worlds = [world("a", [recall(10, "memory_anchoring", "F2", OFFER, "$240,000", True)], condition="lightweight",
                    cell=long),
              world("b", [recall(10, "memory_anchoring", "F2", OFFER, "$180,000", False)], condition="lightweight",
                    cell={**long, "scoring": "judge"})]
    lines = summary_text(worlds).splitlines()
    rows = [x for x in lines if x.startswith("sim-recall/")]
    assert [x.split("  ")[0].strip() for x in rows] == ["sim-recall/trusting · lightweight",
                                                       "sim-recall/trusting · lightweight · scoring=judge"]
    assert any(x.startswith("Same in every cell: scripts=/a/very/long") for x in lines)


def test_accuracy_tables_carry_the_mean_partial_score_of_the_same_recalls() -> None:
    w = world("A", [recall(10, "belief_asymmetry", "F1", DEADLINE, "July 22, 2026", True),
                    recall(11, "belief_asymmetry", "F1", DEADLINE, "September 30, 2026", False)])
    t = metric_tables([w])["by_condition"]
    assert t["mean partial_score"].iloc[0] == pytest.approx((1 + 0) / 2)  # September 30 is another date: 0


def test_an_earlier_recall_answer_counts_as_said_about_its_target_fact() -> None:
    """Two agents gave the stale offer in earlier recalls (the turn records of recall
    turns carry no fact id): a third recall giving it again is anchored."""
    w = story()
    w["recalls"] = [recall(8, "memory_anchoring", "F2", OFFER, "It is 999 dollars.", False),
                    recall(9, "memory_anchoring", "F2", OFFER, "It is 999 dollars.", False),
                    recall(12, "memory_anchoring", "F2", OFFER, "It is 999 dollars.", False)]
    w["recalls"][1]["role"] = w["recalls"][1]["agent"] = "paralegal"
    w["turns"] = [*w["turns"], {"turn": 8, "role": "associate", "content": "What is the offer?", "fact_id": None,
                                "is_recall": True, "write_to_memory": False, "reply": "It is 999 dollars."},
                  {"turn": 9, "role": "paralegal", "content": "What is the offer?", "fact_id": None,
                   "is_recall": True, "write_to_memory": False, "reply": "It is 999 dollars."}]
    assert given_value(w, w["recalls"][0])["kind"] == "other"  # nobody said it before turn 8
    g = given_value(w, w["recalls"][2])
    assert g["kind"] == "anchored" and g["said_by"] == ["associate", "paralegal"]


def test_the_simulated_judge_disagrees_with_exact_match_on_a_paraphrase_only(tmp_path: Any) -> None:
    """End to end: scripted agents answer with a paraphrase ("22 July 2026" for "July
    22, 2026"), another amount that holds the digits of the accepted one ("$1,520,000"
    for "$520,000": exact match took it for a match before it read numbers as numbers)
    and a plain answer; the cell's simulated judge decides `correct`, and the agreement
    table counts the paraphrase as the one disagreement, with kappa from the same 2x2."""
    from tests.test_recall_world import SCRIPTED, recall_study, run_cell

    agents = {**SCRIPTED, "paralegal": {"script": ["Noted.", "Noted.", "It is due 22 July 2026."]},
              "associate": {"script": ["Noted.", "Noted.", "The offer is now $1,520,000."]},
              "client_rep": {"script": ["Noted.", "April 14, 2026"]}}
    path = recall_study(tmp_path, [{"condition": "naive", "scoring": "judge", "agents": agents}])
    w = run_cell(path, 0, [0])[0].world
    by_turn = {r["turn"]: r for r in w["recalls"]}
    assert (by_turn[10]["correct_exact"], by_turn[10]["correct"]) == (False, True)  # paraphrase
    assert (by_turn[11]["correct_exact"], by_turn[11]["correct"]) == (False, False)  # another amount
    assert (by_turn[12]["correct_exact"], by_turn[12]["correct"]) == (True, True)
    assert by_turn[11]["matched"] is None and by_turn[10]["matched"] is None
    t = judge_agreement(recall_frame([w])).set_index("judge")
    for judge in ("judge", "rule"):
        row = t.loc[judge]
        assert (row["both correct"], row["judge only"], row["exact only"], row["both wrong"]) == (1, 1, 0, 1)
        assert (row["paraphrase"], row["near miss"]) == (1, 0)
        assert row["kappa"] == pytest.approx(cohen_kappa(1, 1, 0, 1))
    from workbench.worlds.recall.metrics import summary_text

    assert "agree on 2/3 recalls (judge only right 1, exact only right 0), Cohen's kappa 0.40" in summary_text([w])


def test_a_recorded_value_is_what_a_statement_asserts() -> None:
    """A correction names the old value and the new; the world records the new one as its
    value, and the stale value is then said only by those who really said it."""
    from workbench.worlds.recall.outcomes import recorded_values, world_statements

    assert recorded_values("date:2026-07-22") == {"date:2026-07-22"}
    assert recorded_values("num:180000|$ num:5|mg") == {"num:180000|$", "num:5|mg"}
    assert recorded_values("name:msci world") == set() and recorded_values(None) == set()
    assert recorded_values("July 22, 2026") == {"date:2026-07-22"}
    w = story()
    w["memory_log"][2] = log(5, "senior_lawyer", 1.0, "F1", "Correction: the deadline moved from July 8, 2026 to "
                             "July 22, 2026.", value="date:2026-07-22")
    st = {s.text: s for s in world_statements(w)}
    assert st[w["memory_log"][2]["text"]].values == {"date:2026-07-22"}
    g = given_value(w, w["recalls"][0])
    assert g["kind"] == "stale" and g["said_by"] == ["associate", "record"]


# -- the review's cases: numbers as numbers, hedging, no partial credit for another number -----------
def test_exact_match_does_not_find_five_percent_in_three_and_a_half_percent() -> None:
    """The "." of "3.5%" is no word break: 3.5% of NAV is not 5% of NAV."""
    answer = "Our reports use a target cash buffer of 3.5% of NAV."
    assert not exact_match(answer, ["5% of NAV", "5 percent of NAV"])
    assert score_answer(answer, ["5% of NAV"]) == {"correct_exact": False, "matched": None, "partial_score": 0.0}
    assert exact_match("Our reports use a target cash buffer of 5% of NAV.", ["5% of NAV"])


@pytest.mark.parametrize("answer, accepted, found", [
    # a number inside another is never found
    ("15.5", ["15"], False), ("15.5", ["5"], False), ("$1,240,000", ["240,000"], False), ("25 mg", ["5 mg"], False),
    ("2,500", ["500"], False), ("-5%", ["5%"], False), ("0.5 mg", ["5 mg"], False),
    # the same number in another notation is found
    ("5 percent", ["5%"], True), ("5 per cent", ["5%"], True), ("5 pct", ["5%"], True), ("5 %", ["5%"], True),
    ("$5m", ["$5,000,000"], True), ("5 million dollars", ["$5 million"], True), ("USD 5 million", ["$5m"], True),
    ("1,200,000", ["1200000"], True), ("$240,000, as agreed", ["$240,000"], True), ("-5%", ["-5%"], True),
    ("−2.5 percent", ["-2.5%"], True), ("12 bps", ["12 basis points"], True), ("30 day notice", ["30 days"], True),
    ("5.0 mg", ["5 mg"], True), ("7:15", ["07:15"], True),
    # a unit the accepted answer states must be stated: "5" is not "5%"; a bare accepted number leaves it open
    ("5 of NAV", ["5% of NAV"], False), ("5 mg", ["5 mcg"], False), ("5 days", ["5 weeks"], False),
    ("5%", ["5"], True), ("$5m", ["5 million"], True),
    # times and words
    ("07:15", ["07:30"], False), ("07:15", ["15"], False), ("July 22nd", ["July 22"], False),
])
def test_exact_match_compares_numbers_as_numbers(answer: str, accepted: list[str], found: bool) -> None:
    assert exact_match(answer, accepted) is found


def test_partial_score_never_credits_another_number() -> None:
    assert partial_score("10 percent", ["8 percent"]) == 0.0
    assert partial_score("10 percent of NAV", ["8 percent of NAV"]) == 0.0  # was 0.75: "percent of NAV"
    assert partial_score("June 5", ["June 8"]) == 0.0 and partial_score("3.5% of NAV", ["5% of NAV"]) == 0.0
    assert partial_score("5 mg/kg", ["5 mg"]) == 0.0  # the same digits in another unit: another quantity
    assert partial_score("the cash buffer is 5", ["5% of NAV"]) == pytest.approx(1 / 4)  # the number, no unit
    assert partial_score("5 percent", ["5% of NAV"]) == pytest.approx(2 / 4)
    assert partial_score("5 of NAV", ["5% of NAV"]) == pytest.approx(3 / 4)
    assert partial_score("the NAV, I think", ["5% of NAV"]) == 0.0  # no number: no credit for the words


@pytest.mark.parametrize("answer, is_hedged", [
    ("The cash buffer is 3% or 5% of NAV.", True),
    ("My notes say 3% of NAV; the shared memory says 5% of NAV.", True),
    ("It is 5% of NAV, or 3 percent, I am not sure.", True),
    ("It was raised from 3% to 5% of NAV.", False),  # the answer itself sets the old value aside
    ("5% of NAV, not 3%.", False),
    ("5% of NAV (raised from 3% of NAV).", False),
    ("It was 3% of NAV; now it is 5% of NAV.", False),
    ("5% of NAV.", False),
    ("3% of NAV.", False),  # the stale value alone: stale, not hedged
    ("5% of NAV, reviewed every 3 months.", False),  # another unit: no competing value
])
def test_an_answer_stating_the_stale_and_the_current_value_hedges(answer: str, is_hedged: bool) -> None:
    assert hedged(answer, ["5% of NAV", "5 percent of NAV"], ["3% of NAV"]) is is_hedged
    assert hedged(answer, ["5% of NAV"], ["num:3|%"]) is is_hedged  # stale values as recorded tokens alike


def hedge_story(answer: str, *, judge: bool | None = None) -> dict[str, Any]:
    """The deadline story with one recall of F1 (July 8 corrected to July 22; June 30
    said later by the paralegal) answered by ``answer``; ``correct`` recorded as the old
    exact rule (or a judge) would have recorded it."""
    w = story()
    r = recall(15, "belief_asymmetry", "F1", DEADLINE, answer, True, judge=judge)
    r["correct"] = True if judge is None else judge
    w["recalls"] = [r]
    if judge is not None:
        w["cell"]["scoring"] = "judge"
    return w


def test_a_hedged_recall_is_its_own_outcome_in_every_table() -> None:
    """"July 8, 2026 or July 22, 2026": the exact rule finds the accepted date (as
    before, and recorded correct), but the answer also gives the superseded one: the
    recall is hedged, neither right nor stale, and counted so wherever outcomes are."""
    from workbench.worlds.recall.metrics import given_values, summary_text, world_frame, world_row

    w = hedge_story("Either July 8, 2026 or July 22, 2026, I am not sure which.")
    r = w["recalls"][0]
    assert stale_values(w, r) == {"date:2026-07-08", "date:2026-06-30"}
    s = rescore(w, r)
    assert (s.correct_exact, s.hedged, s.correct) == (True, True, False)
    g = given_value(w, r)
    assert g["kind"] == "hedged" and g["value"] == "date:2026-07-08" and g["stale"]
    f = recall_frame([w])
    assert (f["correct"].iloc[0], f["outcome"].iloc[0], f["hedged"].iloc[0]) == (False, "hedged", True)
    tables = metric_tables([w])
    row = tables["by_condition"].iloc[0]
    assert (row["k/n"], row["hedged:k/n"], row["hedged:k"], row["hedged:rate"]) == ("0/1", "1/1", 1, 1.0)
    gv = given_values(f).iloc[0]
    assert (gv["failed"], gv["hedged"], gv["stale"]) == (1, 1, 0)
    assert list(tables["failed_recalls"]["given_kind"]) == ["hedged"]
    assert (world_row(w, [])["n_correct"], world_row(w, [])["n_hedged"]) == (0, 1)
    assert (world_frame([w])["n_correct"].iloc[0], world_frame([w])["n_hedged"].iloc[0]) == (0, 1)
    assert "0/1" in summary_text([w]).splitlines()[1] and "Hedged:" in summary_text([w])
    assert set(OUTCOMES) == {"correct", *GIVEN_KINDS} and "hedged" in GIVEN_KINDS


def test_a_correction_in_the_answer_is_no_hedge_and_a_judge_does_not_save_a_hedge() -> None:
    w = hedge_story("It moved from July 8, 2026 to July 22, 2026.")
    assert rescore(w, w["recalls"][0]).correct and recall_frame([w])["outcome"].iloc[0] == "correct"
    # a judge's CORRECT stands in its column, but a hedged answer does not count as right
    w = hedge_story("July 22, 2026 (or June 30, 2026?)", judge=True)
    f = recall_frame([w])
    assert (f["judge_verdict"].iloc[0], f["correct"].iloc[0], f["outcome"].iloc[0]) == (True, False, "hedged")


def test_rescoring_an_old_record_follows_the_new_rules() -> None:
    """A run recorded under the old exact rule kept correct=True for 3.5% against 5%:
    every table re-scores it from the answer, so it counts as the failure it is."""
    from workbench.worlds.recall.metrics import summary_text, world_frame

    r = recall(10, "memory_anchoring", "F3", ["5% of NAV"], "the target cash buffer is 3.5% of NAV", True)
    r.update(correct=True, correct_exact=True, matched="5% of NAV", partial_score=1.0)  # as the old rule recorded it
    w = world("OLD", [r], memory_log=[log(2, "trader", 0.4, "F3", "Cash buffer: 3.5% of NAV.")],
              metrics={"n_recalls": 1, "n_correct": 1, "accuracy": 1.0})
    f = recall_frame([w])
    assert (f["correct"].iloc[0], f["correct_exact"].iloc[0], f["partial_score"].iloc[0]) == (False, False, 0.0)
    assert f["matched"].isna().all() and f["outcome"].iloc[0] != "correct"
    assert (world_frame([w])["n_correct"].iloc[0], world_frame([w])["accuracy"].iloc[0]) == (0, 0.0)
    assert "0.0% [0%,79%] 0/1" in summary_text([w])


# -- round trip: every value the generator renders ----------------------------------------------------
def test_every_generated_value_scores_exact_against_itself_and_never_against_its_stale_value() -> None:
    """For every topic of every domain, many drawn (current, stale) pairs rendered in every
    statement template the generator uses: the current value's statements match its accepted
    answers exactly, the stale value's never do, every accepted form matches the others, and
    an answer giving both hedges (except two clock times: the rule judge's canonical values
    read "07:15" as the numbers 7 and 15, so "15:15 or 07:15" states no value that 07:15
    does not; exact match reads times as times)."""
    from random import Random

    from workbench.worlds.recall.generator import TOPICS, T, _clock, _fill, _values

    rng = Random(20260722)
    checked = 0
    for domain, topics in TOPICS.items():
        for topic in topics:
            for _ in range(40):
                (current, accepted), (stale, stale_accepted) = _values(topic, rng, 2)
                assert all(exact_match(a, accepted) for a in accepted), (topic.subject, accepted)
                assert not exact_match(stale, accepted) and not exact_match(current, stale_accepted), (current, stale)
                for kind in ("fact", "belief_update", "anchor_correction", "collapse_wrong", "anchor_repeat"):
                    for template in T[kind]:
                        text = template.format(subject=topic.subject, v=current, source=topic.source,
                                               source_l=topic.source.lower())
                        old = template.format(subject=topic.subject, v=stale, source=topic.source,
                                              source_l=topic.source.lower())
                        assert exact_match(text, accepted), (domain, text, accepted)
                        assert not exact_match(old, accepted), (domain, old, accepted)
                        assert score_answer(old, accepted)["partial_score"] == 0.0, (old, accepted)
                assert exact_match(_fill(rng, "fact", topic, current), accepted)
                assert not hedged(f"{current}.", accepted, [stale]), (stale, current)
                if topic.value is not _clock:  # the judges' values read "07:15" as 7 and 15: see below
                    assert hedged(f"Either {stale} or {current}.", accepted, [stale]), (stale, current)
                checked += 1
    assert checked == 40 * sum(len(t) for t in TOPICS.values())


def test_every_script_recall_is_answerable_and_its_stale_statements_never_match() -> None:
    """Shipped and freshly generated scripts: each recall's accepted answer is found by the
    exact rule in the target fact or an earlier write about it, and a statement about the
    target fact matches the accepted answers exactly when the value it declares does."""
    from tests.conftest import ROOT
    from workbench.worlds.recall.generator import generate_script
    from workbench.worlds.recall.scripts import FAILURE_MODES, load_scripts, script_from_dict

    scripts = list(load_scripts(ROOT / "params/recall/scripts"))
    scripts += [script_from_dict(generate_script(d, list(FAILURE_MODES) * 2, seed)) for d in ("legal", "medical",
                                                                                             "finance")
                for seed in range(8)]
    for s in scripts:
        for r in s.recalls():
            assert r.target_fact_id is not None
            fact = s.fact(r.target_fact_id)
            writes = s.writes_about(r.target_fact_id, r.turn)
            assert any(exact_match(t, r.ground_truth) for t in [fact.text, *(w.content for w in writes)]), (
                s.script_id, r.turn)
            said = [(fact.text, fact.value)] + [(t.content, t.value) for t in s.turns
                                                if t.fact_id == r.target_fact_id and t.turn < r.turn and t.value]
            for text, value in said:
                if value:
                    assert exact_match(text, r.ground_truth) is exact_match(value, r.ground_truth), (
                        s.script_id, r.turn, text, r.ground_truth)
