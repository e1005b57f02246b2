"""The ``workbench view`` command's body (the CLI's subcommand only parses and calls :func:`run_view`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.errors import WorkbenchError


def run_view(args: argparse.Namespace) -> int:
    from workbench.viewer.data import load_run_sets
    from workbench.viewer.server import serve
    from workbench.viewer.site import build_site

    if args.examples < 0:
        print("error: --examples: expected 0 or more world pages per cell", file=sys.stderr)
        return 2
    try:
        if args.bundle:
            site = build_site(load_run_sets(args.dirs), Path(args.bundle), examples=args.examples,
                              ignore=args.ignore or ())
            print(f"wrote {site.root / 'index.html'}: {len(site.index.worlds)} worlds, {len(site.pages)} world pages "
                  f"(at most {args.examples} per cell; --examples raises it); opens from file://, no server needed")
            return 0
        serve(args.dirs, host=args.host, port=args.port, ignore=args.ignore or (), quiet=not getattr(args, "verbose", 0))
        return 0
    except (FileNotFoundError, WorkbenchError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc} (is port {args.port} in use? --port 0 takes a free one)", file=sys.stderr)
        return 2
