"""Local open-weight models on this machine: seconds per world and tokens per
second, for each catalogued model that is installed (workbench models fetch).
Target (issue 7): a Qwen-1.5B world in <= 60 s on 2 cores.
Run: python benchmarks/bench_local.py [--worlds N] [--constrained]"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.local.catalogue import load_local_catalogue  # noqa: E402
from workbench.local.fetch import installed  # noqa: E402
from workbench.local.server import server_for, stop_all  # noqa: E402
from workbench.params import load_study  # noqa: E402
from workbench.records import load_run  # noqa: E402
from workbench.study import run_study  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=2)
    ap.add_argument("--constrained", action="store_true")
    args = ap.parse_args()
    for name in load_local_catalogue():
        if not installed(name):
            print(f"{name}: not installed (workbench models fetch {name}); skipped")
            continue
        t0 = time.perf_counter()
        server_for(name)
        start_s = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            spec = {"world": "stigmergy", "name": "bench-local", "seed": 3, "worlds_per_cell": args.worlds,
                    "concurrency": 1, "cells": [{"model": f"local/{name}", "constrained": args.constrained}],
                    "defaults": {"prompts": str(ROOT / "params/prompts/stigmergy"), "scheduler": "lockstep",
                                 "max_steps": 12, "sampling": {"temperature": 0.7, "max_tokens": 96}}}
            path = Path(tmp) / "s.yaml"
            path.write_text(yaml.safe_dump(spec))
            t1 = time.perf_counter()
            run_study(load_study(path), Path(tmp) / "run", progress=False)
            wall = time.perf_counter() - t1
            records = load_run(Path(tmp) / "run")
        steps = [s for v in records.steps.values() for s in v]
        completion = sum(s["reply"]["usage"].get("completion_tokens", 0) for s in steps)
        prompt = sum(s["reply"]["usage"].get("prompt_tokens", 0) for s in steps)
        cached = sum(s["reply"]["usage"].get("cached_tokens", 0) or 0 for s in steps)
        per_world = wall / max(1, len(records.worlds))
        target = "" if "1.5b" not in name else f"   target <= 60 s per world: {'met' if per_world <= 60 else 'MISSED'}"
        print(f"{name}: server start {start_s:.1f} s; {len(records.worlds)} worlds, {len(steps)} calls; "
              f"{per_world:.1f} s per world; {completion / wall:.1f} generated tok/s, "
              f"{(prompt - cached) / wall:.0f} uncached prompt tok/s ({cached}/{prompt} prompt tokens cached)"
              f"{' [constrained]' if args.constrained else ''}{target}")
        limit = 40 if "1.5b" in name else 8 if "0.5b" in name else None  # issue 17's per-world targets
        print(f"RESULT name=local-{name} figure=s_per_world:{per_world:.1f} reference=- ratio=- "
              f"target={'<=' + str(limit) + 's' if limit else '-'} "
              f"met={'-' if limit is None else 'yes' if per_world <= limit else 'no'}")
        stop_all()


if __name__ == "__main__":
    main()
