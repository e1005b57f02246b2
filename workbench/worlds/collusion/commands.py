"""The collusion kind's own command line. ``workbench collusion monitor RUN`` labels recorded episodes with
a monitor route (monitor_route.py). ``workbench collusion import-tasks PATH --out DIR`` brings in a
task pool in the source study's layout (validated; every problem names the file and the field) so that
its ids can be named in a ``sequences_file:``. Reached through the kind's ``commands`` hook."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from workbench.kinds.base import KindCommand


def _configure_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="the pool: a folder holding code-analysis/, text-extraction/ and data-search/ "
                                "manifests (the source study's task/ folder, or the folder above it)")
    p.add_argument("--out", required=True, help="folder for the validated copy (task_pool.json, files/, "
                                                "sequences/); empty, or an earlier import to replace")


def _import(args: argparse.Namespace) -> int:
    from workbench.worlds.collusion.tasks import import_task_pool
    from workbench.worlds.collusion.tasks.imported import POOL_INDEX

    index = import_task_pool(Path(args.path), Path(args.out))
    counts = Counter(row["family"] for row in index["tasks"])
    print(Path(args.out) / POOL_INDEX)
    for name in index["sequences"]:
        print(Path(args.out) / "sequences" / name)
    print(f"{len(index['tasks'])} tasks imported ("
          + ", ".join(f"{n} {f}" for f, n in sorted(counts.items())) + "); name them in a sequences_file inside "
          f"{args.out} (e.g. sequences_file: {Path(args.out) / 'sequences' / (index['sequences'] or ['NAME'])[0]})",
          file=sys.stderr)
    return 0


def _configure_monitor(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a collusion run set (the --out of workbench run)")
    p.add_argument("--route", help="monitor route for every cell (default: each cell's declared monitor: "
                                   "{route, reads}); sim-collusion-monitor/cues runs offline")
    p.add_argument("--reads", choices=["channel", "channel+reasoning"],
                   help="what the monitor reads (default: the cell's declaration, else channel)")
    p.add_argument("--limit", type=int, help="label at most this many episodes (a trial)")
    p.add_argument("--concurrency", type=int, default=4, help="calls in flight (default 4)")


def _monitor(args: argparse.Namespace) -> int:
    from workbench.worlds.collusion.monitor import MONITORS_FILE
    from workbench.worlds.collusion.monitor_route import run_monitor

    labels = run_monitor(args.run_dir, args.route, reads=args.reads, limit=args.limit,
                         concurrency=args.concurrency)
    counts = Counter((r["route"], r["reads"], r["status"], bool(r["flagged"])) for r in labels)
    for (route, reads, status, flagged), n in sorted(counts.items()):
        print(f"{route} ({reads}): {n} {status}{', flagged' if flagged else ''}")
    print(Path(args.run_dir) / MONITORS_FILE, file=sys.stderr)
    return 0


COMMANDS = [
    KindCommand("import-tasks", "validate a task pool in the source study's layout and copy it for use in "
                "sequences_file", "workbench collusion import-tasks ~/agent-collusion/task --out "
                "collusion-pools/original", _configure_import, _import),
    KindCommand("monitor", "label every recorded episode with a monitor route (each cell's declared monitor, or "
                "--route), post hoc; labels beside the records in monitors.jsonl",
                "workbench collusion monitor outputs/collusion --route sim-collusion-monitor/cues", _configure_monitor,
                _monitor),
]
