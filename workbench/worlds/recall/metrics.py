"""Metrics of the recall world, from its records alone (pure functions).

The unit of analysis is the recall: one row per recall probe of a finished
world. Rates are k/n over recalls of *valid* worlds (every recall answered,
every verdict parsed) with 95% Wilson intervals; the same over all worlds
sits beside them in ``all``. Differences between conditions use Newcombe's
interval (the cells are run as independent samples) and, beside it, an exact
McNemar test on the recalls paired by script, repetition and turn (world ``i``
of every cell plays the same script with the same agent draws). No
multiple-comparison correction is applied: say so when comparing many cells.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from workbench.stats import mcnemar_paired, newcombe, wilson
from workbench.worlds.recall.outcomes import GIVEN_KINDS

if TYPE_CHECKING:  # imported where a frame is built: world metrics (every `run`) need none
    import pandas as pd

MODES = ("belief_asymmetry", "authority_collapse", "memory_anchoring")
NOT_VARIANT = ("model", "condition", "label")  # model and condition are columns of their own; label names a cell
_DEFAULTS_CACHE: dict[str, Any] = {}


def cell_defaults() -> dict[str, Any]:
    """Every cell field but model, condition and label at its default (RecallCell's,
    as JSON): a recorded field at another value is a factor that tables keep apart.
    Read from the spec, so a field added to the cell (memory_writes, retrieve,
    context_turns, vector_backend, ...) is a factor without a change here."""
    if not _DEFAULTS_CACHE:
        from workbench.worlds.recall.spec import RecallCell

        dumped = RecallCell().model_dump(mode="json")
        _DEFAULTS_CACHE.update({k: v for k, v in dumped.items() if k not in NOT_VARIANT})
    return _DEFAULTS_CACHE


def _simulated(route: str) -> bool:
    from workbench.routes import is_simulated_route

    return is_simulated_route(route)


def recall_counts(world: dict[str, Any]) -> dict[str, Any]:
    """A world's recalls counted by re-scored outcome (:func:`outcomes.rescore`: today's
    rules, from the record): right, hedged, and right per failure mode as [k, n]."""
    from workbench.worlds.recall.outcomes import rescore, world_statements

    recalls = world.get("recalls", [])
    statements = world_statements(world) if recalls else []
    scored = [rescore(world, r, statements) for r in recalls]
    by_mode: dict[str, list[int]] = {}
    for r, sc in zip(recalls, scored):
        k_n = by_mode.setdefault(r["failure_mode"] or "none", [0, 0])
        k_n[0] += sc.correct
        k_n[1] += 1
    n_correct = sum(sc.correct for sc in scored)
    return {"n_recalls": len(recalls), "n_correct": n_correct,
            "accuracy": n_correct / len(recalls) if recalls else None,
            "n_correct_exact": sum(sc.correct_exact for sc in scored), "n_hedged": sum(sc.hedged for sc in scored),
            "by_failure_mode": by_mode}


def world_row(world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-world metrics stored in the world record under ``metrics``; the recall counts
    by today's rules (:func:`recall_counts`), which readers recompute from the record."""
    recalls = world.get("recalls", [])
    log = world.get("memory_log", [])
    tokens = sum(int(s["reply"].get("usage", {}).get("prompt_tokens", 0) or 0)
                 + int(s["reply"].get("usage", {}).get("completion_tokens", 0) or 0) for s in steps)
    return {
        **recall_counts(world),
        "n_retrievals": len(world.get("retrievals", [])),
        "n_writes": sum(1 for e in log if e["source"] != "initial_fact"),
        "n_removed": sum(len(e["removed"]) for e in log),
        "n_refused": sum(1 for e in log if e["refused"]),
        "truth_retrieved": sum(1 for r in recalls if r.get("truth_rank") is not None),
        "truth_top": sum(1 for r in recalls if r.get("truth_rank") == 1),
        "steps": len(steps), "tokens": tokens,
    }


def model_of(world: dict[str, Any]) -> str:
    """The agents' routes (never the judge's), joined: the model setting of a cell."""
    routes = sorted({a["route"] for a in world.get("agents", []) if a["agent"] not in ("judge", "conflict_judge")})
    return "+".join(routes) or str(world.get("cell", {}).get("model"))


def variant_parts(cell: dict[str, Any]) -> list[str]:
    """The cell's settings other than model and condition that differ from the
    defaults, as ``key=value`` each. A recorded field the spec does not know (a
    record from another version) is always a part: tables keep such cells apart
    rather than pool them (a part every cell shares is lifted to the caption)."""
    defaults = cell_defaults()
    parts = []
    for key in sorted(set(cell) - set(NOT_VARIANT), key=lambda k: (k not in defaults, list(defaults).index(k)
                                                                   if k in defaults else 0, k)):
        value = cell[key]
        if key in defaults and value == defaults[key]:
            continue
        parts.append(f"{key}={json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value}")
    return parts


def variant_of(cell: dict[str, Any]) -> str:
    """The cell's settings other than model and condition that differ from the defaults,
    so that tables never pool cells that differ in another factor."""
    return "; ".join(variant_parts(cell))


RECALL_COLUMNS = ["world_id", "cell_id", "cell_label", "model", "variant", "condition", "scoring", "script_id",
                  "domain", "repetition", "world_index", "seed", "valid", "failed", "simulated", "turn", "role",
                  "route", "failure_mode", "target_fact_id", "correct", "outcome", "hedged", "correct_exact", "matched",
                  "partial_score", "judge_verdict", "rule_verdict", "rule_reason", "given_kind", "given_value", "truth_rank",
                  "top_entry_correct", "n_in_context", "own_turns", "answer", "ground_truth"]


def recall_scores(r: dict[str, Any]) -> dict[str, Any]:
    """``matched`` and ``partial_score`` of a recall record and the rule judge's ruling
    on its answer, computed from the answer and accepted answers by today's rules (a
    record's own ``matched`` and ``partial_score`` may predate them: numbers read as
    numbers, no partial credit for another number), so old and new runs score alike."""
    from workbench.worlds.recall.scoring import judge_rule, score_answer

    answer, truth = r.get("answer"), list(r.get("ground_truth") or [])
    scored = score_answer(answer, truth)
    ruling = judge_rule(answer, truth)
    return {"matched": scored["matched"], "partial_score": scored["partial_score"], "rule_verdict": ruling.verdict,
            "rule_reason": ruling.reason}


def recall_hits(world: dict[str, Any]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    """The entries retrieved for each recall of a world, by (turn, agent)."""
    return {(x.get("turn"), x.get("agent")): x["hits"] for x in world.get("retrievals") or []
            if x.get("purpose", "recall") == "recall" and isinstance(x.get("hits"), list)}


def truth_rank(recall: dict[str, Any], hits: list[dict[str, Any]] | None) -> tuple[int | None, bool]:
    """(rank of the first retrieved entry that states an accepted answer, whether the top
    entry does), by today's exact rule over the recorded hits; as recorded where the
    record kept no hits (no memory)."""
    from workbench.worlds.recall.scoring import exact_match

    if hits is None:
        rank = recall.get("truth_rank")
        return (None if rank is None else int(rank)), bool(recall.get("top_entry_correct"))
    truth = list(recall.get("ground_truth") or [])
    right = [h for h in hits if exact_match(h.get("text"), truth)]
    return (int(right[0]["rank"]) if right else None), bool(hits) and exact_match(hits[0].get("text"), truth)


def recall_frame(worlds: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per recall of every finished world, scored again from the record by
    today's rules (:func:`outcomes.rescore`), so old runs read as new ones: ``correct``
    (the cell's verdict, not hedged), ``outcome`` (``correct`` or the kind of failure,
    one of :data:`outcomes.OUTCOMES`), ``hedged``, ``correct_exact``, ``matched`` and
    ``partial_score`` (see :func:`recall_scores`), ``rule_verdict`` and ``rule_reason``
    (the offline rule judge on the answer, for every recall, whatever the cell's
    scoring), ``truth_rank`` and ``top_entry_correct`` (over the recorded hits) and,
    for failed recalls, ``given_kind`` and ``given_value`` (which value the answer
    gave: :func:`outcomes.given_value`)."""
    import pandas as pd

    from workbench.worlds.recall.outcomes import given_value, rescore, world_statements

    rows = []
    for w in worlds:
        if w.get("world_kind") != "recall":
            continue
        cell = w.get("cell", {})
        base = {"world_id": w["world_id"], "cell_id": w["cell_id"], "cell_label": w.get("cell_label") or w["cell_id"],
                "model": model_of(w), "variant": variant_of(cell), "condition": cell.get("condition"),
                "scoring": cell.get("scoring", "exact"), "script_id": w["script"]["script_id"],
                "domain": w["script"]["domain"], "repetition": w.get("repetition"),
                "world_index": w.get("world_index"), "seed": w.get("seed"), "valid": bool(w.get("valid")),
                "failed": bool(w.get("failed")),
                "simulated": all(_simulated(a["route"]) for a in w.get("agents", []))}
        statements = world_statements(w) if w.get("recalls") else []
        hits = recall_hits(w)
        for r in w.get("recalls", []):
            judge = r.get("judge") or {}
            scored = rescore(w, r, statements)
            given: dict[str, Any] = {"kind": None, "value": None}
            if not scored.correct:
                given = given_value(w, r, statements, scored)
            rank, top = truth_rank(r, hits.get((r.get("turn"), r.get("agent"))))
            rows.append({**base, "turn": r["turn"], "role": r["role"], "route": r["route"],
                         "failure_mode": r["failure_mode"], "target_fact_id": r["target_fact_id"],
                         "correct": scored.correct, "outcome": "correct" if scored.correct else given["kind"],
                         "hedged": scored.hedged, "correct_exact": scored.correct_exact,
                         **recall_scores(r), "judge_verdict": judge.get("verdict"),
                         "given_kind": given["kind"], "given_value": given["value"], "truth_rank": rank,
                         "top_entry_correct": top,
                         "n_in_context": len(r["context"]["entry_ids"]), "own_turns": len(r["context"]["own_turns"]),
                         "answer": r.get("answer"), "ground_truth": " | ".join(r["ground_truth"])})
    return _lift_shared_variant(pd.DataFrame(rows, columns=RECALL_COLUMNS))


def _lift_shared_variant(frame: pd.DataFrame) -> pd.DataFrame:
    """Settings every cell of the run set shares are no variant: they leave the
    ``variant`` column (which would repeat them on every row) for ``attrs`` (said
    once, in a table's caption). What tells cells apart stays in the column."""
    if frame.empty:
        frame.attrs["variant_shared"] = ""
        return frame
    per_cell = {cid: v.split("; ") if v else [] for cid, v in zip(frame["cell_id"], frame["variant"])}
    shared = set.intersection(*(set(p) for p in per_cell.values()))
    keep = {cid: "; ".join(p for p in parts if p not in shared) for cid, parts in per_cell.items()}
    frame["variant"] = frame["cell_id"].map(keep)
    frame.attrs["variant_shared"] = "; ".join(p for p in next(iter(per_cell.values())) if p in shared)
    return frame


def _rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "k/n": f"{k}/{n}", "rate": (k / n) if n else float("nan"), "low": low, "high": high}


_HEDGED_COLUMNS = ["hedged:k/n", "hedged:k", "hedged:rate", "hedged:low", "hedged:high"]


def _hedged_rate(k: int, n: int) -> dict[str, Any]:
    """The hedged recalls as a rate group (``X:k/n``, ``X:low``, ``X:high``: what the
    report shows as one rate phrase)."""
    r = _rate(k, n)
    return {"hedged:k/n": r["k/n"], "hedged:k": k, "hedged:rate": r["rate"], "hedged:low": r["low"],
            "hedged:high": r["high"]}


def accuracy_table(frame: pd.DataFrame, by: list[str], metric: str = "correct") -> pd.DataFrame:
    """k/n of ``metric`` over recalls of valid worlds per group, Wilson interval, and
    the same over all worlds in ``all``; for accuracy, beside it the rate of hedged
    recalls among the same (``hedged:k/n`` with its Wilson interval: an accepted value
    and a stale one both stated, counted wrong, so a reader sees how much of the
    shortfall is hedging) and the mean ``partial_score`` (a descriptive mean, no
    interval)."""
    import pandas as pd

    rows = []
    partial = metric == "correct" and "partial_score" in frame.columns
    hedged = metric == "correct" and "hedged" in frame.columns
    extra = [*(_HEDGED_COLUMNS if hedged else []), *(["mean partial_score"] if partial else [])]
    if frame.empty:
        return pd.DataFrame(columns=[*by, "k", "n", "k/n", "rate", "low", "high", "all", *extra])
    for key, g in frame.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        v = g[g["valid"]]
        row = {**dict(zip(by, key)), **_rate(int(v[metric].sum()), len(v)), "all": f"{int(g[metric].sum())}/{len(g)}"}
        if hedged:
            row.update(_hedged_rate(int(v["hedged"].sum()), len(v)))
        if partial:
            row["mean partial_score"] = float(v["partial_score"].mean()) if len(v) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def reference_condition(conditions: Iterable[str]) -> str | None:
    cs = list(dict.fromkeys(conditions))
    for c in ("naive", "baseline"):
        if c in cs:
            return c
    return cs[0] if cs else None


def condition_differences(frame: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """Accuracy of each condition minus the reference condition's (default naive), per
    model setting and failure mode (and over all modes), with Newcombe's interval and
    an exact McNemar test on recalls paired by script, repetition and turn."""
    import pandas as pd

    cols = ["model", "variant", "failure_mode", "condition", "reference", "k/n", "reference k/n", "diff", "low",
            "high", "pairs", "only_condition", "only_reference", "p_mcnemar"]
    v = frame[frame["valid"]] if not frame.empty else frame
    if v.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (model, variant), g in v.groupby(["model", "variant"], sort=True):
        ref = reference or reference_condition(sorted(g["condition"].unique()))
        if ref not in set(g["condition"]):
            continue
        for mode in ["all", *sorted(g["failure_mode"].unique())]:
            gm = g if mode == "all" else g[g["failure_mode"] == mode]
            r = gm[gm["condition"] == ref]
            for cond in sorted(set(gm["condition"]) - {ref}):
                c = gm[gm["condition"] == cond]
                k1, n1, k2, n2 = int(c["correct"].sum()), len(c), int(r["correct"].sum()), len(r)
                diff, low, high = newcombe(k1, n1, k2, n2)
                key = ["script_id", "repetition", "turn"]
                paired = c[key + ["correct"]].merge(r[key + ["correct"]], on=key, suffixes=("_c", "_r"))
                m = mcnemar_paired(list(paired["correct_c"]), list(paired["correct_r"]))
                rows.append({"model": model, "variant": variant, "failure_mode": mode, "condition": cond,
                             "reference": ref, "k/n": f"{k1}/{n1}", "reference k/n": f"{k2}/{n2}", "diff": diff,
                             "low": low, "high": high, "pairs": int(m["n"]), "only_condition": int(m["only_a"]),
                             "only_reference": int(m["only_b"]), "p_mcnemar": float(m["pvalue"])})
    return pd.DataFrame(rows, columns=cols)


def world_frame(worlds: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per world: validity, accuracy (re-scored from the record, see
    :func:`recall_counts`) and memory activity."""
    import pandas as pd

    rows = []
    for w in worlds:
        if w.get("world_kind") != "recall":
            continue
        m = {**(w.get("metrics") or world_row(w, [])), **recall_counts(w)}  # recall counts by today's rules
        rows.append({"world_id": w["world_id"], "cell_id": w["cell_id"], "cell_label": w.get("cell_label"),
                     "model": model_of(w), "condition": w["cell"].get("condition"),
                     "script_id": w["script"]["script_id"], "domain": w["script"]["domain"],
                     "repetition": w.get("repetition"), "valid": bool(w.get("valid")), "failed": bool(w.get("failed")),
                     **{k: m.get(k) for k in ("n_recalls", "n_correct", "n_hedged", "accuracy", "n_retrievals", "n_writes",
                                               "n_removed", "n_refused", "truth_retrieved", "truth_top", "steps",
                                               "tokens")}})
    return pd.DataFrame(rows)


def cohen_kappa(both_yes: int, a_only: int, b_only: int, both_no: int) -> float:
    """Cohen's kappa of two raters' yes/no verdicts on the same items, from the 2×2
    counts: (p_o − p_e) / (1 − p_e), p_o the share they agree on, p_e the share
    expected by chance from each rater's own yes rate. NaN when there are no items
    or chance agreement is 1 (both raters gave one verdict throughout: kappa is
    undefined, whatever the agreement)."""
    n = both_yes + a_only + b_only + both_no
    if n == 0:
        return float("nan")
    po = (both_yes + both_no) / n
    a_yes, b_yes = (both_yes + a_only) / n, (both_yes + b_only) / n
    pe = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
    if pe >= 1:
        return float("nan")
    return (po - pe) / (1 - pe)


JUDGES = {"judge": "judge_verdict", "rule": "rule_verdict"}
JUDGE_NAMES = {"judge": "the cell's judge (recorded verdict)", "rule": "the offline rule judge (re-scored)"}
AGREEMENT_COLUMNS = ["model", "variant", "condition", "judge", "recalls", "both correct", "both wrong",
                     "judge only", "exact only", "agreement", "kappa", "paraphrase", "near miss"]


def judge_agreement(frame: pd.DataFrame) -> pd.DataFrame:
    """Judge against exact match, per cell (model setting, variant and condition;
    never pooled across cells), over answered recalls of valid worlds: the 2×2
    counts, the share agreeing and Cohen's kappa. Two judges: the cell's own judge
    where it ran one (``scoring: judge``), and the offline rule judge
    (:func:`scoring.judge_rule`) on every answered recall. ``paraphrase`` and
    ``near miss``: of the recalls where this judge and exact match disagree, those
    the rule judge reads as a paraphrase (the accepted value in other words) or as
    a near miss (the accepted words, another date, number or unit)."""
    import pandas as pd

    rows = []
    v = frame[frame["valid"] & frame["answer"].notna()] if not frame.empty else frame
    for (model, variant, condition), g in (v.groupby(["model", "variant", "condition"], sort=True)
                                           if not v.empty else []):
        for judge, col in JUDGES.items():
            j = g[g[col].notna()]
            if j.empty:
                continue
            jv, ex = j[col].astype(bool), j["correct_exact"].astype(bool)
            yy, jn, ny, nn = int((jv & ex).sum()), int((jv & ~ex).sum()), int((~jv & ex).sum()), int((~jv & ~ex).sum())
            reasons = j.loc[jv != ex, "rule_reason"]  # the rule's reading of this judge's disagreements
            rows.append({"model": model, "variant": variant, "condition": condition, "judge": judge,
                         "recalls": len(j), "both correct": yy, "both wrong": nn, "judge only": jn, "exact only": ny,
                         "agreement": (yy + nn) / len(j), "kappa": cohen_kappa(yy, jn, ny, nn),
                         "paraphrase": int((reasons == "paraphrase").sum()),
                         "near miss": int((reasons == "near miss").sum())})
    out = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    out.attrs["empty_reason"] = "no answered recall in a valid world"
    return out


def judge_disagreements(frame: pd.DataFrame) -> pd.DataFrame:
    """Every answered recall of a valid world on which a judge and exact match
    disagree: the cell, the recall, both verdicts, the rule judge's reason, the
    answer and the accepted answers (model text: escape it when shown)."""
    cols = ["model", "variant", "condition", "world_id", "turn", "failure_mode", "judge", "judge_verdict",
            "correct_exact", "rule_reason", "answer", "ground_truth"]
    import pandas as pd

    if frame.empty:
        return pd.DataFrame(columns=cols)
    v = frame[frame["valid"] & frame["answer"].notna()]
    parts = []
    for judge, col in JUDGES.items():
        d = v[v[col].notna() & (v[col].astype(bool) != v["correct_exact"])].copy()
        d["judge"], d["judge_verdict"] = judge, d[col].astype(bool)
        parts.append(d)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
    return out[cols] if not out.empty else pd.DataFrame(columns=cols)


GIVEN_COLUMNS = list(GIVEN_KINDS)  # hedged, anchored, stale, lower-authority, other, no value


def given_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Failed recalls of valid worlds per cell and failure mode, counted by which value
    the answer gave (:func:`outcomes.given_value`): hedged (the accepted value and a
    stale one both), anchored (said by two or more agents), stale (superseded later),
    lower-authority (its most senior speaker ranks below the truth's), other, no
    value. Each failed recall counts once, under the first of those that holds."""
    import pandas as pd

    cols = ["model", "variant", "failure_mode", "condition", "failed", *GIVEN_COLUMNS]
    f = frame[frame["valid"] & ~frame["correct"]] if not frame.empty else frame
    if f.empty:
        out = pd.DataFrame(columns=cols)
        out.attrs["empty_reason"] = "no failed recall in a valid world"
        return out
    rows = []
    for key, g in f.groupby(["model", "variant", "failure_mode", "condition"], sort=True):
        counts = g["given_kind"].fillna("other").value_counts()
        rows.append({**dict(zip(["model", "variant", "failure_mode", "condition"], key)), "failed": len(g),
                     **{k: int(counts.get(k, 0)) for k in GIVEN_COLUMNS}})
    return pd.DataFrame(rows, columns=cols)


FAILED_COLUMNS = ["model", "variant", "condition", "failure_mode", "script_id", "repetition", "turn", "role",
                  "given_kind", "given_value", "answer", "ground_truth"]


def failed_recalls(frame: pd.DataFrame) -> pd.DataFrame:
    """Every failed recall of a valid world with the value it gave (kind and value,
    as in :func:`given_values`), its answer and the accepted answers (model text:
    escape it when shown)."""
    import pandas as pd

    if frame.empty:
        return pd.DataFrame(columns=FAILED_COLUMNS)
    f = frame[frame["valid"] & ~frame["correct"]]
    return f[FAILED_COLUMNS].reset_index(drop=True)


ORIGINS = ("initial", "script", "reply")
CONFLICT_TYPES = ("stale", "lower-authority", "duplicate")
_SOURCE_ORIGIN = {"initial_fact": "initial", "turn": "script", "narration": "script", "reply": "reply"}


def memory_events(world: dict[str, Any]) -> dict[str, int]:
    """A world's memory activity as counts: writes by origin (initial, script, reply;
    read from ``source`` in records that predate ``origin``), writes refused, and
    invalidation events by type and action (``removed``, ``refused``, ``kept``) from
    the ``conflicts`` list. A record without ``conflicts`` (an older run) counts its
    removals and refusals under type ``untyped``."""
    out: dict[str, int] = {f"writes {o}": 0 for o in ORIGINS}
    out["writes refused"] = 0
    for e in world.get("memory_log") or []:
        origin = e.get("origin") or _SOURCE_ORIGIN.get(str(e.get("source")), str(e.get("source")))
        out[f"writes {origin}"] = out.get(f"writes {origin}", 0) + 1
        out["writes refused"] += bool(e.get("refused"))
    if "conflicts" in world:
        for c in world.get("conflicts") or []:
            key = f"{c.get('type')} {c.get('action')}"
            out[key] = out.get(key, 0) + 1
    else:
        removed = sum(len(e.get("removed") or []) for e in world.get("memory_log") or [])
        refused = sum(bool(e.get("refused")) for e in world.get("memory_log") or [])
        if removed:
            out["untyped removed"] = removed
        if refused:
            out["untyped refused"] = refused
    return out


def memory_table(worlds: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Memory writes by origin and invalidation events (removals, refusals, kept
    duplicates) by type, summed over the worlds of each cell (model setting,
    variant and condition; never pooled across cells), with the worlds counted.
    Columns for every origin and every type × action, zero where none happened."""
    import pandas as pd

    sums: dict[tuple[str, str, str], dict[str, int]] = {}
    for w in worlds:
        if w.get("world_kind") != "recall":
            continue
        key = (model_of(w), variant_of(w.get("cell", {})), str(w.get("cell", {}).get("condition")))
        acc = sums.setdefault(key, {"worlds": 0})
        acc["worlds"] += 1
        for k, n in memory_events(w).items():
            acc[k] = acc.get(k, 0) + n
    fixed = ["worlds", *(f"writes {o}" for o in ORIGINS), "writes refused",
             *(f"{t} {a}" for t in CONFLICT_TYPES for a in ("removed", "refused", "kept"))]
    extra = sorted({k for acc in sums.values() for k in acc} - set(fixed))
    rows = [{"model": m, "variant": v, "condition": c, **{k: acc.get(k, 0) for k in (*fixed, *extra)}}
            for (m, v, c), acc in sorted(sums.items())]
    out = pd.DataFrame(rows, columns=["model", "variant", "condition", *fixed, *extra])
    if len(out) and "variant" in out:
        shared = recall_frame_shared_variant(out)
        out.attrs["variant_shared"] = shared
    return out


def memory_size_table(worlds: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Memory at its size, per cell (model setting, variant, condition; never pooled across
    cells): the store and its index settings, the distractors written, the live entries a
    recall searched (mean and largest), recall@k of the approximate index against an exact
    scan of the same entries (vector_backend chroma: the exact top k's entries the index's
    search also returned, over every retrieval, and the share of retrievals whose top k came
    back identical) and recall accuracy (every recall, re-scored; Wilson interval)."""
    import pandas as pd

    acc: dict[tuple[str, str, str], dict[str, Any]] = {}
    for w in worlds:
        if w.get("world_kind") != "recall":
            continue
        cell = w.get("cell") or {}
        key = (model_of(w), variant_of(cell), str(cell.get("condition")))
        a = acc.setdefault(key, {"worlds": 0, "sizes": [], "found": 0, "expected": 0, "identical": 0,
                                 "retrievals": 0, "index": False, "correct": 0, "recalls": 0,
                                 "backend": cell.get("vector_backend", "memory"), "hnsw": cell.get("hnsw"),
                                 "distractors": 0})
        a["worlds"] += 1
        a["sizes"] += [r.get("memory_size") for r in w.get("retrievals") or []
                       if r.get("purpose", "recall") == "recall" and r.get("memory_size") is not None]
        a["distractors"] = max(a["distractors"], int((w.get("distractors") or {}).get("written") or 0))
        ir = w.get("index_recall")
        if ir:
            a["index"] = True
            a["hnsw"] = ir.get("hnsw") or a["hnsw"]  # the settings the index was built with (null in the cell: defaults)
            for name in ("found", "expected", "identical", "retrievals"):
                a[name] += int(ir.get(name) or 0)
        counts = recall_counts(w)
        a["correct"] += counts["n_correct"]
        a["recalls"] += counts["n_recalls"]
    rows = []
    for (m, v, c), a in sorted(acc.items()):
        rate = _rate(a["correct"], a["recalls"])
        recall_k = _rate(a["found"], a["expected"]) if a["index"] else None
        hnsw = a["hnsw"] if a["backend"] == "chroma" else None
        rows.append({
            "model": m, "variant": v, "condition": c, "worlds": a["worlds"], "backend": a["backend"],
            "hnsw": "" if not hnsw else " ".join(f"{k}={hnsw[k]}" for k in sorted(hnsw)),
            "distractors": a["distractors"],
            "memory size at recall": round(sum(a["sizes"]) / len(a["sizes"])) if a["sizes"] else None,
            "largest memory": max(a["sizes"]) if a["sizes"] else None,
            **{f"recall@k:{part}": (recall_k[part] if recall_k else ("" if part == "k/n" else None))
               for part in ("k/n", "rate", "low", "high")},
            "identical top k": (f"{a['identical']}/{a['retrievals']}" if a["index"] else ""),
            **{f"accuracy:{part}": rate[part] for part in ("k/n", "rate", "low", "high")}})
    columns = ["model", "variant", "condition", "worlds", "backend", "hnsw", "distractors", "memory size at recall",
               "largest memory", *(f"recall@k:{p}" for p in ("k/n", "rate", "low", "high")), "identical top k",
               *(f"accuracy:{p}" for p in ("k/n", "rate", "low", "high"))]
    out = pd.DataFrame(rows, columns=columns)
    if not any(a["index"] for a in acc.values()):  # no approximate index anywhere: nothing to measure
        out = out.drop(columns=[c for c in columns if c.startswith("recall@k") or c in ("hnsw", "identical top k")])
    if len(out):
        out.attrs["variant_shared"] = recall_frame_shared_variant(out)
    return out


def recall_frame_shared_variant(table: pd.DataFrame) -> str:
    """Lift the variant parts every row shares out of a table's ``variant`` column
    (as :func:`_lift_shared_variant` does for the recall frame); returns them."""
    rows = [v.split("; ") if v else [] for v in table["variant"]]
    shared = set.intersection(*(set(p) for p in rows)) if rows else set()
    table["variant"] = ["; ".join(p for p in parts if p not in shared) for parts in rows]
    return "; ".join(p for p in (rows[0] if rows else []) if p in shared)


def metric_tables(worlds: Iterable[dict[str, Any]], frame: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every table ``workbench metrics`` writes for a recall run set (``frame``: the
    worlds' recall frame when the caller has it already)."""
    from workbench.worlds.recall.invalidation import detection_table, separation_table

    worlds = list(worlds)
    f = recall_frame(worlds) if frame is None else frame.copy()
    return {
        "by_condition": accuracy_table(f, ["model", "variant", "condition"]),
        "by_mode_condition": accuracy_table(f, ["model", "variant", "failure_mode", "condition"]),
        "by_domain_mode_condition": accuracy_table(f, ["model", "variant", "domain", "failure_mode", "condition"]),
        "truth_top_ranked": accuracy_table(f, ["model", "variant", "failure_mode", "condition"], "top_entry_correct"),
        "differences": condition_differences(f),
        "judge_agreement": judge_agreement(f),
        "judge_disagreements": judge_disagreements(f),
        "given_values": given_values(f),
        "failed_recalls": failed_recalls(f),
        "memory": memory_table(worlds),
        "invalidation": detection_table(worlds, f),
        "separation": separation_table(worlds),
        "memory_size": memory_size_table(worlds),
        "worlds": world_frame(worlds),
        "recalls": f,
    }


def units(records: Any) -> Any:
    """The recall world's units for contrasts and comparisons: recalls, paired across
    cells by script, repetition and turn (world i of every cell plays the same script
    with the same agent draws)."""
    from workbench.metrics.contrasts import Units

    return Units(frame=recall_frame(records.worlds), pair_on=("script_id", "repetition", "turn"), metric="correct",
                 unit="recalls", seed="seed", references={"condition": "naive"},
                 metrics=("correct", "hedged", "correct_exact", "top_entry_correct"))


def _pct(k: int, n: int) -> str:
    if not n:
        return "—"
    low, high = wilson(k, n)
    return f"{k / n:5.1%} [{low:.0%},{high:.0%}] {k}/{n}"


def _cell_order(w: dict[str, Any]) -> tuple[Any, ...]:
    from workbench.worlds.recall.spec import CONDITIONS

    cond = w.get("cell", {}).get("condition")
    return (model_of(w), variant_of(w.get("cell", {})), CONDITIONS.index(cond) if cond in CONDITIONS else 99,
            str(w.get("cell_label")), w.get("world_index") or 0)


def summary_text(worlds: list[dict[str, Any]]) -> str:
    """The per-cell table ``workbench run`` prints: worlds, validity, recall accuracy
    over valid worlds with Wilson intervals, overall and per failure mode, and the
    recalls that hedged (stated the accepted value and a stale one: wrong). A cell is
    named by its label when the study gave one, else by model, condition and the
    settings that tell it from the other cells (those every cell shares are said
    once, below), so that no two rows read alike. A cell scored by a judge gets a
    line of judge-vs-exact agreement (its recalls only)."""
    f = recall_frame(worlds)
    lines = []
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for w in sorted(worlds, key=_cell_order):
        by_cell.setdefault(w["cell_id"], []).append(w)
    variants = dict(zip(f["cell_id"], f["variant"])) if not f.empty else {}
    labels = {}
    for cid, ws in by_cell.items():
        cell = ws[0].get("cell") or {}
        if cell.get("label"):
            labels[cid] = str(cell["label"])
        else:
            variant = variants.get(cid, variant_of(cell))
            labels[cid] = " · ".join(x for x in (model_of(ws[0]), str(cell.get("condition")), variant) if x)
    width = min(90, max([4, *(len(x) for x in labels.values())]))
    head = (f"{'cell':<{width}} {'worlds':>6} {'valid':>5}  {'accuracy':<26} {'hedged':>7}"
            + "".join(f" {m:<26}" for m in MODES))
    lines.append(head)
    for cid, ws in by_cell.items():
        label = labels[cid] if len(labels[cid]) <= width else labels[cid][: width - 1] + "…"
        g = f[(f["cell_id"] == cid) & f["valid"]] if not f.empty else f
        row = f"{label:<{width}} {len(ws):>6} {sum(bool(w['valid']) for w in ws):>5}  "
        row += f"{_pct(int(g['correct'].sum()), len(g)) if len(g) else '—':<26}"
        row += f" {f'{int(g.hedged.sum())}/{len(g)}' if len(g) else '—':>7}"
        for m in MODES:
            gm = g[g["failure_mode"] == m] if len(g) else g
            row += f" {_pct(int(gm['correct'].sum()), len(gm)) if len(gm) else '—':<26}"
        lines.append(row)
    shared = str(f.attrs.get("variant_shared") or "")
    if shared:
        lines.append(f"Same in every cell: {shared}.")
    judged = f[f["judge_verdict"].notna() & f["valid"]] if not f.empty else f
    for cid in [c for c in by_cell if c in set(judged["cell_id"])]:
        g = judged[judged["cell_id"] == cid]
        jv, ex = g["judge_verdict"].astype(bool), g["correct_exact"].astype(bool)
        yy, jn, ny, nn = int((jv & ex).sum()), int((jv & ~ex).sum()), int((~jv & ex).sum()), int((~jv & ~ex).sum())
        kappa = cohen_kappa(yy, jn, ny, nn)
        lines.append(f"Judge vs exact match, {labels[cid]}: agree on {yy + nn}/{len(g)} recalls (judge only right "
                     f"{jn}, exact only right {ny}), Cohen's kappa "
                     + ("undefined (one verdict throughout)" if kappa != kappa else f"{kappa:.2f}") + ".")
    lines.append("Accuracy: recalls of valid worlds, 95% Wilson intervals; no multiple-comparison correction. "
                 "Hedged: answers stating the accepted value and a stale one (counted wrong).")
    return "\n".join(lines)


def _short(text: Any, n: int = 90) -> str:
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def describe_world(world: dict[str, Any], steps: list[dict[str, Any]], out: TextIO, full: bool = False) -> None:
    """``workbench replay DIR --world ID``: the script, then every turn with what was
    written, retrieved and answered (with exact match's matched answer and partial
    score, the rule judge's reading, the outcome by today's rules (and the recorded
    verdict where that differs) and, for a failed recall, the value it gave)."""
    from workbench.worlds.recall.outcomes import given_value, rescore, world_statements

    s = world["script"]
    r = world["retrieval"]
    out.write(f"world {world['world_id']}  cell {world['cell_id']} ({world.get('cell_label', '')})  seed {world['seed']}\n")
    out.write(f"script {s['script_id']} ({s['domain']}, repetition {world.get('repetition')})  "
              f"condition {world['cell']['condition']}  valid {world['valid']}  failed {bool(world['failed'])}\n")
    if r["memory"]:
        out.write(f"memory: alpha {r['alpha']} beta {r['beta']} gamma {r['gamma']} k {r['k']} "
                  f"invalidation {r['invalidation']}"
                  + (f" (conflicts: {r.get('conflicts') or 'oracle'})" if r["invalidation"] else "")
                  + f" embedder {r['embedder']} authors shown {r['authors_shown']} "
                  f"namespaced {r['namespaced']}\n")
    else:
        out.write(f"memory: none ({world['cell']['condition']})\n")  # isolated or baseline, as the cell says
    for a in world["agents"]:
        out.write(f"  {a['agent']:<22} {a['route']:<26} authority {a['authority']}\n")
    writes: dict[int, list[dict[str, Any]]] = {}
    for e in world["memory_log"]:
        writes.setdefault(e["turn"], []).append(e)
    retr = {(x["turn"], x["agent"]): x for x in world["retrievals"] if x.get("purpose", "recall") == "recall"}
    conflicts = world.get("conflicts") or []
    recalls = {x["turn"]: x for x in world["recalls"]}
    statements = world_statements(world)
    for e in writes.get(0, []):
        out.write(f"  fact {e['fact_id']}: {_short(e['text'])} (authority {e['authority']})\n")
    out.write("--- turns ---\n")
    for t in world["turns"]:
        tag = "RECALL" if t["is_recall"] else ("write " if t["write_to_memory"] else "      ")
        out.write(f"{t['turn']:>3} {t['role']:<20} {tag}")
        if not t["is_recall"]:
            out.write(f" reply: {_short(t['reply'], 60)}\n")
        for e in writes.get(t["turn"], []):
            state = "refused" if e["refused"] else f"entry {e['entry']['entry_id']}"
            out.write(f"      memory += {_short(e['text'], 70)} ({state})\n")
            for x in e["removed"]:
                out.write(f"      invalidated entry {x['entry_id']} by {x['author_role']}: {_short(x['text'], 60)}\n")
            for i in e.get("conflicts") or []:
                c = conflicts[i] if isinstance(i, int) and i < len(conflicts) else {}
                out.write(f"      conflict {c.get('type')}: {c.get('action')} (new {(c.get('new') or {}).get('value')}, "
                          f"old {(c.get('old') or {}).get('value')} by {(c.get('old') or {}).get('author_role')})\n")
        if t["is_recall"]:
            rc = recalls.get(t["turn"], {})
            rt = retr.get((t["turn"], t["role"]))
            out.write(f" [{rc.get('failure_mode')}] {_short(rc.get('query'), 60)}\n")
            if rt is not None:
                for h in rt["hits"]:
                    out.write(f"      #{h['rank']} {h['score']:.3f} (sim {h['similarity']:.3f}) {h['author_role']:<18} "
                              f"{_short(h['text'], 60)}\n")
            out.write(f"      own turns in context: {rc.get('context', {}).get('own_turns')}\n")
            verdict = rc.get("judge")
            scores = recall_scores(rc) if rc else {}
            scored = rescore(world, rc, statements) if rc else None
            correct = scored.correct if scored else rc.get("correct")
            out.write(f"      answer: {_short(rc.get('answer'), 70)}  expected {rc.get('ground_truth')}  "
                      f"correct {correct}" + (f" (judge {verdict['verdict']})" if verdict else "")
                      + (f" (recorded {rc.get('correct')})" if rc and bool(rc.get("correct")) != correct else "")
                      + (f"  matched {scores['matched']!r} partial {scores['partial_score']}  rule judge "
                         f"{scores['rule_reason']}" if scores else "") + "\n")
            if rc and scored and not scored.correct:
                g = given_value(world, rc, statements, scored)
                out.write(f"      value given: {g['kind']}" + (f" ({g['value']})" if g["value"] else "")
                          + (f", said before by {', '.join(g['said_by'])}" if g["said_by"] else "") + "\n")
    if full:
        for st in steps:
            out.write(f"--- step {st['seq']} {st['agent']} turn {st['turn']} {st['purpose']} ---\n"
                      f"{st['request']['prompt']}\n>>> {st['reply'].get('text') or st['reply'].get('error')}\n")
    m = world.get("metrics") or {}
    if m:
        out.write(f"--- metrics --- recalls {m.get('n_recalls')} correct {m.get('n_correct')} "
                  f"retrievals {m.get('n_retrievals')} removed {m.get('n_removed')}\n")
