"""Running a study's worlds in forked processes, one share each, with one writer.

Why: a simulated world is pure Python on one event loop, so a study of them uses one
core however many the machine has. Forked children each run a share of the worlds
(their own event loop, the same concurrency) and send every finished world back as
bytes already encoded for the records; the parent is the only writer, so the
records, the grouped syncs and what a kill can lose are those of a one-process run.
A child holds no record file open and writes nothing.

Only studies with no real-model route are run this way (see ``study.processes_for``):
real calls share a budget, rate limits and a call ledger that live in one process.

Failure is loud: a child that raises, or that ends without saying it finished its
share (killed, out of memory), makes :func:`run_forked` raise
:class:`WorldProcessError` once the other children are done; the worlds it did not
send are not recorded, so the next run of the same command runs them. When the
parent dies (kill -9), each child is killed with it (Linux ``PR_SET_PDEATHSIG``),
and otherwise ends at its next send, which finds the pipe closed.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.connection import Connection
from typing import Any

import msgspec

from workbench.errors import WorkbenchError

_DONE = b"\x00done"  # a child's last message: its share is finished


class WorldProcessError(WorkbenchError, RuntimeError):
    """A world process failed or ended before finishing its share: the study is not
    complete (exit status 1, as for infrastructure failures), and running the same
    command again runs what it did not finish."""

    exit_code = 1


def can_fork() -> bool:
    """Whether children can be forked here (not on Windows; not on macOS, where
    forking a process that has started system frameworks is unsafe)."""
    return "fork" in get_all_start_methods() and sys.platform.startswith("linux")


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent dies (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() == 1:  # pragma: no cover - the parent died before the request took effect
        os._exit(1)


def _child(conn: Connection, inherited: list[Connection], share: Sequence[Any],
           play: Callable[[Any], Awaitable[bytes]], concurrency: int,
           finish: Callable[[], bytes | None] | None) -> None:
    """A forked child: play every item of its share, send each result, then what
    ``finish`` gives (if anything), then _DONE."""
    for c in inherited:  # the parent's read ends: a dead parent must leave no reader of our pipe
        c.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
    _die_with_parent()
    # forked from inside the parent's running loop: this thread must not look like it runs one
    asyncio.events._set_running_loop(None)
    items = iter(share)

    async def worker() -> None:
        for item in items:
            conn.send_bytes(await play(item))

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(share))))))

    code = 0
    try:
        asyncio.run(main())
        last = finish() if finish is not None else None
        if last is not None:
            conn.send_bytes(last)
        conn.send_bytes(_DONE)
    except BrokenPipeError:  # the parent is gone: nobody records what we would send
        code = 1
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            conn.send_bytes(b"\x00error" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        except OSError:
            pass
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # no exit handlers: they are the parent's (its files, its bar, its servers)


async def run_forked(shares: Sequence[Sequence[Any]], play: Callable[[Any], Awaitable[bytes]], *,
                     concurrency: int, on_result: Callable[[bytes], None],
                     finish: Callable[[], bytes | None] | None = None) -> None:
    """Run ``play`` over each share in its own forked child, ``concurrency`` at a time
    in each; ``on_result`` gets every result (bytes), in this process, as it arrives,
    and last what ``finish`` returns in each child once its share is played (if not None).
    Raises WorldProcessError when a child failed (after every child has ended)."""
    loop = asyncio.get_running_loop()
    ctx = get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()  # what is buffered now is printed once, by us
    readers: list[Connection] = []
    procs = []
    for share in shares:
        r, w = ctx.Pipe(duplex=False)
        readers.append(r)
        p = ctx.Process(target=_child, args=(w, list(readers), share, play, concurrency, finish), daemon=True)
        p.start()
        w.close()  # only the child writes; its end closing is how we see it end
        procs.append(p)
    open_ = len(procs)
    finished = [False] * len(procs)
    errors: list[str] = []
    all_ended = loop.create_future()

    def readable(k: int) -> None:
        nonlocal open_
        conn = readers[k]
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            conn.close()
            procs[k].join(5)
            if not finished[k] and not any(e.startswith(f"world process {k + 1}:") for e in errors):
                errors.append(f"world process {k + 1}: ended before finishing its share "
                              f"(exit code {procs[k].exitcode})")
            open_ -= 1
            if open_ == 0 and not all_ended.done():
                all_ended.set_result(None)
            return
        if msg == _DONE:
            finished[k] = True
        elif msg.startswith(b"\x00error"):
            errors.append(f"world process {k + 1}: " + msg[6:].decode("utf-8", "replace"))
        else:
            try:
                on_result(msg)
            except BaseException as exc:  # noqa: BLE001 - raised from run_forked, not from the loop's callback
                if not all_ended.done():
                    all_ended.set_exception(exc)

    for k, r in enumerate(readers):
        loop.add_reader(r.fileno(), readable, k)
    try:
        await all_ended
    finally:
        for k, p in enumerate(procs):
            if p.is_alive():
                p.kill()  # interrupted, or a result could not be recorded: the rest is not wanted
            p.join(5)
            if not readers[k].closed:
                loop.remove_reader(readers[k].fileno())
                readers[k].close()
    if errors:
        raise WorldProcessError("; ".join(errors) + ": the worlds it did not finish are not recorded; "
                                "run the same command again to run them")


def encode(*parts: Any) -> bytes:
    """A result as bytes for the pipe (msgpack: the encoded record lines go as they are)."""
    return msgspec.msgpack.encode(parts)


def decode(msg: bytes) -> Any:
    return msgspec.msgpack.decode(msg)
