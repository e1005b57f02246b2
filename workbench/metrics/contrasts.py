"""Matched contrasts: comparisons between cells that differ in one factor alone.

A study may declare its contrasts (``contrasts:`` in the params file); when it
declares none, every factor that varies gives one, between cells identical in
every other factor. Each row reports both rates (k/n over valid units), the
Newcombe difference B − A, and for units paired across the two cells (world
``i`` of every cell plays the same seed) the exact McNemar p with the number of
pairs and the pairs lost to attrition. No multiple-comparison correction is
applied unless asked for (``holm=True`` adds a Holm-adjusted column beside the
raw p values); tables say which.

The same machinery compares two run sets: :func:`compare_run_sets` matches
cells on their factors (optionally ignoring or mapping the fields that are the
implementation difference under test) and lists every cell it could not match.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from workbench.errors import UnknownNameError
from workbench.metrics.design import UNSET, Design, in_group, level_text
from workbench.stats import holm_adjust, mcnemar_paired, newcombe, wilson

DIFF = "difference (B−A)"  # the column name views.forest.forest_figure reads
P = "p (exact McNemar)"
P_HOLM = "p (Holm)"
NO_CORRECTION = "no multiple-comparison correction"


@dataclass(frozen=True)
class Units:
    """What a world kind's contrasts count: one row per unit (world, recall,
    trajectory) with ``cell_id``, ``valid``, boolean metric columns, and the
    columns that pair a unit of one cell with its twin in another (``pair_on``).
    ``seed`` names the column that must also agree for a pair to count (two run
    sets with other base seeds are not paired). ``references`` are the levels a
    kind compares against by default (the no-store control, the naive memory)."""

    frame: pd.DataFrame
    pair_on: tuple[str, ...]
    metric: str
    unit: str = "worlds"
    seed: str | None = "seed"
    references: Mapping[str, str] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContrastSpec:
    """A declared (or derived) contrast: ``factor`` compared at ``levels`` (the
    first is the reference A; every other level is a B against it). No levels:
    every level against the kind's reference level, else the first in run order."""

    name: str
    factor: str
    levels: tuple[str, ...] | None = None
    declared: bool = True
    metric: str | None = None  # the outcome compared, where not the kind's headline metric

    @classmethod
    def from_mapping(cls, body: Mapping[str, Any]) -> ContrastSpec:
        levels = body.get("levels")
        return cls(name=str(body.get("name") or body["factor"]), factor=str(body["factor"]),
                   levels=tuple(level_text(v) for v in levels) if levels else None,
                   metric=str(body["metric"]) if body.get("metric") else None)


@dataclass(frozen=True)
class Estimability:
    """When a contrast's difference is estimable: each arm has at least ``min_valid`` valid
    units and at least ``min_valid_share`` of its units valid. An arm with 1 valid world of
    50 gives an interval, but one that describes the survivors of attrition, not the cell.
    Set by a study (``estimability:``) and shown under every contrast table."""

    min_valid: int = 10
    min_valid_share: float = 0.5

    @classmethod
    def of(cls, records: Any) -> Estimability:
        """The rule a run set's study set (its manifest), else the default."""
        body = (getattr(records, "manifest", None) or {}).get("estimability") or {}
        return cls(**{k: body[k] for k in ("min_valid", "min_valid_share") if k in body})

    def holds(self, valid: int, total: int) -> bool:
        return total > 0 and valid >= self.min_valid and valid >= self.min_valid_share * total

    def text(self, unit: str = "worlds") -> str:
        return (f"estimable: each arm has at least {self.min_valid} valid {unit} and at least "
                f"{self.min_valid_share:.0%} of its {unit} valid")


def default_contrasts(design: Design) -> list[ContrastSpec]:
    """One contrast per factor that varies across the run set."""
    return [ContrastSpec(name=f, factor=f, declared=False) for f in design.varying]


def contrasts_for(records: Any, design: Design) -> list[ContrastSpec]:
    """The contrasts the study declared (recorded in the manifest), else the defaults."""
    declared = (getattr(records, "manifest", None) or {}).get("contrasts") or []
    return [ContrastSpec.from_mapping(c) for c in declared] or default_contrasts(design)


def matched_pairs(design: Design, spec: ContrastSpec, references: Mapping[str, str] | None = None
                  ) -> list[tuple[str, str]]:
    """(A cell, B cell) for every pair of cells that differ in ``spec.factor`` and in
    nothing else, A at the reference level."""
    cols = design.group(spec.factor)
    if not cols:
        return []
    others = [f for f in design.factors if f not in cols]
    groups: dict[tuple[str, ...], list[str]] = {}
    for cid in design.cells:
        groups.setdefault(tuple(str(design.frame.at[cid, f]) for f in others), []).append(cid)
    out: list[tuple[str, str]] = []
    for cells in groups.values():
        by_level: dict[str, list[str]] = {}
        for cid in cells:
            by_level.setdefault(design.level(cid, spec.factor), []).append(cid)
        if len(by_level) < 2:
            continue
        if spec.levels:
            ref, rest = spec.levels[0], [lv for lv in spec.levels[1:]]
        else:
            pref = (references or {}).get(spec.factor)
            ref = pref if pref in by_level else next(iter(by_level))
            rest = [lv for lv in by_level if lv != ref]
        for a in by_level.get(ref, []):
            for lv in rest:
                out.extend((a, b) for b in by_level.get(lv, []))
    return out


def rate(units: pd.DataFrame, metric: str) -> tuple[int, int]:
    """k/n of a boolean metric over the valid units of a frame."""
    v = units[units["valid"].astype(bool)] if len(units) else units
    return (int(v[metric].astype(bool).sum()), len(v)) if len(v) else (0, 0)


def paired_test(a: pd.DataFrame, b: pd.DataFrame, metric: str, pair_on: Sequence[str],
                seed: str | None = "seed") -> dict[str, Any]:
    """Exact McNemar over the units present and valid in both cells with the same
    pair keys (and the same seed). A key present in both cells, with the same seed, where
    either unit is invalid is a *lost* pair (lost to attrition); a key whose seeds differ,
    or present in one cell only, was never a pair: *unpaired*."""
    keys = [k for k in pair_on if k in a.columns and k in b.columns]
    empty = {"pairs": 0, "only A": 0, "only B": 0, P: float("nan"), "lost pairs": 0, "unpaired": 0,
             "lost pair keys": ""}
    if not keys or not len(a) or not len(b):
        return {**empty, "unpaired": len(a) + len(b)}
    cols = [*keys, "valid", metric] + ([seed] if seed and seed in a.columns and seed in b.columns else [])
    m = a[cols].merge(b[cols], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m["_merge"] == "both"
    if len(cols) > len(keys) + 2:
        both &= m[f"{seed}_a"] == m[f"{seed}_b"]
    ok = both & m["valid_a"].fillna(False).astype(bool) & m["valid_b"].fillna(False).astype(bool)
    pairs = m[ok]
    lost = m[both & ~ok]
    test = mcnemar_paired(list(pairs[f"{metric}_a"].astype(bool)), list(pairs[f"{metric}_b"].astype(bool)))
    lost_keys = [" ".join(str(r[k]) for k in keys) for _, r in lost.head(12).iterrows()]
    return {"pairs": len(pairs), "only A": int(test["only_a"]), "only B": int(test["only_b"]),
            P: float(test["pvalue"]) if len(pairs) else float("nan"), "lost pairs": len(lost),
            "unpaired": int((~both).sum()), "lost pair keys": ", ".join(lost_keys) + (" …" if len(lost) > len(lost_keys) else "")}


def _compare_cells(ua: pd.DataFrame, ub: pd.DataFrame, metric: str, units: Units,
                   rule: Estimability) -> dict[str, Any]:
    ka, na = rate(ua, metric)
    kb, nb = rate(ub, metric)
    d, low, high = newcombe(kb, nb, ka, na)
    la, ha = wilson(ka, na)
    lb, hb = wilson(kb, nb)
    return {"A k/n": f"{ka}/{na}", "B k/n": f"{kb}/{nb}", "A rate": ka / na if na else float("nan"),
            "B rate": kb / nb if nb else float("nan"), "A low": la, "A high": ha, "B low": lb, "B high": hb,
            DIFF: d, "low": low, "high": high,
            "estimable": not math.isnan(d) and rule.holds(na, len(ua)) and rule.holds(nb, len(ub)),
            **paired_test(ua, ub, metric, units.pair_on, units.seed)}


CONTRAST_COLUMNS = ["contrast", "metric", "factor", "A", "B", "comparison", "A cell", "B cell", "held fixed", "A k/n",
                    "B k/n", "A rate", "B rate", "A low", "A high", "B low", "B high", DIFF, "low", "high",
                    "estimable", "pairs", "only A", "only B", P, "lost pairs", "unpaired", "lost pair keys"]


def contrast_table(units: Units, design: Design, specs: Iterable[ContrastSpec] | None = None,
                   metric: str | None = None, holm: bool = False, rule: Estimability | None = None) -> pd.DataFrame:
    """One row per matched pair of cells per contrast, for ``metric`` (the kind's
    headline metric by default). ``attrs`` carry the title, the metric, the unit
    and the correction used."""
    metric = metric or units.metric
    specs = list(specs) if specs is not None else default_contrasts(design)
    frame = units.frame
    rows = []
    for spec in specs:
        own = spec.metric or metric
        if own not in frame.columns and len(frame):
            raise UnknownNameError(f"contrast {spec.name!r}: metric {own!r} is not recorded; expected one of "
                                   f"{sorted(units.metrics or [])}")
        for a, b in matched_pairs(design, spec, units.references):
            la, lb = design.level(a, spec.factor), design.level(b, spec.factor)
            held = design.describe_varying(a, exclude=[spec.factor])
            others_vary = any(f not in design.group(spec.factor) for f in design.varying)
            rows.append({"contrast": spec.name, "metric": own, "factor": spec.factor, "A": la, "B": lb,
                         "comparison": f"{spec.factor}: {lb} vs {la}" + (f" · {held}" if others_vary else ""),
                         "A cell": a, "B cell": b, "held fixed": held,
                         **_compare_cells(frame[frame["cell_id"] == a], frame[frame["cell_id"] == b], own, units,
                                          rule or Estimability())})
    out = pd.DataFrame(rows, columns=CONTRAST_COLUMNS)
    if holm and len(out):
        out[P_HOLM] = holm_adjust(out[P].tolist())
    declared = any(s.declared for s in specs)
    origin = "declared by the study" if declared else "derived: each varying factor, between cells identical in every other factor"
    others = sorted({s.metric for s in specs if s.metric and s.metric != metric})
    named = f"{metric}" + (f" (and {', '.join(others)} where a row's metric says so)" if others else "")
    out.attrs = {"title": f"Matched contrasts in {named} ({origin}); "
                          f"k/n over valid {units.unit}; Newcombe 95% intervals; exact McNemar over {units.unit} paired by "
                          f"{', '.join(units.pair_on)}; " + ("Holm-adjusted p beside the raw p" if holm else NO_CORRECTION)
                          + f"; {(rule or Estimability()).text(units.unit)}",
                 "metric": metric, "unit": units.unit, "constant": design.constant,
                 "empty_reason": _empty_reason(design, specs), "brief": BRIEF}
    return out


# what a report shows of a contrast row (the CSV keeps every column)
BRIEF = ["contrast", "A", "B", "held fixed", "A k/n", "B k/n", DIFF, "low", "high", "pairs", "only A", "only B", P,
         P_HOLM, "lost pairs", "unpaired", "lost pair keys"]


def _empty_reason(design: Design, specs: Sequence[ContrastSpec]) -> str:
    if len(design.cells) < 2:
        return "the run set has one cell: there is nothing to contrast"
    if not specs:
        return "no factor varies across the run set's cells"
    return ("no two cells differ in exactly the contrasted factor "
            f"({', '.join(s.factor for s in specs)}) and nothing else")


# -- two run sets ------------------------------------------------------------------------
@dataclass(frozen=True)
class CellMatch:
    a: str | None
    b: str | None
    status: str  # matched | only in A | only in B | ambiguous
    reason: str = ""


def _signature(design: Design, cid: str, factors: Sequence[str], maps: Mapping[str, Mapping[str, str]] | None
               ) -> tuple[str, ...]:
    out = []
    for f in factors:
        v = str(design.frame.at[cid, f]) if f in design.frame.columns else UNSET
        if maps and f in maps:
            v = maps[f].get(v, v)
        out.append(v)
    return tuple(out)


def match_cells(da: Design, db: Design, ignore: Iterable[str] = (),
                maps: Mapping[str, Mapping[str, str]] | None = None) -> list[CellMatch]:
    """Cells of A and B with the same level of every factor but the ignored ones
    (A's levels translated by ``maps``: field → {A level: B level})."""
    ignore = list(ignore)
    factors = [f for f in dict.fromkeys([*da.factors, *db.factors]) if not any(in_group(f, i) for i in ignore)]
    sig_b: dict[tuple[str, ...], list[str]] = {}
    for cid in db.cells:
        sig_b.setdefault(_signature(db, cid, factors, None), []).append(cid)
    out: list[CellMatch] = []
    used: set[str] = set()
    for cid in da.cells:
        sig = _signature(da, cid, factors, maps)
        hits = sig_b.get(sig, [])
        if len(hits) == 1:
            out.append(CellMatch(cid, hits[0], "matched"))
            used.add(hits[0])
        elif hits:
            out.append(CellMatch(cid, None, "ambiguous", f"matches {len(hits)} cells of B ({', '.join(hits)}); "
                                                          "they differ only in ignored fields"))
        else:
            out.append(CellMatch(cid, None, "only in A", _nearest(sig, db, factors, sig_b)))
    sig_a: dict[tuple[str, ...], list[str]] = {}
    for c in da.cells:
        sig_a.setdefault(_signature(da, c, factors, maps), []).append(c)
    for cid in db.cells:
        if cid not in used and not any(m.status == "ambiguous" and cid in m.reason for m in out):
            sig = _signature(db, cid, factors, None)
            out.append(CellMatch(None, cid, "only in B", _nearest(sig, da, factors, sig_a)))
    return out


def _nearest(sig: tuple[str, ...], other: Design, factors: Sequence[str],
             sigs: Mapping[tuple[str, ...], list[str]]) -> str:
    if not sigs:
        return "the other run set has no cells"
    best = min(sigs, key=lambda s: sum(x != y for x, y in zip(sig, s)))
    diffs = [f"{f} ({x} vs {y})" for f, x, y in zip(factors, sig, best) if x != y]
    return f"nearest cell {sigs[best][0]} differs in {', '.join(diffs)}"


COMPARE_COLUMNS = ["status", "A cell", "B cell", "cell", "A k/n", "B k/n", "A rate", "B rate", DIFF, "low", "high",
                   "estimable", "pairs", "only A", "only B", P, "lost pairs", "unpaired", "lost pair keys", "reason"]


def compare_run_sets(ua: Units, da: Design, ub: Units, db: Design, metric: str | None = None,
                     ignore: Iterable[str] = (), maps: Mapping[str, Mapping[str, str]] | None = None,
                     names: tuple[str, str] = ("A", "B"), holm: bool = False,
                     rule: Estimability | None = None) -> pd.DataFrame:
    """Cell by cell, B − A over matched cells (Newcombe), with exact McNemar where
    the units pair (same pair keys and seeds); unmatched cells listed with why."""
    metric = metric or ua.metric
    for units, name in ((ua, names[0]), (ub, names[1])):
        if metric not in units.frame.columns and len(units.frame):
            raise UnknownNameError(f"metric {metric!r} is not recorded for run set {name}; "
                           f"expected one of {sorted(units.metrics or [])}")
    rows = []
    for m in match_cells(da, db, ignore, maps):
        row: dict[str, Any] = {"status": m.status, "A cell": m.a or "—", "B cell": m.b or "—",
                               "cell": da.label(m.a) if m.a else db.label(m.b or ""), "reason": m.reason}
        if m.a and m.b:
            row.update(_compare_cells(ua.frame[ua.frame["cell_id"] == m.a], ub.frame[ub.frame["cell_id"] == m.b],
                                      metric, ua, rule or Estimability()))
        rows.append(row)
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    if holm and len(out):
        out[P_HOLM] = holm_adjust(out[P].tolist())
    ignored = ", ".join(ignore) or "none"
    mapped = "; ".join(f"{f}: " + ", ".join(f"{o}→{n}" for o, n in mm.items()) for f, mm in (maps or {}).items())
    out.attrs = {"title": f"{names[1]} − {names[0]} in {metric}, cells matched on every factor "
                          f"(ignored: {ignored}{'; mapped: ' + mapped if mapped else ''}); k/n over valid {ua.unit}; "
                          f"Newcombe 95% intervals; exact McNemar where {ua.unit} pair by {', '.join(ua.pair_on)} "
                          f"and seed; " + ("Holm-adjusted p beside the raw p" if holm else NO_CORRECTION)
                          + f"; {(rule or Estimability()).text(ua.unit)}",
                 "metric": metric, "unit": ua.unit}
    return out
