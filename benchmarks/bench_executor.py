"""The Ray executor's overhead against the forked runner on the same cores (issue 43).

Figure: the E1 grid (default params/e1.yaml: 16 cells x 50 worlds, simulated twins) run
with ``executor="ray"`` on a local Ray runtime of as many CPUs as this process may use,
records and all (the driver writes them, as it does with forked world processes).
Reference: the same study with the forked runner (``processes`` = those same cores).
Both run in this process, alternating, REPEATS times each, each into a fresh run
directory; the medians and the median of the per-pair ratios are printed. The Ray
runtime is started once before the pairs and its start-up time printed apart: it is
paid once per session (or never, on a running cluster), not per study, so it is not
in the ratio. Target (issue 43): ratio <= 1.3.

    python benchmarks/bench_executor.py [--params params/e1.yaml] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params" / "e1.yaml"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    try:
        import ray
    except ImportError:
        print("Ray is not installed (the extra 'ray'): no figure")
        return 0
    from workbench.forked import usable_cpus
    from workbench.params import load_study
    from workbench.study import run_study

    study = load_study(args.params)
    cpus = usable_cpus()
    worlds = sum(study.worlds_for(c) for c in study.cells)
    t = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, configure_logging=False, log_to_driver=False)
    startup = time.perf_counter() - t
    print(f"{study.name}: {len(study.cells)} cells, {worlds} worlds; {cpus} cores; "
          f"Ray runtime started in {startup:.1f} s (once, not in the ratio)")
    rays: list[float] = []
    forks: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        # one warm-up run each (Ray's worker processes start and import the package once)
        run_study(study, Path(tmp) / "warm-ray", progress=False, keep_worlds=False, executor="ray")
        run_study(study, Path(tmp) / "warm-fork", progress=False, keep_worlds=False, processes=cpus)
        for k in range(args.repeats):
            t = time.perf_counter()
            a = run_study(study, Path(tmp) / f"ray-{k}", progress=False, keep_worlds=False, executor="ray")
            rays.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = run_study(study, Path(tmp) / f"fork-{k}", progress=False, keep_worlds=False, processes=cpus)
            forks.append(time.perf_counter() - t)
            assert a.finished == b.finished == worlds, (a.line(), b.line())
            ex = json.loads((Path(tmp) / f"ray-{k}" / "manifest.json").read_text())["runs"][-1]["executor"]
            print(f"pair {k + 1}: ray {rays[-1]:.2f} s ({ex['shares']} shares), forked {forks[-1]:.2f} s "
                  f"({cpus} processes), ratio {rays[-1] / forks[-1]:.2f}")
    ray.shutdown()
    ratio = statistics.median(r / f for r, f in zip(rays, forks))
    fig, ref = statistics.median(rays), statistics.median(forks)
    print(f"median: ray {fig:.2f} s, forked {ref:.2f} s; median ratio {ratio:.2f} (target <= {TARGET_RATIO})")
    print(f"RESULT name=executor-ray figure=ray_s:{fig:.2f} reference=forked_s:{ref:.2f} ratio={ratio:.2f} "
          f"target=ratio<={TARGET_RATIO} met={'yes' if ratio <= TARGET_RATIO else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
