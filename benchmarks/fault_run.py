"""A study against a fake OpenAI-compatible server that fails a share of requests
(429 with Retry-After, 500, 503, timeouts, connection resets, malformed bodies),
killed once mid-run and resumed until every world is accounted for. Prints each
run, the final worlds by failure class, and the server's request count beside the
call ledger's: the two must be equal.

    python benchmarks/fault_run.py [--worlds 12] [--rate 0.3] [--seed 3] [--kill-after 40]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the fake server

from tests.fault_study import fault_run  # noqa: E402
from workbench.models.failures import failure_class  # noqa: E402
from workbench.records import latest_worlds  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=12)
    ap.add_argument("--rate", type=float, default=0.3, help="share of requests that fail")
    ap.add_argument("--seed", type=int, default=3, help="seed of the fault sequence")
    ap.add_argument("--kill-after", type=int, default=40, help="kill the first run after this many requests (0: no kill)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = fault_run(Path(tmp), worlds=args.worlds, rate=args.rate, seed=args.seed,
                           kill_after=args.kill_after or None)
        worlds = latest_worlds(Path(tmp) / "run")
    print(f"{args.worlds} worlds, {args.rate:.0%} of requests faulted (seed {args.seed})")
    print("faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(result.faults.items())))
    for r in result.runs:
        if r.get("killed"):
            print(f"run {r['run']}: killed mid-run (Ctrl-C) after {args.kill_after} requests")
            continue
        causes = ", ".join(f"{cls}/{cause} {n}" for (cls, cause), n in sorted(r["causes"].items())) or "none"
        print(f"run {r['run']}: {r['finished']} worlds recorded ({r['retried']} re-runs of infrastructure failures), "
              f"{r['skipped']} already done; failed this run: {causes}; unfinished after it: "
              f"{r['infrastructure_failed']}")
    classes: dict[str, int] = {}
    for w in worlds.values():
        key = failure_class(w) or "finished"
        classes[key] = classes.get(key, 0) + 1
    print("final worlds: " + ", ".join(f"{k} {v}" for k, v in sorted(classes.items())))
    same = result.server_requests == result.ledger_requests
    print(f"requests: server logged {result.server_requests}, ledger recorded {result.ledger_requests} "
          f"({'equal' if same else 'DIFFERENT'})")
    return 0 if same and not classes.get("infrastructure") else 1


if __name__ == "__main__":
    sys.exit(main())
