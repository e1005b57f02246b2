"""E1-sized grid of simulated agents: 16 cells × 50 worlds, lockstep.

Prints worlds/s and steps/s. Target (issue 2): the whole grid in <= 20 s on a
2-core machine. Run: python benchmarks/bench_grid.py [--worlds N]"""
from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.params import load_study  # noqa: E402
from workbench.records import load_run  # noqa: E402
from workbench.study import run_study  # noqa: E402


def grid_study(worlds: int) -> dict:
    cells = [{"model": m, "condition": c, "clauses": k}
             for m, c, k in itertools.product(["sim/diligent", "sim/clause-follower", "sim/multi-object"],
                                              ["store", "private"], ["both", "persist-only"])]
    cells += [{"model": m, "condition": "prepopulated"}
              for m in ["sim/diligent", "sim/clause-follower", "sim/non-writer", "sim/multi-object"]]
    return {"world": "stigmergy", "name": "bench-e1", "seed": 7, "worlds_per_cell": worlds,
            "defaults": {"scheduler": "lockstep", "prompts": str(ROOT / "params/prompts/stigmergy")},
            "cells": cells}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=50)
    ap.add_argument("--scheduler", default="lockstep", choices=["lockstep", "async"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = grid_study(args.worlds)
        spec["defaults"]["scheduler"] = args.scheduler
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(spec))
        study = load_study(path)
        t0 = time.perf_counter()
        summary = run_study(study, Path(tmp) / "run", progress=False)
        wall = time.perf_counter() - t0
        steps = sum(len(s) for s in load_run(Path(tmp) / "run").steps.values())
    n = summary.finished
    print(f"grid: {len(study.cells)} cells x {args.worlds} worlds = {n} worlds, {steps} steps, "
          f"scheduler {args.scheduler}")
    print(f"wall {wall:.2f} s   {n / wall:.1f} worlds/s   {steps / wall:.0f} steps/s   "
          f"target <= 20 s: {'met' if wall <= 20 else 'MISSED'}")


if __name__ == "__main__":
    main()
