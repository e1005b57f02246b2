"""What the viewer shows, as plain data: the run sets, one index row per world,
usage per cell, the text each world is searched by, and the matched-cell
comparison of several run sets. Pure functions of the records (no HTML here)."""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.kinds import WorldKind, kind_of_records
from workbench.metrics.design import Design, design_of, design_of_records
from workbench.records import RunRecords, json_text, load_run

SEARCH_CHARS = 5_000  # at most this much text per world is searchable (replies first, then stored values, messages)
SEARCH_KEYS = frozenset({"value", "text", "content", "answer", "message", "reply", "reasoning", "query"})
SKIP_METRICS = frozenset({"world_id", "cell_id", "seed", "cell_label", "run"})
MAX_TEXT = 80  # a metric shown in the index is a number, a flag or a short text


@dataclass
class RunSet:
    """One run directory as the viewer holds it."""

    key: str  # "r0", "r1", ...: the folder its world pages are written under
    name: str  # what the page calls it (the directory's name, made unique)
    records: RunRecords
    kind: WorldKind
    design: Design = field(init=False)

    def __post_init__(self) -> None:
        self.design = design_of_records(self.records)

    @property
    def study(self) -> str:
        return str((self.records.manifest or {}).get("study") or
                   next((w.get("study") for w in self.records.worlds if w.get("study")), "") or "")


def load_run_sets(dirs: Sequence[str | Path]) -> list[RunSet]:
    """Every run directory given, in order (a name used twice gets its position added)."""
    out: list[RunSet] = []
    names: set[str] = set()
    for i, d in enumerate(dirs):
        records = load_run(d)
        name = Path(d).resolve().name or f"run{i}"
        if name in names:
            name = f"{name} ({i + 1})"
        names.add(name)
        out.append(RunSet(f"r{i}", name, records, kind_of_records(records)))
    return out


# -- usage -----------------------------------------------------------------------------------
def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(v) else v


def call_rows(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per model call a world's steps record (a step's ``reply``): tokens, cost, latency,
    retries (``attempts`` lists the failed tries before the one kept) and whether it ended in an error."""
    rows = []
    for s in steps:
        r = s.get("reply")
        if not isinstance(r, dict):
            continue
        usage = r.get("usage") or {}
        rows.append({"prompt_tokens": _num(usage.get("prompt_tokens")),
                     "completion_tokens": _num(usage.get("completion_tokens")),
                     "cost_usd": _num(r.get("cost_usd")), "latency_s": _num(r.get("latency_s")),
                     "retries": len(r.get("attempts") or []), "error": bool(r.get("error"))})
    return rows


def world_usage(steps: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A world's calls, tokens, cost, latency (median and max per call), retries and errored calls."""
    rows = call_rows(steps)
    lat = [r["latency_s"] for r in rows]
    return {"calls": len(rows),
            "tokens": int(sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows)),
            "cost_usd": round(sum(r["cost_usd"] for r in rows), 6),
            "latency_median_s": round(statistics.median(lat), 3) if lat else None,
            "latency_max_s": round(max(lat), 3) if lat else None,
            "retries": sum(r["retries"] for r in rows), "errors": sum(r["error"] for r in rows)}


def cell_usage(run_sets: Sequence[RunSet]) -> pd.DataFrame:
    """Per run set and cell: worlds (valid, failed), calls, tokens (total and per world), cost, latency per
    call (median and 95th percentile), retries and calls that ended in an error."""
    rows = []
    for rs in run_sets:
        by_cell: dict[str, list[dict[str, Any]]] = {}
        for w in rs.records.worlds:
            by_cell.setdefault(str(w["cell_id"]), []).append(w)
        for cid in [c for c in rs.design.cells if c in by_cell]:
            worlds = by_cell[cid]
            each = [call_rows(rs.records.steps.get(w["world_id"], [])) for w in worlds]
            calls = [c for rows in each for c in rows]
            lat = pd.Series([c["latency_s"] for c in calls], dtype=float)
            per_world = pd.Series([sum(c["prompt_tokens"] + c["completion_tokens"] for c in rows) for rows in each],
                                  dtype=float)
            row = {"run set": rs.name, "cell_id": cid, "cell": rs.design.label(cid), "worlds": len(worlds),
                   "valid": sum(bool(w.get("valid")) for w in worlds), "failed": sum(bool(w.get("failed")) for w in worlds),
                   "calls": len(calls), "prompt tokens": int(sum(c["prompt_tokens"] for c in calls)),
                   "completion tokens": int(sum(c["completion_tokens"] for c in calls)),
                   "tokens per world (median)": float(per_world.median()) if len(per_world) else None,
                   "cost (USD)": round(sum(c["cost_usd"] for c in calls), 6),
                   "latency median (s)": round(float(lat.median()), 3) if len(lat) else None,
                   "latency p95 (s)": round(float(lat.quantile(0.95)), 3) if len(lat) else None,
                   "retries": sum(c["retries"] for c in calls),
                   "calls retried": sum(c["retries"] > 0 for c in calls),
                   "errors": sum(c["error"] for c in calls)}
            rows.append(row)
    out = pd.DataFrame(rows)
    if len(run_sets) < 2 and len(out):
        out = out.drop(columns=["run set"])
    return out


# -- the index -------------------------------------------------------------------------------
def _scalar(v: Any) -> Any:
    """A value the index can show in one cell, or ``...`` (a sentinel) when it is not one."""
    if v is None or isinstance(v, bool | int):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 6)
    if isinstance(v, str) and len(v) <= MAX_TEXT:
        return v
    return ...


def combined_design(run_sets: Sequence[RunSet]) -> Design:
    return design_of([w for rs in run_sets for w in rs.records.worlds],
                     order=[c for rs in run_sets for c in rs.design.cells])


@dataclass
class Index:
    """The world index: typed columns and one row of values per world (JSON-ready),
    with the run set key and world id of each row, and the factors that never vary."""

    columns: list[dict[str, str]]
    rows: list[list[Any]]
    worlds: list[tuple[str, str]]  # (run set key, world id) per row
    constant: dict[str, str]


def build_index(run_sets: Sequence[RunSet]) -> Index:
    design = combined_design(run_sets)
    factors = design.varying
    metric_names: list[str] = []
    seen: set[str] = set()
    for rs in run_sets:
        for w in rs.records.worlds:
            for k, v in (w.get("metrics") or {}).items():
                if k not in seen and k not in SKIP_METRICS and _scalar(v) is not ...:
                    seen.add(k)
                    metric_names.append(k)
    usage_names = ["calls", "tokens", "cost_usd", "latency_median_s", "latency_max_s", "retries", "errors"]
    columns: list[dict[str, str]] = []
    if len(run_sets) > 1:
        columns.append({"name": "run set", "group": "world", "type": "text"})
    columns += [{"name": "world", "group": "world", "type": "text"},
                {"name": "cell", "group": "world", "type": "text"}]
    columns += [{"name": f, "group": "factor", "type": "text"} for f in factors]
    columns += [{"name": "index", "group": "world", "type": "num"}, {"name": "valid", "group": "world", "type": "bool"},
                {"name": "failed", "group": "world", "type": "text"}]
    columns += [{"name": u, "group": "usage", "type": "num"} for u in usage_names]
    metric_cols = [m for m in metric_names if m not in usage_names and m not in factors]
    columns += [{"name": m, "group": "metric", "type": "text"} for m in metric_cols]
    rows: list[list[Any]] = []
    worlds: list[tuple[str, str]] = []
    kinds: dict[int, str] = {}
    frame = design.frame.astype(str)  # one lookup per cell, not per world (10,000 worlds: seconds)
    labels = {cid: design.label(cid) for cid in design.cells}
    levels = {cid: [frame.at[cid, f] for f in factors] for cid in design.cells}
    for rs in run_sets:
        for w in rs.records.worlds:
            wid = str(w["world_id"])
            cid = str(w["cell_id"])
            u = world_usage(rs.records.steps.get(wid, []))
            m = w.get("metrics") or {}
            failed = w.get("failed")
            row: list[Any] = [rs.name] if len(run_sets) > 1 else []
            row += [wid, labels[cid], *levels[cid]]
            row += [w.get("world_index"), bool(w.get("valid")),
                    str((failed or {}).get("cause") or failed)[:MAX_TEXT] if failed else ""]
            row += [u[n] for n in usage_names]
            for j, name in enumerate(metric_cols):
                v = _scalar(m.get(name))
                row.append(None if v is ... else v)
                if v is not None and v is not ...:
                    kinds[j] = _merge_type(kinds.get(j), v)
            rows.append(row)
            worlds.append((rs.key, wid))
    base = len(columns) - len(metric_cols)
    for j, t in kinds.items():
        columns[base + j]["type"] = t
    return Index(columns, rows, worlds, design.constant)


def _merge_type(old: str | None, v: Any) -> str:
    new = "bool" if isinstance(v, bool) else "num" if isinstance(v, int | float) else "text"
    if old is None or old == new:
        return new
    return "text"


# -- search ----------------------------------------------------------------------------------
def _strings(obj: Any, out: list[str], key: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _strings(v, out, str(k))
    elif isinstance(obj, list):
        for v in obj:
            _strings(v, out, key)
    elif key in SEARCH_KEYS and obj is not None and not isinstance(obj, bool):
        out.append(json_text(obj) if not isinstance(obj, str) else obj)


def search_text(world: dict[str, Any], steps: Iterable[dict[str, Any]], limit: int = SEARCH_CHARS) -> str:
    """What a world is found by: every reply's text (and reasoning), then every stored value, message and
    answer its record holds (store log, memory, episodes), lower-cased, at most ``limit`` characters."""
    parts: list[str] = []
    for s in steps:
        r = s.get("reply") or {}
        for k in ("text", "reasoning"):
            if r.get(k):
                parts.append(str(r[k]))
    body = {k: v for k, v in world.items() if k not in ("cell", "metrics", "timing", "agents")}
    _strings(body, parts)
    text = " \u2029 ".join(parts).lower()
    return text[:limit]


# -- several run sets ------------------------------------------------------------------------
def comparisons(run_sets: Sequence[RunSet], ignore: Sequence[str] = ()) -> list[tuple[str, pd.DataFrame | str]]:
    """Each later run set against the first, cells matched on their factors (``workbench compare``'s
    table, from :func:`workbench.metrics.contrasts.compare_run_sets`); a pair that cannot be compared
    gives the reason instead of a table."""
    from workbench.metrics.contrasts import Estimability, compare_run_sets

    out: list[tuple[str, pd.DataFrame | str]] = []
    if len(run_sets) < 2:
        return out
    a = run_sets[0]
    for b in run_sets[1:]:
        title = f"{b.name} − {a.name}"
        if a.kind.name != b.kind.name:
            out.append((title, f"{a.name} holds {a.kind.name} worlds and {b.name} {b.kind.name} worlds: "
                               "only run sets of one kind compare"))
            continue
        ua, ub = a.kind.contrast_units(a.records), b.kind.contrast_units(b.records)
        if ua is None or ub is None:
            out.append((title, f"the {a.kind.name} world kind defines no contrasts"))
            continue
        try:
            table = compare_run_sets(ua, a.design, ub, b.design, ignore=ignore, names=(a.name, b.name),
                                     rule=Estimability.of(a.records))
        except (KeyError, ValueError) as exc:
            out.append((title, f"not comparable: {exc}"))
            continue
        out.append((title, table))
    return out
