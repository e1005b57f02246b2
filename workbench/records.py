"""Run directories: append-only JSON Lines and a manifest.

Layout of a run directory::

    manifest.json   what ran: versions, git revision, hashes of params and templates, runs
    steps.jsonl     one line per model call, appended when its world finishes
    worlds.jsonl    one line per finished world, written after that world's steps
    rows.bin        per-world metric rows a world kind computed as its worlds were
                    recorded, and every world's envelope: a cache that analysis uses
                    only while it is provably current (see :func:`read_rows`,
                    :func:`_kept_envelopes`); deleting it changes nothing but speed

A world's steps are appended first and its world line last, so the world line is
the commit point. Writes are grouped: finished worlds wait in memory until a batch
is full or 0.2 s have passed since the first of them, whichever comes first; then
every pending step line is written and synced, and only after that every pending
world line, which is synced in turn (two fsyncs per batch, never a world line
ahead of its steps). A kill therefore loses at most the worlds in flight and the
finished worlds not yet synced (at most one batch, finished less than 0.2 s
before the kill). On resume, a world with a
world line is finished and skipped (unless that line records an infrastructure
failure: then it runs again, and its new line supersedes the old); anything
else is run again. Steps left by
an unfinished world are ignored on load because each step carries the ``run``
number of the invocation that wrote it, and only steps whose run matches their
world's run belong to it. A half-written last line (a kill mid-write) is
detected and cut off before new lines are appended.
"""
from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import importlib.metadata
import json
import os
import platform
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from workbench.errors import MissingFileError, UnknownNameError
from workbench.schema import SCHEMA_VERSION, check_step, check_world, migrate_step, migrate_world, stamp

STEPS = "steps.jsonl"
CUT = "cut.jsonl"  # worlds cut by the study budget: recorded, but not finished
WORLDS = "worlds.jsonl"
MANIFEST = "manifest.json"
ROWS = "rows.bin"
_PACKAGES = ("stigmergy-workbench", "pydantic", "PyYAML", "pandas", "numpy", "statsmodels", "scipy",
             "litellm", "papermill", "nbconvert", "plotly", "ipywidgets", "jupyterlab")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps(record: dict[str, Any]) -> str:
    """One JSON line. ASCII-escaped: model text may hold lone surrogates (from a
    JSON escape such as \\ud800) that cannot be written as UTF-8."""
    return json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=_json_default)


def _enc_hook(obj: Any) -> Any:
    try:
        return _json_default(obj)
    except TypeError:
        raise NotImplementedError(f"not JSON serialisable: {type(obj).__name__}") from None


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)
_DECODER = msgspec.json.Decoder()


def as_record(obj: Any) -> Any:
    """A dataclass (or any JSON-like value) as plain dicts and lists, with fresh
    containers, built in C (msgspec): what ``dataclasses.asdict`` gives for the JSON
    a record is written as, without its per-value deep copies. Falls back to
    ``asdict`` for a value msgspec cannot convert."""
    try:
        return msgspec.to_builtins(obj, enc_hook=_enc_hook)
    except (TypeError, NotImplementedError, RecursionError, ValueError):
        import dataclasses

        return dataclasses.asdict(obj)


_MESSAGE_JSON = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(m, ensure_ascii=False), built once
_json_str = json.encoder.encode_basestring  # a str as JSON with non-ASCII kept (what ensure_ascii=False writes)


def _message_json(message: dict[str, Any]) -> str:
    """``json.dumps(message, ensure_ascii=False)``: a plain chat message (role, then
    content, both text) is written directly, any other through the encoder."""
    if len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if type(role) is str and type(content) is str and next(iter(message)) == "role":
            return '{"role": ' + _json_str(role) + ', "content": ' + _json_str(content) + "}"
    return _MESSAGE_JSON(message)


class MessagesDigest:
    """SHA-256 of ``json.dumps(messages[:n], ensure_ascii=False)`` for a conversation
    that only grows (the bytes a step record's ``messages_sha256`` hashes), kept
    incrementally: each message is encoded and hashed once, and a digest costs one
    copy of the running hash. The same bytes as encoding the whole list each time."""

    __slots__ = ("_hash", "_n")

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b"[")
        self._n = 0

    def hexdigest(self, messages: list[dict[str, Any]], n: int) -> str:
        if n < self._n:  # an earlier prefix than the one kept: hash it anew
            return hashlib.sha256(json.dumps(messages[:n], ensure_ascii=False).encode()).hexdigest()
        h, k = self._hash, self._n
        for m in messages[k:n]:
            h.update(((", " if k else "") + _message_json(m)).encode())
            k += 1
        self._n = k
        final = h.copy()
        final.update(b"]")
        return final.hexdigest()


def dumpb(record: dict[str, Any]) -> bytes:
    """One JSON line as UTF-8 bytes, newline included: the fast path of the writer
    (msgspec, in C). Same separators as :func:`dumps`; non-ASCII text is written as
    UTF-8 instead of escaped (both load alike). Where msgspec cannot write a record
    (a lone surrogate in model text, a value it does not know) the line falls back
    to :func:`dumps`; non-finite floats, which JSON lacks, become ``null``."""
    try:
        return _ENCODER.encode(record) + b"\n"
    except (UnicodeEncodeError, TypeError, NotImplementedError, RecursionError):
        return dumps(record).encode("ascii") + b"\n"


def repair_tail(path: Path) -> int:
    """Cut a half-written final line; return how many bytes were dropped."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            # the last complete line may still be corrupt JSON if a writer was killed mid-line earlier
            return 0
        pos = size - 1
        chunk = 65536
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            data = fh.read(pos - start)
            nl = data.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                fh.truncate(keep)
                return size - keep
            pos = start
        fh.truncate(0)
        return size


_BLOCK = 1 << 22  # bytes decoded at once by read_jsonl (whole lines)


def read_jsonl(path: Path, problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every well-formed line; malformed ones are skipped and reported in ``problems``.

    Lines are decoded a block of whole lines at a time (msgspec ``decode_lines``, in
    C); a block msgspec refuses is read again line by line, msgspec first and json
    for what it refuses (lone surrogates, NaN), so the records are the same."""
    if not path.exists():
        return
    line_no = 0  # lines before the block
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            if not block.endswith(b"\n"):
                block += fh.readline()
            try:
                recs = _DECODER.decode_lines(block)
            except msgspec.DecodeError:
                recs = None
            if recs is not None:
                line_no += block.count(b"\n")
                for rec in recs:
                    if isinstance(rec, dict):
                        yield rec
                continue
            lines = block.split(b"\n")
            if not lines[-1]:
                lines.pop()
            for n, line in enumerate(lines, line_no + 1):
                rec = _decode_line(line, path, n, problems)
                if isinstance(rec, dict):
                    yield rec
            line_no += len(lines)


def decode_record(line: bytes) -> Any:
    """One record line as :func:`read_jsonl` decodes it; ValueError if it is not JSON."""
    try:  # msgspec first (a few times faster); json for what it refuses (lone surrogates, NaN)
        return _DECODER.decode(line)
    except msgspec.DecodeError:
        return json.loads(line)


def _decode_line(line: bytes, path: Path, n: int, problems: list[str] | None) -> Any:
    if not line.strip():
        return None
    try:
        return decode_record(line)
    except ValueError:
        if problems is not None:
            problems.append(f"{path.name}:{n}: malformed line skipped")
        return None


def encode_world(world: dict[str, Any], steps: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """A finished world's record line and its step lines, stamped with the schema
    version, as the writer appends them."""
    stamp(world)
    for s in steps:
        stamp(s)
    step_lines = b""
    if steps:
        try:  # every step line in one call (msgspec, in C): the same bytes as one dumpb per step
            step_lines = _ENCODER.encode_lines(steps)
        except (UnicodeEncodeError, TypeError, NotImplementedError, RecursionError):
            step_lines = b"".join(dumpb(s) for s in steps)
    return dumpb(world), step_lines


Items = list[tuple[dict[str, Any], list[dict[str, Any]]]]  # worlds with their steps, as load_run reads them


@dataclass(frozen=True)
class RowKeeper:
    """How a world kind keeps per-world rows beside its records (``rows.bin``), so that
    analysis at scale reads them instead of computing them again from every step.

    ``key`` names the code that computes the rows (a digest of it): rows under another
    key are never used. ``pack`` turns worlds with their steps, decoded from the very
    lines just written, into one opaque blob (None: nothing to keep for these)."""

    key: str
    pack: Callable[[Items], bytes | None]


_ROWS_MAGIC = b"WBR1"
_ROWS_HEAD = struct.Struct("<4sI")  # magic, header length; then the header (JSON), then _ROWS_BLOB, then the blob
_ROWS_BLOB = struct.Struct("<QI")  # blob length, its crc32


def decode_items(lines: list[tuple[bytes, bytes]]) -> Items:
    """Worlds and their steps from their record lines (:func:`encode_world`), as
    ``load_run`` gives them: a world's steps in application order."""
    items = []
    for world_line, step_lines in lines:
        try:
            steps = _DECODER.decode_lines(step_lines) if step_lines else []
        except msgspec.DecodeError:  # what msgspec refuses (lone surrogates): line by line, as read_jsonl does
            steps = [decode_record(line) for line in step_lines.splitlines() if line.strip()]
        steps.sort(key=lambda s: s["seq"])
        items.append((decode_record(world_line), steps))
    return items


def _row_frames(data: bytes) -> tuple[list[tuple[dict[str, Any], bytes]], int]:
    """The whole, intact frames of a rows file, and where they end (a torn or damaged
    frame and everything after it are not frames)."""
    frames: list[tuple[dict[str, Any], bytes]] = []
    at = 0
    while at + _ROWS_HEAD.size <= len(data):
        magic, hlen = _ROWS_HEAD.unpack_from(data, at)
        start = at + _ROWS_HEAD.size + hlen + _ROWS_BLOB.size
        if magic != _ROWS_MAGIC or start > len(data):
            break
        blen, crc = _ROWS_BLOB.unpack_from(data, start - _ROWS_BLOB.size)
        blob = data[start:start + blen]
        if len(blob) != blen or zlib.crc32(blob) != crc:
            break
        try:
            header = json.loads(data[at + _ROWS_HEAD.size:start - _ROWS_BLOB.size])
        except ValueError:
            break
        if not isinstance(header, dict):
            break
        frames.append((header, blob))
        at = start + blen
    return frames, at


def _file_stamps(out_dir: Path) -> dict[str, list[int]]:
    """Size and modification time of the record files: what says they have not changed."""
    stamps = {}
    for name in (STEPS, WORLDS):
        try:
            st = os.stat(out_dir / name)
        except FileNotFoundError:
            continue
        stamps[name] = [st.st_size, st.st_mtime_ns]
    return stamps


def read_rows(out_dir: str | Path, key: str) -> list[bytes] | None:
    """The row blobs kept under ``key`` in a run directory, or None where they cannot be
    trusted to describe its records as they are now: no rows file, or its last frame
    was written when the record files had another size or modification time (worlds
    appended since without rows, a record edited or cut by hand, a rows frame lost).
    Which worlds the blobs cover (of which run) is for the kind to check."""
    frames = _current_frames(Path(out_dir))
    if frames is None:
        return None
    return [blob for header, blob in frames if header.get("kind", "rows") == "rows" and header.get("key") == key]


def _current_frames(out: Path) -> list[tuple[dict[str, Any], bytes]] | None:
    """The frames of a rows file whose last frame was written when the record files had
    the size and modification time they have now; None otherwise (see :func:`read_rows`)."""
    try:
        data = (out / ROWS).read_bytes()
    except FileNotFoundError:
        return None
    frames, _ = _row_frames(data)
    if not frames or frames[-1][0].get("files") != _file_stamps(out):
        return None
    return frames


def _kept_envelopes(out: Path) -> list[Any] | None:
    """Every world's envelope as the writer kept it beside its lines (an "envelopes"
    frame per sync), when that is every world line of worlds.jsonl: the rows file was
    begun on an empty worlds file, every sync since wrote its worlds' envelopes, and
    the record files are as its last frame says. Else None (read them from worlds.jsonl)."""
    frames = _current_frames(out)
    if frames is None or not all(h.get("from_start") is True for h, _ in frames):
        return None
    latest: dict[str, _Envelope] = {}
    try:
        for header, blob in frames:
            if header.get("kind") == "gap":
                return None
            if header.get("kind") == "envelopes":
                for e in _PACKED_ENVELOPES.decode(blob):
                    if e.schema_version != SCHEMA_VERSION:
                        return None
                    latest[e.world_id] = e  # the latest attempt of a world supersedes earlier ones
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return sorted(latest.values(), key=lambda w: w.world_id)


def keep_rows_if_current(out_dir: Path) -> bool:
    """Before a run appends to a directory: keep its rows file only if it describes the
    record files as they are (see :func:`read_rows`), cut back to its last whole frame;
    else delete it, since rows appended after untrustworthy ones would vouch for them.
    (After a kill the records usually went on past the last rows: analysis then
    computes every row from the records.) Whether it was kept."""
    path = out_dir / ROWS
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    frames, end = _row_frames(data)
    if not frames or frames[-1][0].get("files") != _file_stamps(out_dir):
        path.unlink()
        return False
    if end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(end)
    return True


def _rows_from_start(out_dir: Path) -> bool:
    """Whether a rows file (kept or about to be begun) holds every world line's envelope:
    begun on an empty worlds file, and so far always."""
    frames = _current_frames(out_dir)
    if frames is not None:
        return all(h.get("from_start") is True for h, _ in frames)
    worlds = out_dir / WORLDS
    return not (out_dir / ROWS).exists() and (not worlds.exists() or worlds.stat().st_size == 0)


class RunWriter:
    """Appends finished worlds to a run directory (single writer per directory).

    Inside a running event loop (a study) finished worlds are grouped: they are
    written and synced when ``batch`` of them are pending or ``interval`` seconds
    after the first of them finished, whichever comes first (see the module
    docstring for what a kill can lose). :meth:`close` (or :meth:`sync`) writes
    whatever is pending. Outside an event loop every world is written and synced
    at once, as before.

    With a :class:`RowKeeper`, the worlds' rows are made and appended to ``rows.bin``
    after their lines, ``rows_batch`` worlds at a time (and at :meth:`close`)."""

    rows_batch = 512  # worlds per part of kept rows

    def __init__(self, out_dir: Path, *, batch: int = 64, interval: float = 0.2,
                 rows: RowKeeper | None = None) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.repaired = {name: repair_tail(self.dir / name) for name in (STEPS, WORLDS)}
        self.rows = rows
        self.rows_error: str | None = None  # why rows stopped being kept in this run (the kind's pack raised)
        self._from_start = False  # whether the rows file holds every world line's envelope
        if rows is not None:
            keep_rows_if_current(self.dir)
            self._from_start = _rows_from_start(self.dir)
        self._row_lines: list[tuple[bytes, bytes]] = []  # worlds written whose rows are not made yet
        self._row_blobs: list[bytes] = []  # pending rows made elsewhere (world processes)
        self._new_worlds: list[bytes] = []  # world lines written whose envelopes are not kept yet
        self.batch = max(1, batch)
        self.interval = interval
        self.syncs = 0  # fsync calls made, for benchmarks and tests
        self._steps: list[bytes] = []
        self._worlds: list[bytes] = []
        self._pending = 0
        self._timer: Any = None  # the loop's TimerHandle of the next sync by time
        self._error: Exception | None = None  # a sync by the timer that failed (disk full, ...)

    def _raise_kept(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def append_cut(self, world: dict[str, Any]) -> None:
        with (self.dir / CUT).open("a", encoding="utf-8") as fh:
            fh.write(dumps(world) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.syncs += 1

    def append_world(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        self._raise_kept()
        self.append_lines(*encode_world(world, steps))

    def append_lines(self, world_line: bytes, step_lines: bytes, *, rows: bool = True) -> None:
        """A finished world already encoded (:func:`encode_world`), e.g. by a world
        process (``rows`` False: its rows come separately, by :meth:`append_rows`)."""
        self._raise_kept()
        if step_lines:
            self._steps.append(step_lines)
        self._worlds.append(world_line)
        if rows and self.rows is not None:
            self._row_lines.append((world_line, step_lines))
        self._pending += 1
        if self._pending >= self.batch:
            self.sync()
            return
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.sync()  # no loop to wake us: write now
                return
            self._timer = loop.call_later(self.interval, self._sync_by_timer)

    def append_rows(self, blob: bytes) -> None:
        """Rows packed elsewhere by this writer's :class:`RowKeeper` (a world process),
        written after the worlds they describe, at the next sync."""
        self._row_blobs.append(blob)

    def _sync_by_timer(self) -> None:
        self._timer = None
        try:
            self.sync()
        except Exception as exc:  # noqa: BLE001 - kept and raised by the next append or close
            self._error = exc

    def sync(self) -> None:
        """Write and sync every pending step line, then every pending world line."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            steps, worlds = self._steps, self._worlds
            self._steps, self._worlds, self._pending = [], [], 0
            for name, lines in ((STEPS, steps), (WORLDS, worlds)):
                if not lines and name == STEPS:
                    continue
                with (self.dir / name).open("ab") as fh:
                    fh.write(b"".join(lines))
                    fh.flush()
                    os.fsync(fh.fileno())
                self.syncs += 1
            if self.rows is not None:
                self._new_worlds += worlds
        self._write_rows()

    def _write_rows(self, final: bool = False) -> None:
        """Rows of worlds already written, stamped with the record files' size and time
        as they are now (not synced: a cache, checked when read). Rows made here wait
        for ``rows_batch`` worlds (or the end): fewer, larger parts are faster to read."""
        ready = len(self._row_lines) if final else len(self._row_lines) // self.rows_batch * self.rows_batch
        lines, self._row_lines = self._row_lines[:ready], self._row_lines[ready:]
        blobs, self._row_blobs = self._row_blobs, []
        new_worlds, self._new_worlds = self._new_worlds, []
        if self.rows is None or self.rows_error is not None or not (lines or blobs or new_worlds):
            return
        frames: list[tuple[str, bytes]] = []
        if new_worlds:  # every world line's envelope, so that analysis need not read worlds.jsonl for them
            try:
                frames.append(("envelopes", msgspec.msgpack.encode([_ENVELOPES.decode(w) for w in new_worlds])))
            except (msgspec.DecodeError, msgspec.ValidationError):  # not an envelope msgspec reads: worlds.jsonl will say
                frames.append(("gap", b""))
        try:
            for at in range(0, len(lines), self.rows_batch):
                made = self.rows.pack(decode_items(lines[at:at + self.rows_batch]))
                if made is not None:
                    blobs.append(made)
        except Exception as exc:  # noqa: BLE001 - the records are written; only the cache stops
            self.rows_error = f"{type(exc).__name__}: {exc}"
            print(f"warning: per-world rows are no longer kept beside {self.dir} in this run ({self.rows_error}); "
                  "analysis computes them from the records instead", file=sys.stderr)
            return
        frames += [("rows", blob) for blob in blobs]
        if not frames:
            return
        stamps = _file_stamps(self.dir)
        with (self.dir / ROWS).open("ab") as fh:
            for kind, blob in frames:
                header = json.dumps({"key": self.rows.key, "kind": kind, "files": stamps,
                                     "from_start": self._from_start}).encode()
                fh.write(_ROWS_HEAD.pack(_ROWS_MAGIC, len(header)) + header
                         + _ROWS_BLOB.pack(len(blob), zlib.crc32(blob)) + blob)

    def close(self) -> None:
        self.sync()
        self._write_rows(final=True)
        self._raise_kept()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def world_id(cell_id: str, world_index: int) -> str:
    """A world's name. Never parsed: records carry ``cell_id`` and ``world_index`` as fields."""
    return f"{cell_id}-{world_index:04d}"


class LazySteps(dict[str, list[dict[str, Any]]]):
    """A run's steps by world id (as ``RunRecords.steps``), read from ``steps.jsonl``
    the first time anything asks for them: a command that never reads a step (or
    streams them itself, as the shared-store metrics do at scale) never holds them.
    ``sources`` names what they are read from: each steps file with the run of each
    world whose steps it holds."""

    def __init__(self, sources: list[tuple[Path, dict[str, Any]]], problems: list[str]) -> None:
        super().__init__()
        self.sources = sources
        self._problems: list[str] | None = problems  # where the lines skipped as malformed are reported

    @property
    def loaded(self) -> bool:
        return self._problems is None

    def load(self) -> LazySteps:
        if self._problems is not None:
            problems, self._problems = self._problems, None
            with collector_paused():
                for path, want in self.sources:
                    dict.update(self, _read_steps(path, want, problems))
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # a copy or a pickle is a plain dict of the steps
        return (dict, (dict(self.load().items()),))


def _loading(name: str) -> Callable[..., Any]:
    method = getattr(dict, name)

    def call(self: LazySteps, *args: Any, **kwargs: Any) -> Any:
        return method(self.load(), *args, **kwargs)

    call.__name__ = name
    return call


for _name in ("__getitem__", "__contains__", "__iter__", "__len__", "__eq__", "__ne__", "__repr__", "__or__",
              "__reversed__", "get", "items", "keys", "values", "copy", "pop", "popitem", "setdefault", "update",
              "clear", "__setitem__", "__delitem__"):
    setattr(LazySteps, _name, _loading(_name))


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while records are read: records are trees of
    dicts and lists (no cycles to find), and its passes over the millions of
    containers a large run set holds were most of a load's time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Readable(msgspec.Struct):
    """Read like the dict a record decodes to (``w["cell_id"]``, ``w.get("run")``), for
    functions written for whole records; a field the envelope lacks is a KeyError."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.__struct_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.__struct_fields__ else default

    def __contains__(self, key: object) -> bool:
        return key in self.__struct_fields__

    def keys(self) -> tuple[str, ...]:
        return self.__struct_fields__


class _Obj(msgspec.Struct, frozen=True):
    """Any JSON object, its contents skipped."""


class _AgentRoute(_Readable):
    route: Any = ""


class _Envelope(_Readable, kw_only=True):
    """A world record's envelope (:class:`workbench.schema.WorldRecord`, as strict) with
    only the agents' routes: what designs, kinds and the list of worlds read, decoded
    without building the rest of the record (prompts, store logs, submissions)."""

    schema_version: int = 0
    world_id: str
    cell_id: str
    world_index: int
    world_kind: str
    seed: int
    run: int
    cell: dict[str, Any]
    valid: bool
    failed: dict[str, Any] | None
    agents: list[_AgentRoute]
    metrics: _Obj = _Obj()  # checked to be an object, not read
    cell_label: str = ""
    study: str | None = None
    design: str = ""  # the cell's design fingerprint (workbench.design); "" in records from before it
    n_steps: int | None = None  # the steps the world recorded (a damaged steps file is told by it)


_ENVELOPES = msgspec.json.Decoder(_Envelope)
_PACKED_ENVELOPES = msgspec.msgpack.Decoder(list[_Envelope])


def _envelopes(path: Path) -> list[Any] | None:
    """Each world's envelope (the latest line of each world), in world-id order, or None
    where only the whole records can say what the file holds: a line that is not a
    current-schema envelope (malformed, of an older or newer schema: :func:`load_run`
    migrates, skips or names it). Read like the dicts of whole records (``w["run"]``)."""
    latest: dict[str, _Envelope] = {}
    try:
        with path.open("rb") as fh:
            while block := fh.read(_BLOCK * 4):
                if not block.endswith(b"\n"):
                    block += fh.readline()
                for e in _ENVELOPES.decode_lines(block):
                    if e.schema_version != SCHEMA_VERSION:
                        return None
                    latest[e.world_id] = e  # the latest attempt of a world supersedes earlier ones
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return sorted(latest.values(), key=lambda w: w.world_id)


@dataclass
class RunRecords:
    """A run set's records. ``load_run`` reads the worlds' envelopes at once and the
    whole world records (``worlds``, a plain list) and the steps (a LazySteps) the
    first time anything asks for them, so a command that needs only the envelopes
    (``light_worlds``) and kept rows never holds 100,000 whole records."""

    dir: Path
    manifest: dict[str, Any]
    worlds: list[dict[str, Any]]
    steps: dict[str, list[dict[str, Any]]]  # world_id -> its steps in application order (load_run: a LazySteps)
    problems: list[str]  # lines skipped as malformed (those of steps.jsonl once the steps are read)
    # frames derived from these records, by name and rules (see ``derived_frame``): tables
    # built from one load share them instead of recomputing every world's metrics each time
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    # the worlds' envelopes (see light_worlds), and what reads the whole worlds when first asked
    # for: while it is set, ``worlds`` is not an attribute yet (see __getattr__)
    envelopes: list[Any] | None = field(default=None, repr=False, compare=False)
    read_worlds: Callable[[], list[dict[str, Any]]] | None = field(default=None, repr=False, compare=False)
    # world id -> the cell id analysis files it under, for worlds of a cell that ran under a
    # second (third...) design (see split_designs); empty when every cell ran under one
    design_split: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.read_worlds is not None:
            del self.worlds

    def __getattr__(self, name: str) -> Any:
        # only for attributes not set: ``worlds`` before it is read (a real list, once)
        read = self.__dict__.get("read_worlds")
        if name != "worlds" or read is None:
            raise AttributeError(name)
        with collector_paused():
            worlds = read()
        self.read_worlds = None
        self.worlds = worlds
        self.__dict__["_worlds_read"] = id(worlds)
        return worlds

    @property
    def worlds_read(self) -> bool:
        """Whether the whole world records are in memory."""
        return "worlds" in self.__dict__

    def light_worlds(self) -> list[Any]:
        """The worlds, or only their envelopes (ids, run, cell, validity, agents' routes;
        read like the records' dicts) while the whole records have not been read: for
        what needs only those (the design, the kind, which worlds there are)."""
        if not self.worlds_read and self.envelopes is not None:
            return self.envelopes
        return self.worlds

    def derived_value(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """``build()`` once per key while worlds and steps are the same lists (shared:
        callers must not change it); reading unread worlds or steps is no change."""
        worlds = self.__dict__.get("worlds")  # not read here
        stamp = (id(worlds) if worlds is not None else None, _size(worlds), id(self.steps), _size(self.steps))
        hit = self.derived.get(key)
        if hit is None or hit[0] != stamp and not (
                hit[0][2] == stamp[2] and hit[0][3] in (-1, stamp[3])
                and (hit[0][:2] == stamp[:2]
                     or hit[0][:2] == (None, -1) and stamp[0] == self.__dict__.get("_worlds_read"))):
            hit = self.derived[key] = (stamp, build())
        return hit[1]

    def derived_frame(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """A frame built once per key (see ``derived_value``), as a copy each time (a
        table may add columns to the frame it is given, or change values). Under
        pandas' copy-on-write (always on from pandas 3) a shallow copy is such a copy:
        the data is copied only where one of them is written to."""
        return self.derived_value(key, build).copy(deep=not _copy_on_write())

    def world(self, world_id: str) -> dict[str, Any]:
        for w in self.worlds:
            if w["world_id"] == world_id:
                return w
        raise UnknownNameError(f"no finished world {world_id!r} in {self.dir}")


def _copy_on_write() -> bool:
    import pandas as pd

    return int(pd.__version__.split(".")[0]) >= 3 or pd.options.mode.copy_on_write is True


def _size(records: Any) -> int:
    """How many records a list or dict holds, or -1 for one not read yet (its length would read it)."""
    if records is None or isinstance(records, LazySteps) and not records.loaded:
        return -1
    return len(records)


def latest_worlds(out_dir: Path) -> dict[str, dict[str, Any]]:
    """World records by id, the latest of each: a world that ended in an infrastructure
    failure is run again on resume, and its new record (a later run) supersedes the old
    one, which stays in the file as history."""
    done: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(Path(out_dir) / WORLDS):
        done[str(rec.get("world_id"))] = migrate_world(rec)
    return done



class _StepKey(msgspec.Struct):
    world_id: str = ""
    run: int = 0


_STEP_KEYS = msgspec.json.Decoder(_StepKey)
DAMAGE_CHECK_WORLDS = 20_000  # above this, step counts are checked only when a torn tail was cut


def step_counts(out_dir: Path) -> dict[tuple[str, int], int]:
    """How many readable step lines each (world, run) has in a run directory."""
    counts: dict[tuple[str, int], int] = {}
    path = Path(out_dir) / STEPS
    if not path.exists():
        return counts
    with path.open("rb") as fh:
        for line in fh:
            try:
                k = _STEP_KEYS.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # an unreadable line: a step missing from its world, counted as such
            counts[(k.world_id, k.run)] = counts.get((k.world_id, k.run), 0) + 1
    return counts


def incomplete_worlds(out_dir: Path, worlds: dict[str, dict[str, Any]] | list[Any]) -> dict[str, tuple[int, int]]:
    """Worlds whose readable steps (of their latest run) are not the ``n_steps`` their record says:
    world id -> (steps found, steps recorded). A torn or corrupt step line shows here."""
    counts = step_counts(out_dir)
    items = worlds.values() if isinstance(worlds, dict) else worlds
    out = {}
    for w in items:
        n = w.get("n_steps")
        if isinstance(n, int):
            got = counts.get((w["world_id"], int(w.get("run") or 0)), 0)
            if got != n:
                out[w["world_id"]] = (got, n)
    return out


def damage(records: RunRecords, check_steps: bool | None = None) -> list[str]:
    """What is wrong with a run set's records, one line each: unreadable lines of its files
    (torn, corrupt) and worlds whose steps are fewer or more than their record says. Step
    counts are checked for run sets of at most DAMAGE_CHECK_WORLDS worlds unless asked."""
    out = list(records.problems)
    if check_steps is None:
        check_steps = len(records.light_worlds()) <= DAMAGE_CHECK_WORLDS
    if check_steps and not is_batch_dir(records.dir):
        found = incomplete_worlds(records.dir, records.light_worlds())  # envelopes carry n_steps: no whole record read
        out += [f"world {wid}: {got} of its {n} steps readable in {STEPS}" for wid, (got, n) in sorted(found.items())]
    return out


BATCH_CELLS = "cells"  # a batch run keeps one run directory per cell under this folder


def is_batch_dir(path: Path) -> bool:
    return (Path(path) / BATCH_CELLS).is_dir() and not (Path(path) / WORLDS).exists()


def load_run(out_dir: str | Path) -> RunRecords:
    """The finished worlds of a run directory, or of every cell of a batch run (their
    envelopes now, the whole records and the steps when first asked for; see
    :func:`collector_paused` for the collector)."""
    with collector_paused():
        return _load_run(Path(out_dir))


def _load_run(out: Path) -> RunRecords:
    if is_batch_dir(out):
        return _load_batch(out)
    if not (out / WORLDS).exists() and not (out / MANIFEST).exists():
        raise MissingFileError(f"{out} is not a run directory (no {WORLDS} or {MANIFEST})")
    problems: list[str] = []
    manifest = json.loads((out / MANIFEST).read_text()) if (out / MANIFEST).exists() else {}
    envelopes = _kept_envelopes(out) if (out / ROWS).exists() else None
    if envelopes is None:
        envelopes = _envelopes(out / WORLDS) if (out / WORLDS).exists() else []
    if envelopes is None:  # only the whole records can say (older schema, a malformed line): read now
        worlds = _read_worlds(out, problems)
        want = {w["world_id"]: w.get("run") for w in worlds}
        split = split_designs(worlds, manifest)
        return RunRecords(out, manifest, worlds, LazySteps([(out / STEPS, want)], problems), problems,
                          design_split=split)
    want = {w["world_id"]: w["run"] for w in envelopes}
    split = split_designs(envelopes, manifest)
    read = functools.partial(_read_worlds, out, problems)
    if split:
        read = functools.partial(_apply_split, read, split, manifest)
    # the whole records and the steps are read when first asked for
    return RunRecords(out, manifest, [], LazySteps([(out / STEPS, want)], problems), problems, envelopes=envelopes,
                      read_worlds=read, design_split=split)


def split_designs(worlds: list[Any], manifest: dict[str, Any]) -> dict[str, str]:
    """Worlds of one cell id recorded under two or more design fingerprints (a run resumed
    with ``--accept-changes``) are two or more cells to every table, contrast and comparison,
    never one: the first design (by the run that first recorded it) keeps the cell id, the
    k-th becomes ``<cell id>.d<k>`` with its label marked ``[design k]``. Applied in place to
    these worlds (envelopes or whole records) and to the manifest's cells; returns world id ->
    new cell id for the worlds moved. Nothing on disk changes. Records without a fingerprint
    (from before fingerprints) stay with the cell's first design: nothing says they differ."""
    first_run: dict[tuple[str, str], int] = {}
    for w in worlds:
        fp = w.get("design") or ""
        if fp:
            key = (w["cell_id"], fp)
            first_run[key] = min(first_run.get(key, 1 << 30), int(w.get("run") or 0))
    per_cell: dict[str, list[tuple[int, str]]] = {}
    for (cell, fp), run in first_run.items():
        per_cell.setdefault(cell, []).append((run, fp))
    renamed: dict[tuple[str, str], tuple[str, int]] = {}
    for cell, found in per_cell.items():
        for k, (_, fp) in enumerate(sorted(found)[1:], start=2):
            renamed[(cell, fp)] = (f"{cell}.d{k}", k)
    if not renamed:
        return {}
    cells = manifest.setdefault("cells", {})
    for (cell, fp), (new, k) in renamed.items():
        base = cells.get(cell, {})
        cells[new] = {**base, "label": f"{base.get('label') or cell} [design {k}]", "design_of": cell, "design": fp}
    moved: dict[str, str] = {}
    for w in worlds:
        hit = renamed.get((w["cell_id"], w.get("design") or ""))
        if hit is not None:
            moved[w["world_id"]] = hit[0]
            _move(w, hit[0], cells[hit[0]]["label"])
    return moved


def _move(world: Any, cell_id: str, label: str) -> None:
    if isinstance(world, dict):
        world["cell_id"], world["cell_label"] = cell_id, label
    else:  # an envelope (a msgspec struct)
        world.cell_id, world.cell_label = cell_id, label


def _apply_split(read: Callable[[], list[dict[str, Any]]], split: dict[str, str],
                 manifest: dict[str, Any]) -> list[dict[str, Any]]:
    worlds = read()
    cells = manifest.get("cells", {})
    for w in worlds:
        new = split.get(w["world_id"])
        if new is not None:
            _move(w, new, cells.get(new, {}).get("label") or new)
    return worlds


def _read_worlds(out: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The world records of a run directory, the latest line of each world, in world-id order."""
    worlds: dict[str, dict[str, Any]] = {}
    worlds_file = f"{out / WORLDS}"  # named in a failed check
    if not (out / WORLDS).exists():
        return []
    for n, rec in enumerate(read_jsonl(out / WORLDS, problems), start=1):
        check_world(migrate_world(rec), f"{worlds_file} record {n}")
        worlds[str(rec.get("world_id"))] = rec  # the latest attempt of a world supersedes earlier ones
    return sorted(worlds.values(), key=lambda w: w["world_id"])


def _read_steps(path: Path, want: dict[str, Any], problems: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The steps of each wanted world (those of its latest run), in application order."""
    steps: dict[str, list[dict[str, Any]]] = {wid: [] for wid in want}
    steps_file = f"{path}"  # named in a failed check
    for n, s in enumerate(read_jsonl(path, problems), start=1):
        wid = s.get("world_id")
        if wid in want and s.get("run") == want[wid]:
            check_step(migrate_step(s), f"{steps_file} record {n}")
            steps[wid].append(s)
    for wid in steps:
        steps[wid].sort(key=lambda s: s["seq"])
    return steps


def _load_batch(out: Path) -> RunRecords:
    parts = [_load_run(p) for p in sorted((out / BATCH_CELLS).iterdir()) if p.is_dir() and (p / MANIFEST).exists()]
    problems = [p for r in parts for p in r.problems]
    envelopes = None
    if all(r.envelopes is not None for r in parts):
        envelopes = sorted((w for r in parts for w in r.light_worlds()), key=lambda w: w["world_id"])

    def read() -> list[dict[str, Any]]:
        return sorted((w for r in parts for w in r.worlds), key=lambda w: w["world_id"])

    worlds: list[dict[str, Any]] = [] if envelopes is not None else read()
    steps = LazySteps([src for r in parts if isinstance(r.steps, LazySteps) for src in r.steps.sources], problems)
    manifest: dict[str, Any] = {"batch": True, "cells": {}, "parts": {}}
    for r in parts:
        manifest.setdefault("study", r.manifest.get("study"))
        manifest.setdefault("world_kind", r.manifest.get("world_kind"))
        manifest.setdefault("params", r.manifest.get("params"))
        manifest.setdefault("templates", r.manifest.get("templates"))
        manifest["cells"].update(r.manifest.get("cells", {}))
        manifest["parts"][r.dir.name] = {"runs": r.manifest.get("runs", [])}
    return RunRecords(out, manifest, worlds, steps, problems, envelopes=envelopes,
                      read_worlds=read if envelopes is not None else None)


# -- manifest -----------------------------------------------------------------
def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(where: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    rev = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"revision": rev, "dirty": bool(status) if status is not None else None}


def package_source_hash() -> str:
    """Content hash of the workbench package's Python files (not its version string)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def environment_facts() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "git": git_state(Path(__file__).resolve().parent),
        "package_sha256": package_source_hash(),
    }


def uncalibrated_cells(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Per cell label, what its simulated agents could not read as fitted, over every run
    that declared ``rehearsal: uncalibrated`` ({} for a calibrated rehearsal or real models)."""
    out: dict[str, list[str]] = {}
    for entry in [manifest, *(manifest.get("runs") or [])]:
        r = entry.get("rehearsal") if isinstance(entry, dict) else None
        if isinstance(r, dict) and r.get("status") == "uncalibrated":
            for cell, problems in (r.get("problems") or {}).items():
                out.setdefault(str(cell), [str(p) for p in problems])
    return out


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    manifest["schema_version"] = SCHEMA_VERSION  # of the records it describes, and of itself
    tmp = Path(out_dir) / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=_json_default) + "\n")
    os.replace(tmp, Path(out_dir) / MANIFEST)


def read_manifest(out_dir: Path) -> dict[str, Any] | None:
    p = Path(out_dir) / MANIFEST
    return json.loads(p.read_text()) if p.exists() else None


def json_text(answer: Any) -> str:
    """How a submitted JSON value reads as text (strings as-is, others as JSON)."""
    if isinstance(answer, str):
        return answer
    try:
        return _MESSAGE_JSON(answer)  # json.dumps(answer, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(answer)
