"""The call ledger: one line for every model call a run makes, whatever became of it.

Step records hold the calls whose replies a world used. Some calls never
become a step: a call still in flight when its world ended (another agent's
call failed), when the budget stopped the run, or when the user pressed
Ctrl-C; the replies a lockstep round got after one of them failed. Those
requests reached the provider all the same, and may be billed. The ledger is
where every call is accounted for: the client writes its line when the call
ends (answered, failed, refused by the budget, served from the cache, or
cancelled), with each HTTP attempt it made and what it charged or kept
reserved. Lines are flushed as they are written, so a run stopped by Ctrl-C
keeps them.

The ledger knows nothing of worlds: whoever builds the client binds the tags
(world id, run, agent slot) that a line carries.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CALLS = "calls.jsonl"


class CallLedger:
    """An append-only JSON Lines file of calls, shared by every client of a run."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")
        self.lines = 0

    def bind(self, **tags: Any) -> BoundLedger:
        return BoundLedger(self, tags)

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=True, separators=(",", ":"), default=str)
        with self._lock:
            if self._fh.closed:  # a call that outlived its run (a cancelled task finishing late)
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write(line + "\n")
            self._fh.flush()
            self.lines += 1

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()


class BoundLedger:
    """A ledger with the tags of one client (which world, run and agent it serves)."""

    def __init__(self, ledger: CallLedger, tags: dict[str, Any]) -> None:
        self.ledger = ledger
        self.tags = dict(tags)

    def record(self, entry: dict[str, Any]) -> None:
        self.ledger.write({**self.tags, **entry})


def read_ledger(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """Every well-formed line of a run directory's ledger (none if it has no ledger)."""
    path = Path(run_dir) / CALLS
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield rec


def requests_sent(entry: dict[str, Any]) -> int:
    """HTTP requests a ledger line's call sent (attempts litellm refused locally excluded)."""
    return sum(1 for a in entry.get("attempts") or () if not a.get("local"))
