"""Every benchmark, one after the other, then one table of what each measured
against the reference it is held to in the same run (`make bench`).

Each benchmark prints its own detail and ends with a machine-readable line
``RESULT name=... figure=LABEL:VALUE reference=LABEL:VALUE ratio=... target=...
met=yes|no``; this script collects those lines. A benchmark that cannot run here
(e.g. no open-weight model fetched) says so in its own output and adds no row.
Run: .venv/bin/python benchmarks/run_all.py [--only NAME ...]"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("bench_grid.py", "bench_litellm.py", "bench_report.py", "bench_analysis.py", "bench_local.py",
              "bench_batch.py", "bench_cache_cost.py", "bench_route_pool.py", "bench_executor.py",
              "bench_recall_memory.py")


def results(output: str) -> list[dict[str, str]]:
    """The RESULT lines of one benchmark's output, as key -> value."""
    rows = []
    for line in output.splitlines():
        if line.startswith("RESULT "):
            rows.append(dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=[], help="benchmark file names to run (default: all)")
    args = ap.parse_args()
    rows: list[dict[str, str]] = []
    failed = []
    for name in BENCHMARKS:
        path = HERE / name
        if not path.exists() or (args.only and name not in args.only):
            continue
        print(f"== {name}", flush=True)
        t = time.perf_counter()
        res = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
        print(res.stdout + res.stderr[-2000:], flush=True)
        print(f"({name}: {time.perf_counter() - t:.0f} s, exit {res.returncode})\n", flush=True)
        if res.returncode:
            failed.append(name)
        rows += results(res.stdout)
    print(f"{'benchmark':<28} {'figure':<30} {'reference':<32} {'ratio':>6}  {'target':<26} met")
    for r in rows:
        print(f"{r.get('name', '?'):<28} {r.get('figure', '-'):<30} {r.get('reference', '-'):<32} "
              f"{r.get('ratio', '-'):>6}  {r.get('target', '-'):<26} {r.get('met', '-')}")
    if failed:
        print(f"failed to run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
