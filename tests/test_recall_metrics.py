"""Recall metrics are pure functions of world records: rates over valid worlds with
Wilson intervals, differences with Newcombe intervals and McNemar on recalls paired
by script, repetition and turn; cells that differ in another factor never pool."""
from __future__ import annotations

import io
import math
from typing import Any

import pytest

from workbench.stats import mcnemar_paired, newcombe, wilson
from workbench.worlds.recall.metrics import (
    accuracy_table,
    condition_differences,
    describe_world,
    metric_tables,
    recall_frame,
    summary_text,
    world_row,
)


def fake_world(cell_id: str, condition: str, script_id: str, repetition: int, outcomes: list[tuple[str, bool]], *,
               valid: bool = True, model: str = "sim-recall/trusting", domain: str = "legal",
               cell: dict[str, Any] | None = None) -> dict[str, Any]:
    recalls = [{"turn": 10 + i, "agent": "associate", "role": "associate", "route": model, "failure_mode": mode,
                "target_fact_id": "F1", "query": "q?", "ground_truth": ["July 22, 2026"],
                "answer": "July 22, 2026" if ok else "July 8, 2026", "correct": ok, "correct_exact": ok,
                "judge": None, "context": {"entry_ids": ["m1"], "own_turns": [3], "memory_shown": True},
                "truth_rank": 1 if ok else 2, "top_entry_correct": ok, "step": i}
               for i, (mode, ok) in enumerate(outcomes)]
    return {"kind": "world", "world_kind": "recall", "world_id": f"{cell_id}-{repetition:04d}-{script_id}",
            "cell_id": cell_id, "cell_label": f"{model} · {condition}", "run": 1, "seed": 1,
            "cell": {"model": model, "condition": condition, "k": 3, "embedder": "lexical", "scoring": "exact",
                     **(cell or {})},
            "script": {"script_id": script_id, "domain": domain}, "repetition": repetition, "world_index": repetition,
            "valid": valid, "failed": None, "agents": [{"agent": "associate", "role": "associate", "route": model}],
            "turns": [], "retrievals": [], "memory_log": [], "recalls": recalls}


def test_accuracy_uses_valid_worlds_with_wilson_and_counts_all_beside() -> None:
    worlds = [fake_world("A", "naive", "s1", 0, [("authority_collapse", True), ("belief_asymmetry", False)]),
              fake_world("A", "naive", "s2", 0, [("authority_collapse", False)]),
              fake_world("A", "naive", "s3", 0, [("authority_collapse", True)], valid=False)]
    t = accuracy_table(recall_frame(worlds), ["model", "condition", "failure_mode"])
    ac = t[t["failure_mode"] == "authority_collapse"].iloc[0]
    assert (ac["k"], ac["n"], ac["all"]) == (1, 2, "2/3")
    assert (ac["low"], ac["high"]) == pytest.approx(wilson(1, 2))
    ba = t[t["failure_mode"] == "belief_asymmetry"].iloc[0]
    assert (ba["k"], ba["n"], ba["rate"]) == (0, 1, 0.0)


def test_differences_use_newcombe_and_pair_recalls_by_script_repetition_and_turn() -> None:
    worlds = []
    naive = [True, False, False, False]
    light = [True, True, True, False]
    for i, (a, b) in enumerate(zip(naive, light)):
        worlds.append(fake_world("N", "naive", f"s{i}", 0, [("authority_collapse", a)]))
        worlds.append(fake_world("L", "lightweight", f"s{i}", 0, [("authority_collapse", b)]))
    worlds.append(fake_world("L", "lightweight", "s9", 1, [("authority_collapse", True)]))  # no partner
    d = condition_differences(recall_frame(worlds))
    row = d[(d["failure_mode"] == "authority_collapse") & (d["condition"] == "lightweight")].iloc[0]
    assert row["reference"] == "naive" and row["k/n"] == "4/5" and row["reference k/n"] == "1/4"
    diff, low, high = newcombe(4, 5, 1, 4)
    assert (row["diff"], row["low"], row["high"]) == pytest.approx((diff, low, high))
    m = mcnemar_paired(light, naive)
    assert (row["pairs"], row["only_condition"], row["only_reference"]) == (4, 2, 0)
    assert row["p_mcnemar"] == pytest.approx(m["pvalue"])
    assert set(d["failure_mode"]) == {"all", "authority_collapse"}


def test_models_and_other_factors_never_pool() -> None:
    worlds = [fake_world("A", "naive", "s1", 0, [("memory_anchoring", True)]),
              fake_world("B", "naive", "s1", 0, [("memory_anchoring", False)], model="sim-recall/careful"),
              fake_world("C", "naive", "s1", 0, [("memory_anchoring", False)], cell={"k": 5})]
    t = metric_tables(worlds)["by_condition"]
    assert len(t) == 3 and set(t["n"]) == {1}
    assert "k=5" in set(t["variant"])


def test_world_row_and_summary_text() -> None:
    w = fake_world("A", "lightweight", "s1", 0, [("authority_collapse", True), ("memory_anchoring", False),
                                                 ("memory_anchoring", True)])
    w["memory_log"] = [{"source": "initial_fact", "removed": [], "refused": False},
                       {"source": "turn", "removed": [{"entry_id": "m1"}], "refused": False},
                       {"source": "turn", "removed": [], "refused": True}]
    steps = [{"reply": {"usage": {"prompt_tokens": 10, "completion_tokens": 2}}}]
    m = world_row(w, steps)
    assert (m["n_recalls"], m["n_correct"], m["n_writes"], m["n_removed"], m["n_refused"], m["tokens"]) == (
        3, 2, 2, 1, 1, 12)
    assert m["by_failure_mode"] == {"authority_collapse": [1, 1], "memory_anchoring": [1, 2]}
    assert math.isclose(m["accuracy"], 2 / 3)
    text = summary_text([w])
    assert "sim-recall/trusting · lightweight" in text and "66.7%" in text and "Wilson" in text


def test_metric_tables_and_describe_world_on_a_real_world(tmp_path) -> None:  # noqa: ANN001
    from tests.test_recall_world import recall_study, run_cell

    path = recall_study(tmp_path, [{"condition": "lightweight-invalidation"}])
    o = run_cell(path, 0, [0])[0]
    tables = metric_tables([o.world])
    assert {"by_condition", "by_mode_condition", "by_domain_mode_condition", "differences", "recalls",
            "worlds"} <= set(tables)
    t = tables["by_mode_condition"]
    assert set(t["failure_mode"]) == {"authority_collapse", "belief_asymmetry", "memory_anchoring"}
    assert ((t["low"] <= t["rate"]) & (t["rate"] <= t["high"])).all()
    out = io.StringIO()
    describe_world(o.world, o.steps, out, full=True)
    text = out.getvalue()
    assert "RECALL" in text and "legal_test_01" in text and ("invalidated" in text or "refused" in text)


def test_variant_names_every_cell_field_but_model_condition_and_label():
    """Tables group recall cells by model, variant and condition: the variant must cover
    every other field of the cell, or cells that differ in it would be pooled."""
    from workbench.worlds.recall.metrics import cell_defaults, variant_of
    from workbench.worlds.recall.spec import RecallCell

    assert set(RecallCell.model_fields) - set(cell_defaults()) == {"model", "condition", "label"}
    base = RecallCell().model_dump(mode="json")
    assert variant_of(base) == ""
    for change in ({"sampling": {"temperature": 0.7}}, {"prompts": "other"}, {"judge": "sim-recall/x"}, {"k": 5}):
        assert variant_of({**base, **change}) != "", change
    # a field the spec does not know (a record of another version) is a factor too
    assert variant_of({**base, "vector_backend_x": "other"}) == "vector_backend_x=other"


def test_metrics_recount_recorded_outcomes_by_todays_rules() -> None:
    """A world recorded under the old exact rule (3.5% of NAV taken for 5% of NAV, and a
    stored per-world count that says so): accuracy tables, the per-world frame and the
    run summary all score the answer again, and every accuracy table carries the hedged
    count beside the rate."""
    from workbench.worlds.recall.metrics import world_frame

    w = fake_world("A", "naive", "s1", 0, [("memory_anchoring", True), ("memory_anchoring", True)])
    w["recalls"][0].update(ground_truth=["5% of NAV"], answer="a target cash buffer of 3.5% of NAV")
    w["metrics"] = {"n_recalls": 2, "n_correct": 2, "accuracy": 1.0, "tokens": 7}
    t = metric_tables([w])
    for name in ("by_condition", "by_mode_condition", "by_domain_mode_condition"):
        row = t[name].iloc[0]
        assert (row["k/n"], row["hedged:k/n"], row["hedged:k"], row["hedged:rate"]) == ("1/2", "0/2", 0, 0.0), name
    wf = world_frame([w]).iloc[0]
    assert (wf["n_correct"], wf["n_hedged"], wf["accuracy"], wf["tokens"]) == (1, 0, 0.5, 7)
    assert world_row(w, [])["by_failure_mode"] == {"memory_anchoring": [1, 2]}
    assert "50.0%" in summary_text([w]) and list(t["recalls"]["outcome"]) == ["other", "correct"]
    assert list(accuracy_table(recall_frame([]), ["condition"]).columns)[-6:] == [
        "hedged:k/n", "hedged:k", "hedged:rate", "hedged:low", "hedged:high", "mean partial_score"]
