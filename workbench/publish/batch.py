"""`workbench batch PARAMS --out DIR`: one papermill run of study.ipynb per cell,
cells in parallel up to a limit, each executed notebook kept; then the analysis.

Each cell writes its own run directory under DIR/cells/CELL_ID (so parallel
cells never share a file); DIR as a whole loads as one run set. A failed cell
is reported and the others go on; running the same command again resumes
every cell where it stopped; a cell whose worlds are all recorded under its current
design records that run without starting a kernel.

With ``progress``, a bar on stderr counts finished cells (papermill's per-cell
bars are off here: cells run in parallel) and the report then shows papermill's
own bar; ``-v`` logs each cell as it ends (the ``workbench`` logger)."""
from __future__ import annotations

import concurrent.futures
import json
import logging
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.params import load_study
from workbench.publish.notebooks import NotebookError, execute
from workbench.records import BATCH_CELLS
from workbench.study import infrastructure_failures, run_study

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    out_dir: Path
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    report: Path | None = None
    report_error: str | None = None
    infrastructure: dict[str, dict[str, int]] = field(default_factory=dict)  # cell -> cause -> worlds

    def lines(self) -> list[str]:
        out = [f"batch: {len(self.done)} cells done, {len(self.failed)} failed; records in {self.out_dir}"]
        out += [f"  FAILED {cid}: {why}" for cid, why in self.failed.items()]
        for cid, causes in self.infrastructure.items():
            out.append(f"  INCOMPLETE {cid}: {sum(causes.values())} worlds ended in infrastructure failure ("
                       + ", ".join(f"{c} {n}" for c, n in sorted(causes.items()))
                       + "); run the same command again to retry them")
        if self.report:
            out.append(f"report: {self.report}")
        if self.report_error:
            out.append(f"report not written: {self.report_error}")
        return out


def finished(study: Any, cell_id: str, cell_dir: Path) -> bool:
    """Whether every world of the cell is recorded in its run directory, none of them an
    infrastructure failure to run again, all under the cell's design as it is now."""
    from workbench.design import cell_designs
    from workbench.models.failures import INFRASTRUCTURE, failure_class
    from workbench.records import latest_worlds, world_id

    if not (cell_dir / "worlds.jsonl").exists():
        return False
    cell = study.cell(cell_id)
    recorded = latest_worlds(cell_dir)
    wanted = [recorded.get(world_id(cell_id, i)) for i in range(study.worlds_for(cell))]
    if any(w is None or failure_class(w) == INFRASTRUCTURE for w in wanted):
        return False
    fingerprint = cell_designs(study, [cell])[cell_id].fingerprint
    return all(w.get("design") == fingerprint for w in wanted)  # type: ignore[union-attr]


def run_batch(params: str | Path, out_dir: str | Path, *, parallel: int = 2, timeout_s: int = 1800,
              report: bool = True, lock: dict | None = None, progress: bool = False) -> BatchResult:
    study = load_study(params)  # a bad file fails here, before any kernel starts
    # Resolve paths now: papermill changes the process's working directory while a
    # notebook runs, so a relative path resolved in another thread would point elsewhere.
    params_path = str(Path(params).resolve())
    out = Path(out_dir).resolve()
    (out / BATCH_CELLS).mkdir(parents=True, exist_ok=True)
    result = BatchResult(out)
    if lock is not None:  # the lock each cell ran under, verified once before any kernel started
        (out / "lock.json").write_text(json.dumps(lock, indent=1) + "\n")

    done_lock = threading.Lock()

    def one(cell_id: str) -> str:
        if finished(study, cell_id, out / BATCH_CELLS / cell_id):
            # every world is recorded under the design the study has now: the run that finds them
            # done is recorded here, without a kernel (the notebook of the run that made them is kept)
            with done_lock:
                run_study(study, out / BATCH_CELLS / cell_id, cell_ids=[cell_id], progress=False, keep_worlds=False)
            return cell_id
        execute("study", out / "notebooks" / f"study-{cell_id}.ipynb", {
            "params": params_path, "out": str(out / BATCH_CELLS / cell_id), "cells": cell_id,
            "concurrency": 0}, timeout_s=timeout_s)
        return cell_id

    from tqdm import tqdm

    bar = tqdm(total=len(study.cells), unit="cell", desc=f"batch {study.name}", file=sys.stderr,
               dynamic_ncols=True, disable=not progress)
    with bar, concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(one, c.cell_id): c.cell_id for c in study.cells}
        for fut in concurrent.futures.as_completed(futures):
            cid = futures[fut]
            try:
                fut.result()
                result.done.append(cid)
                log.info("cell %s done", cid)
            except NotebookError as exc:
                result.failed[cid] = str(exc)
                log.info("cell %s failed: %s", cid, exc)
            if (out / BATCH_CELLS / cid / "manifest.json").exists():
                causes = infrastructure_failures(out / BATCH_CELLS / cid)
                if causes:
                    result.infrastructure[cid] = causes
            bar.update(1)
            if result.failed:
                bar.set_postfix(failed=len(result.failed))
    if report and result.done:
        from workbench.publish.report import make_report

        try:
            result.report = make_report(out, progress=progress)
        except (NotebookError, RuntimeError, FileNotFoundError) as exc:
            result.report_error = str(exc)
    return result
