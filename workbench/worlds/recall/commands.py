"""The recall kind's own command line: ``workbench recall generate`` (seeded scenario
scripts). Reached through the kind's ``commands`` hook, so the shared command line
names no kind."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.errors import InputError
from workbench.kinds.base import KindCommand


def _configure_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per-domain", type=int, required=True, help="scripts per domain (legal, medical, finance)")
    p.add_argument("--seed", type=int, required=True, help="the same seed writes the same scripts")
    p.add_argument("--out", required=True, help="folder (OUT/DOMAIN/*.json)")
    p.add_argument("--recalls-per-mode", type=int, default=2, choices=[1, 2],
                   help="recalls of each failure mode per script, each about its own fact (default 2)")


def _generate(args: argparse.Namespace) -> int:
    from workbench.worlds.recall.generator import generate_all_scripts

    if args.per_domain < 1:
        raise InputError(f"--per-domain must be at least 1 (got {args.per_domain})")
    paths = generate_all_scripts(Path(args.out), args.per_domain, args.seed, recalls_per_mode=args.recalls_per_mode)
    for path in paths:
        print(path)
    print(f"{len(paths)} scripts in {args.out} (seed {args.seed}); run them with `scripts: {args.out}` in a recall cell",
          file=sys.stderr)
    return 0


COMMANDS = [
    KindCommand("generate", "write seeded scenario scripts for every domain (validated)",
                "workbench recall generate --per-domain 10 --seed 7 --out outputs/recall-scripts",
                _configure_generate, _generate),
]
