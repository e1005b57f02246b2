"""Invalidation metrics of the recall world, from records alone (issue 42, parts 1 and 5).

- :func:`detection_table`: per cell with invalidation, the conflict detector's precision
  and recall against the script's fact ids, and the accuracy the cell reached. A world
  records every pair its detector said conflicts or the script says does (``detections``:
  answer and truth), and per write how many pairs it examined (``pairs_examined``), so:
  true positives = answer and truth, false positives = answer and not truth, missed =
  truth and no answer; precision = TP / (TP + FP), recall = TP / (TP + missed), each with
  a 95 % Wilson interval. The pairs are those a write met in memory *as it was* under
  that detector (what earlier decisions left live), so two detectors are scored on
  slightly different pair sets; the truth is the oracle's rule applied to the ids and
  recorded values (:func:`workbench.worlds.recall.conflicts.truth`).
- :func:`separation_table` and :func:`separation_summary`: the similarity the cell's
  embedder gives between the stale and current statements of each recalled fact, per
  script (the world's ``separation`` rows, :mod:`workbench.worlds.recall.separation`).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from workbench.stats import wilson

if TYPE_CHECKING:
    import pandas as pd

DETECTION_COLUMNS = ["model", "variant", "condition", "detector", "embedder", "worlds", "pairs examined",
                     "conflicts (ids)", "detected", "true positives", "false positives", "missed",
                     "precision:k/n", "precision:rate", "precision:low", "precision:high",
                     "recall:k/n", "recall:rate", "recall:low", "recall:high", "removed", "refused",
                     "accuracy:k/n", "accuracy:rate", "accuracy:low", "accuracy:high",
                     "anchoring:k/n", "anchoring:rate", "anchoring:low", "anchoring:high"]


def _rate(prefix: str, k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {f"{prefix}:k/n": f"{k}/{n}", f"{prefix}:rate": (k / n) if n else float("nan"), f"{prefix}:low": low,
            f"{prefix}:high": high}


def detection_counts(world: dict[str, Any]) -> dict[str, int]:
    """A world's detector decisions against the ids: pairs examined, true positives, false
    positives, missed; entries removed and newcomers refused."""
    d = world.get("detections") or []
    return {"pairs": sum(int(e.get("pairs_examined") or 0) for e in world.get("memory_log") or []),
            "tp": sum(1 for x in d if x.get("answer") and x.get("truth")),
            "fp": sum(1 for x in d if x.get("answer") and not x.get("truth")),
            "fn": sum(1 for x in d if not x.get("answer") and x.get("truth")),
            "removed": sum(len(e.get("removed") or []) for e in world.get("memory_log") or []),
            "refused": sum(bool(e.get("refused")) for e in world.get("memory_log") or [])}


def detection_table(worlds: Iterable[dict[str, Any]], frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell whose worlds ran invalidation (valid worlds): the detector (``oracle``
    for records from before detectors, which recorded no decisions: their counts are
    blank), its precision and recall against the ids, removals and refusals, and the
    cell's accuracy over all recalls and over memory-anchoring recalls (``frame``: the
    recall frame of the same worlds, re-scored)."""
    import pandas as pd

    models = dict(zip(frame["cell_id"], frame["model"])) if len(frame) else {}
    acc: dict[str, dict[str, Any]] = {}
    for w in worlds:
        if w.get("world_kind") != "recall" or not (w.get("retrieval") or {}).get("invalidation") or not w.get("valid"):
            continue
        a = acc.setdefault(w["cell_id"], {"worlds": 0, "recorded": "detections" in w,
                                          "model": models.get(w["cell_id"], (w.get("cell") or {}).get("model")),
                                          "detector": (w.get("retrieval") or {}).get("conflicts", "oracle"),
                                          "embedder": (w.get("retrieval") or {}).get("embedder"),
                                          "condition": (w.get("cell") or {}).get("condition"),
                                          **{k: 0 for k in ("pairs", "tp", "fp", "fn", "removed", "refused")}})
        a["worlds"] += 1
        for k, n in detection_counts(w).items():
            a[k] += n
    variants = dict(zip(frame["cell_id"], frame["variant"])) if len(frame) else {}
    rows = []
    for cid, a in acc.items():
        g = frame[(frame["cell_id"] == cid) & frame["valid"]] if len(frame) else frame
        anch = g[g["failure_mode"] == "memory_anchoring"] if len(g) else g
        row: dict[str, Any] = {"model": a["model"], "variant": variants.get(cid, ""), "condition": a["condition"],
                               "detector": a["detector"], "embedder": a["embedder"], "worlds": a["worlds"]}
        if a["recorded"]:
            row.update({"pairs examined": a["pairs"], "conflicts (ids)": a["tp"] + a["fn"],
                        "detected": a["tp"] + a["fp"], "true positives": a["tp"], "false positives": a["fp"],
                        "missed": a["fn"], **_rate("precision", a["tp"], a["tp"] + a["fp"]),
                        **_rate("recall", a["tp"], a["tp"] + a["fn"])})
        row.update({"removed": a["removed"], "refused": a["refused"],
                    **_rate("accuracy", int(g["correct"].sum()) if len(g) else 0, len(g)),
                    **_rate("anchoring", int(anch["correct"].sum()) if len(anch) else 0, len(anch))})
        rows.append(row)
    order = {d: i for i, d in enumerate(("oracle", "lexical", "embedding", "judge"))}
    rows.sort(key=lambda r: (r["model"], str(r["embedder"]), order.get(r["detector"], 9), r["variant"]))
    return pd.DataFrame(rows, columns=DETECTION_COLUMNS)


DETECTOR_CONTRAST_COLUMNS = ["contrast", "held fixed", "A", "B", "A k/n", "B k/n", "difference (B−A)", "low", "high",
                             "pairs", "only A", "only B", "p (exact McNemar)"]


def detector_contrasts(records: Any, units: Any) -> pd.DataFrame:
    """Each detector against the oracle's ids: accuracy over recalls paired by script,
    repetition and turn (``units``: the kind's, :func:`workbench.worlds.recall.metrics.units`),
    between cells that differ in ``conflicts`` alone (Newcombe 95 % interval, exact
    McNemar); empty when no run set has the oracle beside another."""
    import pandas as pd

    from workbench.metrics.contrasts import ContrastSpec, Estimability, contrast_table
    from workbench.metrics.design import design_of_records

    present = {(w.get("retrieval") or {}).get("conflicts") for w in records.worlds}
    others = [d for d in ("lexical", "embedding", "judge") if d in present]
    if "oracle" not in present or not others:
        return pd.DataFrame(columns=DETECTOR_CONTRAST_COLUMNS)
    specs = [ContrastSpec(name=f"{d} vs oracle ids", factor="conflicts", levels=("oracle", d)) for d in others]
    t = contrast_table(units, design_of_records(records), specs, rule=Estimability.of(records))
    return t[[c for c in DETECTOR_CONTRAST_COLUMNS if c in t.columns]].reset_index(drop=True)


# -- what the embedder can tell apart -------------------------------------------------------
SEPARATION_COLUMNS = ["embedder", "script_id", "domain", "recall turn", "failure_mode", "fact", "stale turn",
                      "stale statement", "current turn", "current statement", "similarity", "query · stale",
                      "query · current"]


def _texts(world: dict[str, Any]) -> dict[int, str]:
    return {int(t["turn"]): str(t["content"]) for t in world.get("turns") or []}


def _said(facts: dict[str, str], turns: dict[int, str], fact: Any, turn: Any) -> str:
    """A statement's text: the case-file fact at turn 0, else the turn's content."""
    return facts.get(fact, "") if turn == 0 else turns.get(int(turn), "")


def separation_table(worlds: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Per embedder and script: each (stale, current) statement pair of a recalled fact with
    the embedder's cosine between them and each one's cosine to the recall query; read from
    the worlds' ``separation`` rows (one script and embedder once, whatever the cell)."""
    import pandas as pd

    seen: set[tuple[Any, ...]] = set()
    rows = []
    for w in worlds:
        if w.get("world_kind") != "recall" or not w.get("separation"):
            continue
        s = w.get("script") or {}
        facts = {f["id"]: f["text"] for f in s.get("initial_facts") or []}
        turns = _texts(w)
        for r in w["separation"]:
            key = (r.get("embedder"), s.get("script_id"), r.get("recall_turn"), r.get("stale_turn"),
                   r.get("current_turn"))
            if key in seen:
                continue
            seen.add(key)
            rows.append({"embedder": r.get("embedder"), "script_id": s.get("script_id"), "domain": s.get("domain"),
                         "recall turn": r.get("recall_turn"), "failure_mode": r.get("failure_mode"),
                         "fact": r.get("fact_id"), "stale turn": r.get("stale_turn"),
                         "stale statement": _said(facts, turns, r.get("fact_id"), r.get("stale_turn")),
                         "current turn": r.get("current_turn"),
                         "current statement": _said(facts, turns, r.get("fact_id"), r.get("current_turn")),
                         "similarity": r.get("similarity"),
                         "query · stale": r.get("query_stale"), "query · current": r.get("query_current")})
    out = pd.DataFrame(rows, columns=SEPARATION_COLUMNS)
    return out.sort_values(["embedder", "script_id", "recall turn", "stale turn", "current turn"],
                           kind="stable").reset_index(drop=True) if len(out) else out


def separation_summary(table: pd.DataFrame, threshold: float = 0.8) -> pd.DataFrame:
    """Per embedder: the pairs, their median, lowest and highest similarity, how many sit at
    or above ``threshold`` (the default conflict_similarity), and how many recall queries
    are nearer the stale statement than the current one (similarity alone would rank the
    stale one first)."""
    import pandas as pd

    cols = ["embedder", "scripts", "pairs", "median similarity", "lowest", "highest", f"at or above {threshold}",
            "query nearer stale"]
    rows = []
    for name, g in table.groupby("embedder", sort=True):
        n = len(g)
        rows.append({"embedder": name, "scripts": g["script_id"].nunique(), "pairs": n,
                     "median similarity": float(g["similarity"].median()), "lowest": float(g["similarity"].min()),
                     "highest": float(g["similarity"].max()),
                     f"at or above {threshold}": f"{int((g['similarity'] >= threshold).sum())}/{n}",
                     "query nearer stale": f"{int((g['query · stale'] > g['query · current']).sum())}/{n}"})
    return pd.DataFrame(rows, columns=cols)


__all__ = ["DETECTION_COLUMNS", "SEPARATION_COLUMNS", "detection_counts", "detection_table", "detector_contrasts",
           "separation_summary", "separation_table"]
