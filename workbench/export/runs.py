"""The run index: every run set under a folder, one row each, as experiment trackers list runs.

``workbench runs [DIR]`` finds run directories (a ``manifest.json`` beside
``worlds.jsonl``) and batch directories (``cells/`` of run directories) under
DIR and reads, from records only:

- ``study``, ``kind`` and ``cells`` (the manifest's cells);
- ``planned`` (the design: worlds per cell times cells), ``finished`` (latest world records
  without a failure), ``failed`` (latest world records that record one: they are
  run again on resume) and ``cut`` (worlds stopped by the study budget);
- ``agents``: ``simulated`` when no agent of any world was a real model,
  ``real`` when every world had one, ``mixed`` otherwise (from the cells' routes
  when no world has finished);
- ``cost_usd``: the sum of the recorded replies' ``cost_usd`` in steps.jsonl,
  superseded attempts included (money spent; calls that never became a step
  are in the run's call ledger, not here);
- ``revision`` (git commit of the latest invocation, ``+dirty`` when the tree
  had changes), ``runs`` (invocations), ``created`` and ``last`` (the latest
  invocation's end, or start when it did not end).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.records import BATCH_CELLS, CUT, MANIFEST, STEPS, WORLDS, is_batch_dir, latest_worlds, read_jsonl, read_manifest
from workbench.routes import is_simulated_route, is_simulated_world

_SKIP = {".git", ".venv", "node_modules", "__pycache__", "checkpoints", "figures", "metrics"}


@dataclass
class RunRow:
    path: str
    study: str
    kind: str
    cells: int
    planned: int | None
    finished: int
    failed: int
    cut: int
    agents: str
    cost_usd: float
    revision: str
    runs: int
    created: str
    last: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_runs(root: str | Path, max_depth: int = 4) -> list[Path]:
    """Run and batch directories under ``root`` (itself included), not those inside a batch."""
    root = Path(root)
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if is_batch_dir(d) or (d / MANIFEST).exists() and (d / WORLDS).exists():
            found.append(d)
            return
        if depth >= max_depth:
            return
        try:
            subs = sorted(p for p in d.iterdir() if p.is_dir() and p.name not in _SKIP and not p.name.startswith("."))
        except OSError:
            return
        for p in subs:
            walk(p, depth + 1)

    walk(root, 0)
    return found


def _parts(run: Path) -> list[Path]:
    if is_batch_dir(run):
        return [p for p in sorted((run / BATCH_CELLS).iterdir()) if p.is_dir() and (p / MANIFEST).exists()]
    return [run]


def _cost(path: Path) -> float:
    total = 0.0
    for s in read_jsonl(path):
        c = (s.get("reply") or {}).get("cost_usd")
        if isinstance(c, int | float):
            total += float(c)
    return total


def run_row(run: Path, root: Path) -> RunRow:
    manifests: list[dict[str, Any]] = []
    worlds: list[dict[str, Any]] = []
    cut = 0
    cost = 0.0
    for part in _parts(run):
        manifests.append(read_manifest(part) or {})
        worlds += latest_worlds(part).values()
        cut += sum(1 for _ in read_jsonl(part / CUT))
        cost += _cost(part / STEPS)
    runs = [r for m in manifests for r in m.get("runs") or [] if isinstance(r, dict)]
    runs.sort(key=lambda r: str(r.get("started") or ""))
    m0 = manifests[0] if manifests else {}
    cells: dict[str, Any] = {}
    for m in manifests:
        cells.update(m.get("cells") or {})
    last = runs[-1] if runs else {}
    git = (last.get("environment") or {}).get("git") or {}
    rev = str(git.get("revision") or "")[:10]
    if rev and git.get("dirty"):
        rev += "+dirty"
    if worlds:
        sims = [is_simulated_world(w) for w in worlds]
    else:
        sims = [is_simulated_route(str((c.get("spec") or {}).get("model") or "")) for c in cells.values()]
    agents = "simulated" if sims and all(sims) else "real" if sims and not any(sims) else "mixed" if sims else "?"
    # planned: the design (worlds per cell x cells) of each part, else what its latest invocation planned
    planned_parts: list[int | None] = []
    for m in manifests:
        mr = [r for r in m.get("runs") or [] if isinstance(r, dict)]
        wpc = m.get("worlds_per_cell")
        planned_parts.append(sum(int(c.get("worlds") or wpc) for c in (m.get("cells") or {}).values())
                             if isinstance(wpc, int) and m.get("cells") else mr[-1].get("planned") if mr else None)
    planned = sum(p for p in planned_parts if isinstance(p, int)) if any(isinstance(p, int) for p in planned_parts) else None
    failed = sum(1 for w in worlds if w.get("failed"))
    try:
        path = str(run.relative_to(root)) or "."
    except ValueError:
        path = str(run)
    return RunRow(
        path=path, study=str(m0.get("study") or (worlds[0].get("study") if worlds else "") or ""),
        kind=str(m0.get("world_kind") or (worlds[0].get("world_kind") if worlds else "") or ""),
        cells=len(cells) or len({w.get("cell_id") for w in worlds}), planned=planned,
        finished=len(worlds) - failed, failed=failed, cut=cut, agents=agents, cost_usd=round(cost, 6),
        revision=rev, runs=len(runs), created=str(m0.get("created") or (runs[0].get("started") if runs else "") or ""),
        last=str(last.get("finished") or last.get("started") or ""),
    )


def index_runs(root: str | Path = ".") -> list[RunRow]:
    """One row per run set under ``root``, newest first."""
    root = Path(root)
    rows = [run_row(r, root) for r in find_runs(root)]
    rows.sort(key=lambda r: (r.last or r.created, r.path), reverse=True)
    return rows


COLUMNS = ("path", "study", "kind", "cells", "planned", "finished", "failed", "cut", "agents", "cost_usd",
           "revision", "runs", "created", "last")


def format_rows(rows: list[RunRow]) -> str:
    """A plain-text table (dates to the minute), one line per run set."""
    def cell(row: RunRow, col: str) -> str:
        v = getattr(row, col)
        if v is None:
            return "-"
        if col == "cost_usd":
            return f"{v:.4f}"
        if col in ("created", "last") and v:
            return str(v)[:16].replace("T", " ")
        return str(v)

    table = [list(COLUMNS)] + [[cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    right = {"cells", "planned", "finished", "failed", "cut", "cost_usd", "runs"}
    return "\n".join("  ".join(v.rjust(w) if COLUMNS[i] in right else v.ljust(w) for i, (v, w) in enumerate(zip(line, widths))).rstrip()
                     for line in table)


def rows_json(rows: list[RunRow]) -> str:
    return json.dumps([r.as_dict() for r in rows], indent=2, ensure_ascii=False)
