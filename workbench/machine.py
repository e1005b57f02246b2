"""What this machine can give a run, checked before it starts: open files and disk space.

A study of real models holds a connection (a file descriptor) per call in flight; 300
concurrent worlds of 4 agents under the common soft limit of 1,024 open files died with a
raw traceback after a thousand answered requests and nothing recorded. So a run that may
need more descriptors than the soft limit first raises it to the hard limit (allowed
without privileges), and is refused with the numbers when even that is too few. A run
also needs room for its records; a disk too full to hold them is refused up front."""
from __future__ import annotations

import shutil
from pathlib import Path

BASE_FILES = 128  # the interpreter, the record files, the ledger, a kernel's sockets
FILES_PER_CALL = 2  # a connection, and the room litellm's HTTP client keeps per connection
AGENTS_PER_WORLD = 8  # the most calls one world of a shipped kind has in flight at once (4 agents and a monitor, ...)
BYTES_PER_WORLD = 64_000  # a generous world of records (steps, world line, ledger lines)
MIN_FREE_BYTES = 200_000_000


def files_needed(concurrency: int) -> int:
    return BASE_FILES + FILES_PER_CALL * AGENTS_PER_WORLD * max(1, concurrency)


def file_limit_problem(concurrency: int) -> str | None:
    """None when the open-file limit allows ``concurrency`` worlds of real-model calls (after
    raising the soft limit to the hard one where that is needed); else what to do, with numbers."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to check
        return None
    need = files_needed(concurrency)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    if hard == resource.RLIM_INFINITY or hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else hard, hard))
        return None
    return (f"{concurrency} worlds in flight may hold about {need} open files (connections), and this process may "
            f"open {soft} (hard limit {hard}): run with --concurrency {max(1, (hard - BASE_FILES) // (FILES_PER_CALL * AGENTS_PER_WORLD))} "
            f"or less, or raise the limit (ulimit -n {need})")


def disk_problem(out_dir: str | Path, worlds: int) -> str | None:
    """None when the run directory's disk has room for ``worlds`` more worlds of records."""
    folder = Path(out_dir).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    need = max(MIN_FREE_BYTES, worlds * BYTES_PER_WORLD)
    if free >= need:
        return None
    return (f"{folder} has {free / 1e6:.0f} MB free and {worlds} worlds may write about {need / 1e6:.0f} MB: free some "
            "space or write the run elsewhere (--out)")
