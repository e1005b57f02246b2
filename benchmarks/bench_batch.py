"""What `workbench batch` costs on top of `workbench run`, per cell.

Runs the study three ways, each into a new folder, each timed by wall clock from a new
process: ``workbench run`` (the worlds, nothing else); the batch as it was before issue 39
(papermill with a new kernel per cell, one cell at a time: ``--before``, which calls
``workbench.publish.notebooks.execute`` per cell as the old batch did); and ``workbench batch
--no-report`` as it is (one kernel per parallel slot). Overhead per cell is (that wall time
minus the run's) / cells: kernel start-up and imports, papermill, writing each executed
notebook. The same in CPU seconds (every process of the command, kernels included) is printed
beside it: on a shared machine wall time follows everyone else's load, CPU time much less.
Target (issue 39): at most 1 s per cell.
Run: .venv/bin/python benchmarks/bench_batch.py [--params params/smoke.yaml] [--parallel 1] [--no-before]"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S = 1.0
WORKBENCH = str(Path(sys.executable).with_name("workbench"))


def cpu() -> float:
    """CPU seconds of every finished child process and its reaped descendants (the kernels)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command."""
    t, c = time.perf_counter(), cpu()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t, cpu() - c
    if done.returncode:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took


def before(params: str, out: str) -> None:
    """The old batch at --parallel 1: papermill, a new kernel per cell."""
    from workbench.params import load_study
    from workbench.publish.notebooks import execute

    study = load_study(params)
    for c in study.cells:
        execute("study", Path(out) / "notebooks" / f"study-{c.cell_id}.ipynb", {
            "params": str(Path(params).resolve()), "out": str(Path(out) / "cells" / c.cell_id),
            "cells": c.cell_id, "concurrency": 0})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params/smoke.yaml")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--no-before", action="store_true", help="skip the old way (a new kernel per cell)")
    ap.add_argument("--before", metavar="OUT", help=argparse.SUPPRESS)  # the old way, in this process
    args = ap.parse_args()
    if args.before:
        before(args.params, args.before)
        return

    from workbench.params import load_study

    cells = len(load_study(ROOT / args.params).cells)
    with tempfile.TemporaryDirectory() as tmp:
        run = timed([WORKBENCH, "run", args.params, "--out", f"{tmp}/run"])
        print(f"{args.params}: {cells} cells; workbench run {run[0]:.1f} s wall, {run[1]:.1f} s CPU")

        def line(what: str, took: tuple[float, float]) -> str:
            return (f"{what}: {took[0]:.1f} s wall, {took[1]:.1f} s CPU; overhead per cell "
                    f"{(took[0] - run[0]) / cells:.2f} s wall, {(took[1] - run[1]) / cells:.2f} s CPU")

        old = None
        if not args.no_before:
            old = timed([sys.executable, __file__, "--params", args.params, "--before", f"{tmp}/before"])
            print(line("before (a new kernel per cell, one at a time)", old))
        new = timed([WORKBENCH, "batch", args.params, "--out", f"{tmp}/batch", "--parallel", str(args.parallel),
                     "--no-report"])
        print(line(f"after (one kernel per slot, --parallel {args.parallel})", new))
        per_cell = (new[0] - run[0]) / cells
        met = "met" if per_cell <= TARGET_S else "MISSED"
        print(f"overhead per cell {per_cell:.2f} s wall (target <= {TARGET_S:.0f} s: {met})")
        ref = f"before_overhead_s_per_cell:{(old[0] - run[0]) / cells:.2f}" if old is not None else "before:-"
        ratio = f"{(old[0] - run[0]) / (new[0] - run[0]):.1f}" if old is not None and new[0] > run[0] else "-"
        print(f"RESULT name=batch-overhead figure=overhead_s_per_cell:{per_cell:.2f} reference={ref} "
              f"ratio={ratio} target=<={TARGET_S:.0f}s met={'yes' if per_cell <= TARGET_S else 'no'}")

if __name__ == "__main__":
    main()
