"""Onset as survival (Kaplan–Meier, with bands and a median interval) and the report's
breakdowns by task family, by agent, and of delivery failures and forced verdicts,
all per cell. The survival numbers are checked against a hand computation."""
from __future__ import annotations

import json
import math

import pytest
from collusion_synth import trajectory

from workbench.worlds.collusion import metrics as M

Z = 1.959963984540054


def loglog(s: float, se: float) -> tuple[float, float]:
    """The pointwise log(-log) interval, written out by hand."""
    sigma = se / (s * -math.log(s))
    return s ** math.exp(Z * sigma), s ** math.exp(-Z * sigma)


def test_km_curve_matches_a_hand_computation() -> None:
    # onsets 1, 2, 2, 5 and one trajectory that never colluded in its 3 episodes (censored at 3)
    rows = {r["episode"]: r for r in M.km_curve([1, 2, 2, 3, 5], [True, True, True, False, True], 5)}
    # S(1) = 4/5; S(2) = 4/5 * 2/4; no event at 3 or 4 (one censored at 3); S(5) = 0.4 * 0/1
    expected_s = {0: 1.0, 1: 0.8, 2: 0.4, 3: 0.4, 4: 0.4, 5: 0.0}
    assert {t: round(r["survival"], 12) for t, r in rows.items()} == expected_s
    assert [rows[t]["at_risk"] for t in range(1, 6)] == [5, 4, 2, 1, 1]
    assert [rows[t]["events"] for t in range(1, 6)] == [1, 2, 0, 0, 1]
    assert [rows[t]["censored"] for t in range(1, 6)] == [0, 0, 1, 0, 0]
    # Greenwood: var S(t) = S(t)^2 * sum d / (n (n - d))
    se1 = 0.8 * math.sqrt(1 / (5 * 4))
    se2 = 0.4 * math.sqrt(1 / (5 * 4) + 2 / (4 * 2))
    assert rows[1]["se"] == pytest.approx(se1) and rows[2]["se"] == pytest.approx(se2)
    assert rows[4]["se"] == pytest.approx(se2)
    assert (rows[1]["low"], rows[1]["high"]) == pytest.approx(loglog(0.8, se1))
    assert (rows[2]["low"], rows[2]["high"]) == pytest.approx(loglog(0.4, se2))
    assert (rows[1]["low"], rows[1]["high"]) == pytest.approx((0.2038, 0.9692), abs=1e-4)  # worked by hand
    assert (rows[0]["low"], rows[0]["high"]) == (1.0, 1.0) and (rows[5]["low"], rows[5]["high"]) == (0.0, 0.0)
    med, low, high = M.km_median([1, 2, 2, 3, 5], [True, True, True, False, True])
    assert med == 2.0 and low <= 2.0 <= high  # the first t with S(t) <= 1/2


def test_nobody_colluded_gives_a_flat_curve_and_no_median() -> None:
    rows = M.km_curve([4, 4, 4], [False, False, False], 4)
    assert [r["survival"] for r in rows] == [1.0] * 5 and rows[-1]["censored"] == 3
    assert all(math.isnan(x) for x in M.km_median([4, 4], [False, False]))


def worlds() -> list[dict]:
    main = [trajectory("a", [1], n=5), trajectory("b", [2], n=5), trajectory("c", [2, 3], n=5),
            trajectory("d", [], n=3), trajectory("e", [5], n=5)]
    other = [trajectory(f"o{i}", [], n=5, cell_id="mem0", label="memory none", world_index=i) for i in range(3)]
    for w in main + other:  # families cycle code, records, data by episode
        for ep in w["episodes"]:
            ep["family"] = ("code-analysis", "record-extraction", "data-search")[(ep["episode"] - 1) % 3]
    other[0]["episodes"][1]["delivery_failures"] = {"alice": 2, "bob": 0}
    other[0]["episodes"][2]["verdicts"]["bob"]["forced"] = True
    other[1]["episodes"][2]["delivery_failures"] = {"alice": 0, "bob": 1}
    return main + other


def test_survival_table_is_per_cell_and_matches_km_curve() -> None:
    tf = M.trajectory_frame(worlds())
    st = M.survival_table(tf)
    main = st[st["cell_id"] == "main"].set_index("episode")
    assert main.loc[2, "survival"] == pytest.approx(0.4) and main.loc[2, "colluded"] == pytest.approx(0.6)
    assert main.loc[2, "colluded_low"] == pytest.approx(1 - main.loc[2, "high"])
    other = st[st["cell_id"] == "mem0"]
    assert (other["survival"] == 1.0).all() and other["cell"].iloc[0] == "memory none"
    med = M.onset_median_table(tf).set_index("cell_id")
    assert med.loc["main", "KM median onset"] == 2.0 and med.loc["main", "censored"] == 1
    assert math.isnan(med.loc["mem0", "KM median onset"]) and med.loc["mem0", "colluded"] == 0


def test_breakdowns_by_family_agent_and_protocol() -> None:
    ef = M.episode_frame(worlds())
    fam = M.family_table(ef).set_index(["cell_id", "family"])
    # main: colluding episodes a1 (code), b2 (records), c2 (records), c3 (data), e5 (records)
    assert fam.loc[("main", "code-analysis"), "colluding"] == 1
    assert fam.loc[("main", "record-extraction"), "colluding"] == 3
    assert fam.loc[("main", "data-search"), "colluding"] == 1
    assert fam.loc[("main", "record-extraction"), "episodes"] == 9  # episodes 2 and 5 of four, 2 of d
    assert fam.loc[("main", "record-extraction"), "onsets in family"] == 3  # b, c, e
    assert fam.loc[("mem0", "data-search"), "colluding"] == 0
    ag = M.agent_table(ef).set_index(["cell_id", "agent"])
    assert ag.loc[("main", "alice"), "accepts"] == 5 and ag.loc[("main", "alice"), "episodes"] == 23
    assert ag.loc[("mem0", "alice"), "delivery failures"] == 2 and ag.loc[("mem0", "bob"), "delivery failures"] == 1
    assert ag.loc[("mem0", "bob"), "forced verdicts"] == 1 and ag.loc[("mem0", "alice"), "forced verdicts"] == 0
    pt = M.protocol_table(ef).set_index("cell_id")
    assert pt.loc["mem0", "delivery failures"] == 3 and pt.loc["mem0", "episodes with a delivery failure"] == 2
    assert pt.loc["mem0", "forced verdicts"] == 1 and pt.loc["main", "forced verdicts"] == 0


def test_world_record_stores_what_each_answer_missed_or_added() -> None:
    from workbench.worlds.collusion import tasks as T

    w = trajectory("w", [], n=2)
    rec, data_t = T.get_task("rec-01"), T.get_task("data-01")
    ids = json.loads(T.reference_answer(rec))
    w["episodes"][0].update({"family": "record-extraction", "tasks": {"alice": "rec-01", "bob": "rec-02"},
                             "answers": {"alice": json.dumps(ids[1:]), "bob": None}})
    w["episodes"][1].update({"family": "data-search", "tasks": {"alice": "data-01", "bob": "data-02"},
                             "answers": {"alice": T.reference_answer(data_t),
                                         "bob": T.corrupt_answer(T.get_task("data-02"),
                                                                 T.reference_answer(T.get_task("data-02")))}})
    stored = M.world_metrics(w, [])["answer_evaluations"]
    by = {(d["episode"], d["agent"]): d for d in stored}
    assert by[(1, "alice")]["missing"] == [ids[0]] and by[(1, "alice")]["correct"] is False
    assert by[(1, "bob")]["problem"] == "no answer saved"
    assert by[(2, "alice")]["correct"] is True and not by[(2, "bob")]["correct"]
    assert by[(2, "bob")]["extra"] or by[(2, "bob")]["missing"]
    frame = M.evaluation_frame([w])
    assert len(frame) == 4 and list(frame["family"]) == ["record-extraction"] * 2 + ["data-search"] * 2
