"""Recall invalidation without the script's ids (issue 42, parts 1, 4 and 5).

- ``conflicts: lexical``: on a small script whose conflicts are worded differently,
  each pair is detected or missed exactly as the stated rule says (topic words shared
  >= half the shorter statement's, and a different value), the detectors never read a
  fact id (renaming the ids changes the truth, not one answer), and precision and
  recall in the invalidation table equal the hand counts;
- ``conflicts: judge`` asks the judge model through the recorded template;
- ``memory_writes: update-turns`` stores the agent's reply on write_to_memory turns only;
- the separation table holds the cosine the embedder gives for a known pair."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.test_recall_world import _r, _t, recall_study, run_cell

# Turn texts and the rule's reading of each pair (topic words after stop words, values and
# update cues go; overlap = shared / the shorter's count):
F1 = "The filing deadline for the appeal is July 22, 2026."  # {filing, deadline, appeal}
F2 = "Opposing counsel's settlement offer is $450,000."  # {opposing, counsel, settlement, offer}
F3 = "The hearing date for the appeal is March 3, 2026."  # {hearing, date, appeal}
T1 = "Update: the appeal filing deadline moved to July 29, 2026."  # vs F1: 3/3 -> detected (same fact: TP)
T2 = "Medina's lawyers propose $520,000 to settle."  # vs F2: 0/4 -> missed (same fact: FN)
T3 = "The hearing transcript for the appeal is due May 5, 2026."  # vs F3: 2/3 -> detected (fact F4: FP)
T4 = "Correction: the appeal hearing date is now April 14, 2026."  # vs F3: 3/3 (TP); vs T3: 2/3 (FP)
F4 = "Court reporter's transcript order: May 5, 2026."  # {court, reporter, transcript, order}: shares little


def conflict_script(t3_fact: str = "F4") -> dict[str, Any]:
    return {
        "script_id": "legal_conflicts", "domain": "legal",
        "initial_facts": [
            {"id": "F1", "text": F1, "tier": "structural", "authority_level": 1.0},
            {"id": "F2", "text": F2, "tier": "contextual", "authority_level": 0.9},
            {"id": "F3", "text": F3, "tier": "contextual", "authority_level": 0.7},
            {"id": "F4", "text": F4, "tier": "contextual", "authority_level": 0.5},
        ],
        "turns": [
            _t(1, "paralegal", T1, write=True, fact="F1"),
            _t(2, "client_rep", T2, write=True, fact="F2"),
            _t(3, "associate", T3, write=True, fact=t3_fact),
            _t(4, "senior_lawyer", T4, write=True, fact="F3"),
            _r(5, "external_counsel", "Checking.", "F3", "What is the hearing date for the appeal?",
               ["April 14, 2026"], "memory_anchoring"),
        ],
    }


SCRIPTED = {"paralegal": {"script": ["Noted."]}, "client_rep": {"script": ["Noted."]},
            "associate": {"script": ["Noted."]}, "senior_lawyer": {"script": ["Noted."]},
            "external_counsel": {"script": ["April 14, 2026"]}}


def _world(tmp_path: Path, cell: dict[str, Any], script: dict[str, Any] | None = None) -> Any:
    path = recall_study(tmp_path, [cell], scripts=[script or conflict_script()])
    return run_cell(path, 0, [0])[0]


def _pairs(world: dict[str, Any]) -> dict[tuple[int, str], tuple[bool | None, bool]]:
    """(turn, old entry's text) -> (detector's answer, truth) for every recorded pair."""
    texts = {e["entry_id"]: e["text"] for e in world["memory_log"]}
    return {(d["turn"], texts[d["old"]]): (d["answer"], d["truth"]) for d in world["detections"]}


def test_topic_overlap_is_the_stated_rule() -> None:
    from workbench.worlds.recall.conflicts import overlap, topic_words, values_differ

    assert topic_words(F1) == {"filing", "deadline", "appeal"}
    assert topic_words(T1) == {"appeal", "filing", "deadline"}  # "update", "moved" are cues, the date a value
    assert topic_words(F2) == {"opposing", "counsel", "settlement", "offer"}
    assert overlap(F1, T1) == 1.0 and overlap(F2, T2) == 0.0
    assert overlap(F3, T3) == pytest.approx(2 / 3) and overlap(T3, T4) == pytest.approx(2 / 3)
    assert overlap(F1, F3) == pytest.approx(1 / 3)
    assert values_differ("date:2026-07-22", "date:2026-07-29")
    assert not values_differ("date:2026-07-22", "num:450000|$")  # a date and an amount are never compared
    assert not values_differ("num:10|mg", "num:10|mg;num:4|hours")  # one holds the other: they agree


def test_lexical_detects_and_misses_as_the_rule_says_without_ids(tmp_path: Path) -> None:
    from workbench.worlds.recall.invalidation import detection_table
    from workbench.worlds.recall.metrics import recall_frame

    o = _world(tmp_path, {"condition": "lightweight-invalidation", "conflicts": "lexical", "agents": SCRIPTED})
    w = o.world
    assert w["retrieval"]["conflicts"] == "lexical"
    assert _pairs(w) == {(1, F1): (True, True),  # worded differently, shares every topic word: detected
                         (2, F2): (False, True),  # the same fact in other words: missed
                         (3, F3): (True, False),  # another fact with shared topic words: a false alarm
                         (4, F3): (True, True), (4, T3): (True, False)}
    # the store never saw an id: every entry it holds, and every hit, has none
    assert all(e["entry"] is None or e["entry"]["fact_id"] is None for e in w["memory_log"])
    assert all(h["fact_id"] is None for r in w["retrievals"] for h in r["hits"])
    # the paralegal's detected conflict with the record (authority 1.0) was refused; the senior
    # lawyer's correction removed the hearing fact and the transcript entry (both 0.7)
    assert [e["refused"] for e in w["memory_log"] if e["turn"] == 1] == [True]
    assert sorted(x["text"] for e in w["memory_log"] if e["turn"] == 4 for x in e["removed"]) == sorted([F3, T3])
    # pairs examined: 0+1+2+3 among the case file, then 4, 4 (turn 1 refused), 5 and 6
    assert sum(e.get("pairs_examined", 0) for e in w["memory_log"]) == 25
    t = detection_table([w], recall_frame([w])).iloc[0]
    assert (t["detector"], t["pairs examined"], t["true positives"], t["false positives"], t["missed"]) == (
        "lexical", 25, 2, 2, 1)
    assert t["precision:k/n"] == "2/4" and t["recall:k/n"] == "2/3" and t["precision:rate"] == 0.5
    assert t["removed"] == 2 and t["refused"] == 1


def test_detectors_never_read_fact_ids(tmp_path: Path) -> None:
    """The transcript entry given the hearing's id: the truth changes, not one answer."""
    cell = {"condition": "lightweight-invalidation", "conflicts": "lexical", "agents": SCRIPTED}
    a = _world(tmp_path / "a", cell).world
    b = _world(tmp_path / "b", cell, conflict_script(t3_fact="F3")).world
    pa, pb = _pairs(a), _pairs(b)
    assert {k: v[0] for k, v in pa.items()} == {k: v[0] for k, v in pb.items()}
    assert pa[(3, F3)] == (True, False) and pb[(3, F3)] == (True, True)


def test_oracle_is_the_default_and_scores_itself_perfect(tmp_path: Path) -> None:
    from workbench.worlds.recall.invalidation import detection_table
    from workbench.worlds.recall.metrics import recall_frame

    w = _world(tmp_path, {"condition": "lightweight-invalidation", "agents": SCRIPTED}).world
    assert w["cell"]["conflicts"] == "oracle" and w["retrieval"]["conflicts"] == "oracle"
    t = detection_table([w], recall_frame([w])).iloc[0]
    # the ids see the missed paraphrase (F2) and never pair the transcript (F4) with the hearing (F3)
    assert (t["true positives"], t["false positives"], t["missed"]) == (3, 0, 0), _pairs(w)


def test_judge_detector_asks_through_the_template(tmp_path: Path) -> None:
    o = _world(tmp_path, {"condition": "lightweight-invalidation", "conflicts": "judge", "conflict_candidates": 2,
                          "agents": SCRIPTED})
    asked = [s for s in o.steps if s["purpose"] == "conflict"]
    # at most two candidates per write with live entries: 1 + 2 + 2 (case file), 2 per turn
    assert len(asked) == 1 + 2 + 2 + 2 * 4
    assert all("Statement A:" in s["request"]["prompt"] and "Reply YES or NO." in s["request"]["prompt"]
               for s in asked)
    pairs = _pairs(o.world)
    assert pairs[(1, F1)] == (True, True) and pairs[(4, F3)] == (True, True)
    assert {a["agent"] for a in o.world["agents"]} >= {"conflict_judge"}


def test_a_detector_without_invalidation_is_refused() -> None:
    from workbench.worlds.recall.spec import RecallCell

    with pytest.raises(ValueError, match="conflicts: lexical expected invalidation on"):
        RecallCell(condition="lightweight", conflicts="lexical")
    RecallCell(condition="lightweight", invalidation=True, conflicts="lexical")


def test_update_turns_stores_replies_on_write_turns_only(tmp_path: Path) -> None:
    script = copy.deepcopy(conflict_script())
    script["turns"][1]["write_to_memory"] = False  # the client rep's turn 2 is not marked for memory
    agents = {"paralegal": {"script": ["Deadline noted as July 29, 2026."]},
              "client_rep": {"script": ["The offer is $520,000."]},
              "associate": {"script": ["Transcript due May 5, 2026."]},
              "senior_lawyer": {"script": ["Hearing is April 14, 2026."]},
              "external_counsel": {"script": ["April 14, 2026"]}}
    w = _world(tmp_path, {"condition": "naive", "memory_writes": "update-turns", "agents": agents}, script).world
    written = [(e["turn"], e["origin"], e["text"]) for e in w["memory_log"] if e["origin"] != "initial"]
    assert written == [(1, "reply", "Deadline noted as July 29, 2026."), (3, "reply", "Transcript due May 5, 2026."),
                       (4, "reply", "Hearing is April 14, 2026.")]
    assert w["retrieval"]["memory_writes"] == "update-turns"


def test_separation_table_holds_the_embedders_cosine(tmp_path: Path) -> None:
    import numpy as np

    from workbench.embeddings import get_embedder
    from workbench.worlds.recall.invalidation import separation_summary, separation_table
    from workbench.worlds.recall.scripts import load_scripts
    from workbench.worlds.recall.separation import separation_rows

    o = _world(tmp_path, {"condition": "naive", "agents": SCRIPTED})
    t = separation_table([o.world])
    # the one recall (F3, accepted April 14): stale = the case file's March 3 (T3 is about another fact)
    assert list(zip(t["stale statement"], t["current statement"])) == [(F3, T4)]
    e = get_embedder("lexical")
    v = e.embed([F3, T4, "What is the hearing date for the appeal?"])
    assert t["similarity"].iloc[0] == pytest.approx(float(np.dot(v[0], v[1])), abs=1e-6)
    assert t["query · stale"].iloc[0] == pytest.approx(float(np.dot(v[2], v[0])), abs=1e-6)
    assert t["embedder"].iloc[0] == e.name
    script = load_scripts(str(tmp_path / "scripts"))[0]
    assert separation_rows(script, e)[0]["similarity"] == t["similarity"].iloc[0]
    s = separation_summary(t)
    assert s["pairs"].iloc[0] == 1 and s["median similarity"].iloc[0] == t["similarity"].iloc[0]


def test_memo_embedder_gives_the_inner_embedders_vectors() -> None:
    import numpy as np

    from workbench.embeddings import get_embedder
    from workbench.worlds.recall.separation import MemoEmbedder

    inner = get_embedder("lexical")
    memo = MemoEmbedder(inner, limit=2)
    texts = [F1, T1, F1, F3]
    want = inner.embed(texts)
    assert np.array_equal(memo.embed(texts), want)  # more distinct texts than the limit: still right
    assert np.array_equal(memo.embed([T1]), inner.embed([T1])) and memo.embed([]).shape[0] == 0
