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

Write-ahead: before an attempt's request is sent, an ``open`` line (the call's id,
the attempt's request id, the worst case the call may cost) is written and flushed to
the operating system, so a request can never reach a provider unrecorded when the
process dies, ``kill -9`` included; a group commit syncs those lines to disk moments
later (see :meth:`CallLedger.open`). An open
attempt that no closing line accounts for was cut off by a crash: the next run
closes it as ``lost`` with its call's worst case charged (:func:`close_lost`), and
a study's budget counts what every earlier invocation spent (:func:`spent`).

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
        self._sync_loop: Any = None  # the event loop running the group commit (see open)
        self._syncing = False
        self._dirty = False

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

    def open(self, entry: dict[str, Any]) -> None:
        """An attempt about to be sent: its line is in the operating system's hands (written and
        flushed) before the request goes out, so killing the process, ``kill -9`` included, cannot
        lose it. Syncing it to disk (against a machine crash) is a group commit: one fsync, off the
        event loop's thread, for every attempt opened meanwhile; the request does not wait for it
        (waiting cost 3-6 % of the critical-path ratio in benchmarks/bench_litellm.py)."""
        self._write_open(entry)
        try:
            import asyncio

            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: sync now
            self._fsync()
            return
        if not self._syncing or self._sync_loop is not loop:
            self._sync_loop, self._syncing, self._dirty = loop, True, False
            loop.create_task(self._group_syncs())
        else:
            self._dirty = True  # the sync under way may have begun before this line: one more follows

    async def _group_syncs(self) -> None:
        import asyncio

        try:
            while True:
                self._dirty = False
                await asyncio.to_thread(self._fsync)  # every line written before this began
                if not self._dirty:
                    break
        finally:
            self._syncing = False

    def _write_open(self, entry: dict[str, Any]) -> None:
        line = json.dumps({"state": "open", **entry}, ensure_ascii=True, separators=(",", ":"), default=str)
        with self._lock:
            if self._fh.closed:
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write(line + "\n")
            self._fh.flush()

    def _fsync(self) -> None:
        with self._lock:
            if self._fh.closed:
                return  # closed, and synced by close()
            fd = self._fh.fileno()
        try:
            os.fsync(fd)
        except OSError:
            pass  # the file was closed (and synced) meanwhile

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

    def open(self, entry: dict[str, Any]) -> None:
        self.ledger.open({**self.tags, **entry})




def read_ledger(run_dir: str | Path, opens: bool = False) -> Iterator[dict[str, Any]]:
    """Every well-formed call line of a run directory's ledger (none if it has no ledger);
    with ``opens``, the write-ahead ``open`` lines of attempts too."""
    path = Path(run_dir) / CALLS
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and (opens or rec.get("state") != "open"):
                yield rec


def requests_sent(entry: dict[str, Any]) -> int:
    """HTTP requests a ledger line's call sent (attempts litellm refused locally excluded)."""
    return sum(1 for a in entry.get("attempts") or () if not a.get("local"))


def _closed_requests(entries: list[dict[str, Any]]) -> set[str]:
    return {str(a.get("request_id")) for e in entries if e.get("state") != "open"
            for a in e.get("attempts") or () if a.get("request_id")}


def lost_calls(run_dir: str | Path) -> list[dict[str, Any]]:
    """Calls whose attempts were opened (sent, or about to be) and never closed: a crash cut
    them off. One entry per call: its tags, route, request ids and worst-case cost."""
    entries = list(read_ledger(run_dir, opens=True))
    closed = _closed_requests(entries)
    calls: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e.get("state") != "open" or str(e.get("request_id")) in closed:
            continue
        call = calls.setdefault(str(e.get("call_id")), {k: v for k, v in e.items() if k not in (
            "state", "request_id", "n")} | {"request_ids": []})
        call["request_ids"].append(e.get("request_id"))
    return list(calls.values())


def close_lost(ledger: CallLedger, run_dir: str | Path, run: int) -> list[dict[str, Any]]:
    """Close every attempt a crash left open as ``lost``, charging its call's worst case (no
    usage came back to say what it cost); returns the lines written."""
    out = []
    for call in lost_calls(run_dir):
        line = {**{k: v for k, v in call.items() if k not in ("request_ids", "reserved_usd")},
                "state": "lost", "closed_by_run": run, "cost_usd": None,
                "charged_usd": call.get("reserved_usd"),
                "attempts": [{"request_id": r, "lost": True} for r in call["request_ids"]],
                "error": "Lost: the run stopped (killed?) while this call was in flight; its worst case is charged"}
        ledger.write(line)
        out.append(line)
    return out


def spent(run_dir: str | Path) -> float:
    """What every call in the ledger cost, or was charged where its cost is unknown: a
    study's budget starts from this on resume (attempts still open count at their worst case)."""
    total = 0.0
    for e in read_ledger(run_dir):
        cost = e.get("cost_usd")
        if cost is None:
            cost = e.get("charged_usd")
        total += float(cost or 0.0)
    total += sum(float(c.get("reserved_usd") or 0.0) for c in lost_calls(run_dir))
    return total
