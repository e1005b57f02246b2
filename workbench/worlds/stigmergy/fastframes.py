"""Every shared-store frame of a large run set in one pass over its records, on every core.

The per-world, per-agent, reply, validity and monitor frames of :mod:`frames` are
each a concatenation of per-world rows (:mod:`rows`: ``world_frame_row``, ``agent_frame_rows``,
``reply_rows``, ``validity_row``, ``monitor_rows``), so they can be computed world by
world, anywhere, with the same functions. Here they are, for every rule variant
the tables ask for, in one pass:

* when the steps have not been read (``load_run`` reads them on first use), the
  steps file is cut into chunks at world boundaries and forked workers each decode
  a chunk, compute its worlds' rows and send them back as packed columns
  (msgpack; numbers and flags as raw arrays); no process ever holds every step:
  a worker holds one chunk, this process the worlds and the finished frames;
* when the steps are already in memory, forked workers each take a share of them.

The rows are made by the metric functions themselves (:mod:`metrics`), the world's
agent rows once for every answer rule asked for (``agent_rows_by_rule``), its
validity once per rule pair (``validity_of``) and its row under other rules from
its first (``rescored_world_row``).
The frames are built column by column, each column with the dtype pandas infers
from the rows, and put in world order, so they equal the straightforward frames;
``tests/test_metrics_scale.py`` holds them equal, dtypes included. Anything
unusual (a world's steps in two chunks, a step that does not fit the schema)
falls back to the straightforward path, which reads the steps as ``load_run``
always did.
"""
from __future__ import annotations

import functools
import hashlib
import operator
import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import msgspec

from workbench.records import (
    Items,
    LazySteps,
    RowKeeper,
    RunRecords,
    _decode_line,
    collector_paused,
    read_rows,
)

# the rule variants every metrics run asks for (the rescoring table's), besides the requested ones
STANDARD_WORLD_KEYS: tuple[tuple[str | None, str | None], ...] = (
    (None, None), ("strict", None), ("lenient", None), (None, "exact"), (None, "one-integer"))
MIN_WORLDS = 2000  # below this the straightforward path is as fast (no workers to start)
CHUNK_BYTES = 24 << 20  # steps-file bytes per work unit: bounds each worker's memory

_JOB: dict[str, Any] = {}  # what forked workers inherit: the worlds and the frames wanted


class _Fallback(Exception):
    """The fast path cannot vouch for these records: use the straightforward one."""


class _Wid(msgspec.Struct):
    world_id: Any = None


_WID = msgspec.json.Decoder(_Wid)
_DECODER = msgspec.json.Decoder()


def workers() -> int:
    """Processes to share the work: the cores this process may use (one where
    processes cannot be forked: the work is then done here)."""
    from multiprocessing import get_all_start_methods

    if "fork" not in get_all_start_methods():  # pragma: no cover - Windows
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def derive_all(records: RunRecords, key: tuple[Any, ...], *, force: bool = False) -> bool:
    """Compute every frame in one pass and store them in ``records.derived`` (the
    requested ``key`` among them); False (nothing stored) when the run set is small,
    or the fast path falls back."""
    if not force and len(records.light_worlds()) < MIN_WORLDS:
        return False
    if FELL_BACK in records.derived and records.derived_value(FELL_BACK, _nothing) is not None:
        return False  # these records fell back before: not again for every frame asked for
    world_keys = list(STANDARD_WORLD_KEYS)
    agent_keys: list[str | None] = [None]
    if key[0] == "stigmergy.worlds" and key[1:] not in world_keys:
        world_keys.append(key[1:])
    if key[0] == "stigmergy.agents" and key[1] not in agent_keys:
        agent_keys.append(key[1])
    try:
        frames = compute(records, world_keys, agent_keys)
    except _Fallback as exc:
        records.derived.pop(FELL_BACK, None)
        records.derived_value(FELL_BACK, functools.partial(_same, str(exc)))
        return False
    for k, frame in frames.items():
        records.derived_value(k, functools.partial(_same, frame))
    return True


FELL_BACK = ("stigmergy.fastframes.fell_back",)  # why the fast path fell back for these records


def _same(value: Any) -> Any:
    return value


def _nothing() -> None:
    return None


def compute(records: RunRecords, world_keys: list[tuple[str | None, str | None]],
            agent_keys: list[str | None]) -> dict[tuple[Any, ...], Any]:
    """Every frame, for these rule variants, by its key in ``records.derived``."""
    import pandas as pd

    from workbench.worlds.stigmergy import rows as F

    light = records.light_worlds()  # ids and runs: the whole records are read only if rows are computed
    if not light:
        raise _Fallback("no worlds")
    position = {w["world_id"]: i for i, w in enumerate(light)}
    if len(position) != len(light):
        raise _Fallback("a world id twice")
    steps = records.steps
    streaming = isinstance(steps, LazySteps) and not steps.loaded
    kept = sources = None
    if streaming and not records.design_split:  # kept rows carry the recorded cell ids
        assert isinstance(steps, LazySteps)
        run_of = {w["world_id"]: w.get("run") for w in light}
        sources = []
        for path, want in steps.sources:  # only worlds still in records.worlds, of their latest run
            sources.append((path, {wid: run for wid, run in want.items() if wid in run_of and run_of[wid] == run}))
        kept = kept_parts(sources, len(light), world_keys, agent_keys)
    worlds = light if kept is not None else records.worlds  # read here, once: not in every worker forked below
    _JOB.clear()
    _JOB.update(worlds=worlds, position=position, steps=None if streaming else steps,
                world_keys=world_keys, agent_keys=agent_keys)
    units: list[tuple[Any, ...]] = []
    if kept is None and sources is not None:
        _JOB["sources"] = sources
        units = [("chunk", i, a, b) for i, (path, _) in enumerate(sources) for a, b in _chunks(path)]
    elif kept is None:
        n = max(1, min(len(worlds) // 500, workers() * 4))
        units = [("worlds", len(worlds) * i // n, len(worlds) * (i + 1) // n) for i in range(n)]
    try:
        parts = kept if kept is not None else _run(units)
    finally:
        _JOB.clear()
    seen: set[str] = set()
    for part in parts:
        if not seen.isdisjoint(part["wids"]):
            raise _Fallback("a world's steps in two chunks")
        seen.update(part["wids"])
    missing = [w for w in worlds if w["world_id"] not in seen]  # worlds without a step
    if missing:
        _JOB.update(worlds=worlds, world_keys=world_keys, agent_keys=agent_keys)
        try:
            parts.append(_unpack(_pack(_world_rows([(w, []) for w in missing]))))
        finally:
            _JOB.clear()
    columns: dict[str, list[str]] = {}
    for part in parts:
        for name, cols in part["columns"].items():
            if columns.setdefault(name, cols) != cols:
                raise _Fallback(f"{name}: columns differ between worlds")
    order: list[int] = []
    for part in parts:
        order += [position[wid] for wid in part["wids"]]

    merged: dict[tuple[Any, ...], Any] = {}  # columns merged, by the identity of their parts' columns

    def frame(name: str, fixed: list[str] | None = None) -> Any:
        import numpy as np

        world_of: list[int] = []
        for part, first in zip(parts, _offsets(parts), strict=True):
            counts = part["counts"].get(name)
            if counts is None:  # one row per world
                world_of += order[first:first + len(part["wids"])]
            else:
                for pos, c in zip(order[first:first + len(part["wids"])], counts, strict=True):
                    world_of += [pos] * c
        cols = fixed if fixed is not None else columns.get(name)
        present = [part for part in parts if part["n"][name]]
        if not present:
            return pd.DataFrame([]) if fixed is None else pd.DataFrame([], columns=fixed)
        assert cols is not None and all(len(part["cols"][name]) == len(cols) for part in present)
        n = len(world_of)
        perm: Any = np.argsort(np.asarray(world_of, dtype=np.int64), kind="stable")  # rows in world order
        if not (perm != np.arange(n)).any():
            perm = None
        data = {}
        for j, c in enumerate(cols):
            pieces = [part["cols"][name][j] for part in present]
            # the world frames under other rules share most columns (the very part columns): merged once
            same = (tuple(map(id, pieces)), n)
            if same not in merged:
                merged[same] = _merge(pieces, n, perm)
            data[c] = merged[same]
        return pd.DataFrame(data, columns=cols)

    out: dict[tuple[Any, ...], Any] = {}
    for p, a in world_keys:
        out[("stigmergy.worlds", p, a)] = frame(f"w|{p}|{a}")
    for a in agent_keys:
        out[("stigmergy.agents", a)] = frame(f"a|{a}")
    out[("stigmergy.replies",)] = frame("replies", F.REPLY_COLUMNS)
    out[("stigmergy.validity",)] = frame("validity", F.VALIDITY_COLUMNS)
    out[("stigmergy.monitor",)] = frame("monitor", F.MONITOR_COLUMNS)
    return out


def _offsets(parts: list[dict[str, Any]]) -> list[int]:
    out, n = [], 0
    for part in parts:
        out.append(n)
        n += len(part["wids"])
    return out


def _run(units: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    n = min(workers(), len(units))
    if n <= 1:
        return [_unpack(_unit(u)) for u in units]
    with ProcessPoolExecutor(max_workers=n, mp_context=get_context("fork")) as pool:
        return [_unpack(b) for b in pool.map(_unit, units)]


def _unit(unit: tuple[Any, ...]) -> bytes:
    """A work unit's rows, packed: in a worker, or in this process."""
    with collector_paused():  # records are trees: nothing for the cyclic collector to find
        try:
            if unit[0] == "chunk":
                _, source, start, end = unit
                part = _world_rows(_chunk_worlds(source, start, end))
            else:
                _, lo, hi = unit
                steps = _JOB["steps"]
                part = _world_rows([(w, steps.get(w["world_id"], [])) for w in _JOB["worlds"][lo:hi]])
        except _Fallback as exc:
            part = {"fallback": str(exc)}
    return _pack(part)


def _pack(part: dict[str, Any]) -> bytes:
    """A part's rows as columns (see :func:`_column`), packed."""
    if "rows" in part:
        part["cols"] = {}
        done: dict[int, list[tuple[tuple[Any, ...], str]]] = {}  # world columns encoded, by position
        for name, rows in part.pop("rows").items():
            world = name.startswith("w|")
            cols = []
            for j, values in enumerate(zip(*rows, strict=True)):
                # the world frames under other rules share most of their values (the very objects):
                # such a column is packed once and the others refer to it (["r", frame])
                same = next((first for seen, first in done.get(j, ()) if all(map(operator.is_, seen, values))),
                            None) if world else None
                if same is None:
                    cols.append(_column(values))
                    if world:
                        done.setdefault(j, []).append((values, name))
                else:
                    cols.append(["r", same])
            part["cols"][name] = cols
        part["n"] = {name: sum(part["counts"][name]) if name in part["counts"] else len(part["wids"])
                     for name in part["cols"]}
    try:
        return b"m" + msgspec.msgpack.encode(part)
    except (OverflowError, TypeError, UnicodeEncodeError, ValueError):
        return b"p" + pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)


_NONE = type(None)


def _column(values: tuple[Any, ...]) -> list[Any]:
    """One column of a part: ["b", bytes] booleans, ["i", bytes, none mask(, dtype)] integers
    (int64, or the narrower dtype named), ["f", bytes, none mask] numbers as float64,
    ["n", count] all missing, ["s", values] text (or missing), ["c", distinct values,
    int32 codes] text (or missing) that repeats, ["bn", values] booleans (or missing),
    ["o", values] anything else; in a packed part, ["r", frame] is the same column of
    another frame (resolved by :func:`_resolve`). Which of these a frame's column becomes is
    decided when every part is in (:func:`_merge`), as pandas would decide it."""
    import numpy as np

    kinds = set(map(type, values))
    none = _NONE in kinds
    kinds.discard(_NONE)
    if not kinds:
        return ["n", len(values)]
    if kinds == {str}:
        index: dict[Any, int] = {}
        codes = [index.setdefault(v, len(index)) for v in values]
        if len(index) * 2 > len(values):
            return ["s", list(values)]
        return ["c", list(index), np.array(codes, dtype=np.int32).tobytes()]
    if kinds == {bool}:
        return ["bn", list(values)] if none else ["b", np.array(values, dtype=np.bool_).tobytes()]
    try:
        if kinds <= {int, float}:
            mask = np.array([v is None for v in values], dtype=np.bool_).tobytes() if none else b""
            if kinds == {int}:
                ints = np.array([0 if v is None else v for v in values], dtype=np.int64)
                for narrow in (np.int8, np.int16, np.int32):  # most counts fit a byte: packed as small as fits
                    if len(ints) and np.iinfo(narrow).min <= ints.min() and ints.max() <= np.iinfo(narrow).max:
                        return ["i", ints.astype(narrow).tobytes(), mask, np.dtype(narrow).str]
                return ["i", ints.tobytes(), mask]
            return ["f", np.array([np.nan if v is None else v for v in values], dtype=np.float64).tobytes(), mask]
    except OverflowError:  # an integer beyond int64: pandas decides
        pass
    return ["o", list(values)]


def _merge(parts: list[list[Any]], n: int, perm: Any = None) -> Any:
    """A frame's column from its parts' (in part order), its rows then taken in the
    order ``perm`` gives (None: as they are): a numpy array where every part is
    boolean, or numeric (int64 where all are integers and none is missing, else
    float64 with NaN for missing), as pandas infers those; text as pandas' string
    array; else the values, for pandas to infer from (:func:`_infer`)."""
    import numpy as np

    def ordered(a: Any) -> Any:
        return a if perm is None else a[perm]

    kinds = {p[0] for p in parts}
    some = kinds - {"n"}  # "n": a part where the column is all missing
    if kinds == {"b"}:
        return ordered(np.frombuffer(b"".join(p[1] for p in parts), dtype=np.bool_))
    if some and some <= {"i", "f"}:
        if kinds == {"i"} and not any(p[2] for p in parts):
            return ordered(np.concatenate([_numbers(p).astype(np.int64) for p in parts]))
        arrays = []
        for p in parts:
            if p[0] == "n":
                arrays.append(np.full(p[1], np.nan))
                continue
            a = _numbers(p).astype(np.float64)
            if p[2]:
                a[np.frombuffer(p[2], dtype=np.bool_)] = np.nan
            arrays.append(a)
        return ordered(np.concatenate(arrays))
    if not some:  # nothing but missing values: pandas keeps them as objects
        return np.full(n, None, dtype=object)
    if some <= {"b", "bn"}:  # booleans with some missing: pandas keeps them as objects
        flags: list[Any] = []
        for p in parts:
            flags += (np.frombuffer(p[1], dtype=np.bool_).tolist() if p[0] == "b"
                      else p[1] if p[0] == "bn" else [None] * p[1])
        return ordered(np.array(flags, dtype=object))
    if some <= {"s", "c"}:  # text, some missing perhaps: the string dtype pandas infers for text
        return _text_array(parts, perm)
    values: list[Any] = []
    for p in parts:
        values += _values(p, p[1] if p[0] == "n" else 0)
    return _infer(values if perm is None else [values[i] for i in perm.tolist()])


def _text_array(parts: list[list[Any]], perm: Any) -> Any:
    """Text parts as the string array pandas makes of them, built as a dictionary
    (each part's distinct values and codes) and cast in Arrow, not value by value."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    distinct: list[Any] = []
    codes = []
    for p in parts:
        if p[0] == "c":
            codes.append(np.frombuffer(p[2], dtype=np.int32) + len(distinct))
            distinct += p[1]
        else:  # "s" (each value its own) or "n" (missing: the code of a missing value)
            values = p[1] if p[0] == "s" else [None] * p[1]
            codes.append(np.arange(len(distinct), len(distinct) + len(values), dtype=np.int32))
            distinct += values
    index = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
    if perm is not None:
        index = index[perm]
    dictionary = pa.array(distinct, type=pa.large_string())
    dense = pa.DictionaryArray.from_arrays(pa.array(index, type=pa.int32()), dictionary).cast(pa.large_string())
    if isinstance(_text_dtype(), pd.StringDtype):  # pandas 3: text is a string dtype, Arrow-backed
        return pd.array(dense, dtype=_text_dtype())
    return pd.array(np.asarray(dense.to_pylist(), dtype=object), dtype=_text_dtype())  # pragma: no cover


def _numbers(col: list[Any]) -> Any:
    """An "i" or "f" column's numbers (missing ones as they were stored)."""
    import numpy as np

    if col[0] == "f":
        return np.frombuffer(col[1], dtype=np.float64)
    return np.frombuffer(col[1], dtype=col[3] if len(col) > 3 else np.int64)


def _texts(col: list[Any]) -> Any:
    """An "s", "c" or "n" column as an object array."""
    import numpy as np

    if col[0] == "n":
        return np.full(col[1], None, dtype=object)
    if col[0] == "s":
        out = np.empty(len(col[1]), dtype=object)
        out[:] = col[1]
        return out
    distinct = np.empty(len(col[1]), dtype=object)
    distinct[:] = col[1]
    return distinct[np.frombuffer(col[2], dtype=np.int32)]


def _resolve(part: dict[str, Any]) -> dict[str, Any]:
    """A part whose columns refer to another frame's (["r", frame]) given that column."""
    for cols in part.get("cols", {}).values():
        for j, col in enumerate(cols):
            if col[0] == "r":
                cols[j] = part["cols"][col[1]][j]
    return part


@functools.cache
def _text_dtype() -> Any:
    """The dtype pandas infers for a column of text."""
    return _infer(["text", None]).dtype


def _infer(values: list[Any]) -> Any:
    """A column as pandas makes it from rows of values (``pd.DataFrame(rows)``)."""
    import pandas as pd

    return pd.DataFrame([(v,) for v in values])[0].array


def _unpack(data: bytes) -> dict[str, Any]:
    part = msgspec.msgpack.decode(data[1:]) if data[:1] == b"m" else pickle.loads(data[1:])
    if "fallback" in part:
        raise _Fallback(part["fallback"])
    return _resolve(part)


def _chunks(path: Path) -> list[tuple[int, int]]:
    """Byte ranges of a steps file, each of whole lines, cut only where the world changes."""
    if not path.exists():
        return []
    size = path.stat().st_size
    n = max(1, min(size // CHUNK_BYTES + 1, 4096))
    cuts = [0]
    with path.open("rb") as fh:
        for i in range(1, n):
            fh.seek(size * i // n)
            fh.readline()  # to the next line's start
            first = None
            while True:
                at = fh.tell()
                line = fh.readline()
                if not line:
                    break
                wid = _wid(line)
                if first is None:
                    first = wid
                elif wid != first:
                    break
            if at > cuts[-1]:
                cuts.append(at)
    if cuts[-1] < size:
        cuts.append(size)
    return list(zip(cuts, cuts[1:], strict=False))


def _wid(line: bytes) -> Any:
    try:
        return _WID.decode(line).world_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _chunk_worlds(source: int, start: int, end: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The worlds whose steps lie in one byte range of a steps file, with those steps
    (of each world's latest run, in application order), as ``load_run`` reads them."""
    from workbench.schema import SCHEMA_VERSION, check_step, migrate_step

    path, want = _JOB["sources"][source]
    with path.open("rb") as fh:
        fh.seek(start)
        block = fh.read(end - start)
    try:
        recs = _DECODER.decode_lines(block)
    except msgspec.DecodeError:
        recs = [_decode_line(line, path, 0, None) for line in block.split(b"\n")]
    steps: dict[str, list[dict[str, Any]]] = {}
    for s in recs:
        if not isinstance(s, dict):
            continue
        wid = s.get("world_id")
        if isinstance(wid, str) and wid in want and s.get("run") == want[wid]:
            if not (type(s.get("seq")) is int and type(s.get("run")) is int
                    and type(s.get("schema_version", 0)) is int):
                raise _Fallback("a step that does not fit the schema")  # load_run names it
            if s.get("schema_version", 0) != SCHEMA_VERSION:
                try:
                    check_step(migrate_step(s), str(path))
                except Exception as exc:  # noqa: BLE001 - load_run raises it, naming the record
                    raise _Fallback(str(exc)) from None
            steps.setdefault(wid, []).append(s)
    worlds = _JOB["worlds"]
    position = _JOB["position"]
    out = []
    for wid, mine in steps.items():
        mine.sort(key=lambda s: s["seq"])
        out.append((worlds[position[wid]], mine))
    return out


def _add(rows: dict[str, list[Any]], columns: dict[str, list[str]], name: str, dicts: list[dict[str, Any]]) -> int:
    for d in dicts:
        cols = columns.get(name)
        if cols is None:
            cols = columns[name] = list(d)
        if len(d) != len(cols) or list(d) != cols:
            raise _Fallback(f"{name}: columns differ between worlds")
        rows[name].append(tuple(d.values()))
    return len(dicts)


# -- the one-pass per-world rows ----------------------------------------------------------


def _world_rows(items: Items, world_keys: list[tuple[str | None, str | None]] | None = None,
                agent_keys: list[str | None] | None = None) -> dict[str, Any]:
    """The rows of every wanted frame for these worlds (by default: the job's), by
    frame, as tuples: each world's rows of every frame from one pass."""
    from workbench.worlds.stigmergy import rows as F
    from workbench.worlds.stigmergy.metrics import agent_rows_by_rule, rescored_world_row, validity_of, world_row

    world_keys = _JOB["world_keys"] if world_keys is None else world_keys
    agent_keys = _JOB["agent_keys"] if agent_keys is None else agent_keys
    rows: dict[str, list[Any]] = {f"w|{p}|{a}": [] for p, a in world_keys}
    rows.update({f"a|{a}": [] for a in agent_keys})
    rows.update(replies=[], validity=[], monitor=[])
    counts: dict[str, list[int]] = {f"a|{a}": [] for a in agent_keys}
    counts.update(replies=[], monitor=[])
    columns: dict[str, list[str]] = {}
    wids = []
    grid = F.VALIDITY_GRID
    for w, steps in items:
        wids.append(w["world_id"])
        cell = w["cell"]
        own_p, own_a = cell["parser"], cell["answer_rule"]
        rules = list(dict.fromkeys([a or own_a for _, a in world_keys] + [a or own_a for a in agent_keys]))
        agents = agent_rows_by_rule(w, steps, rules)
        validity = validity_of(w, steps)
        cols = F.cell_columns(w)
        index = w.get("world_index")
        done: dict[tuple[str, str], tuple[Any, ...]] = {}
        base = None
        for p, a in world_keys:
            eff = (p or own_p, a or own_a)
            row = done.get(eff)
            if row is None:  # the same rules in effect give the same row
                if base is None:
                    base = world_row(w, steps, p, a, agents=agents[eff[1]], validity=validity)
                    wrow = base
                else:
                    wrow = rescored_world_row(base, w, p, a, agents[eff[1]], validity)
                row = done[eff] = _tuple(columns, "worlds", {**cols, **wrow, "world_index": index})
            rows[f"w|{p}|{a}"].append(row)
        for a in agent_keys:
            n = _add(rows, columns, f"a|{a}", F.agent_frame_rows(w, agents[a or own_a]))
            counts[f"a|{a}"].append(n)
        r = F.reply_rows(w, steps)
        rows["replies"] += r
        counts["replies"].append(len(r))
        failed = w.get("failed")
        rows["validity"].append((w["cell_id"], w["world_id"], bool(failed), F.failure_cause(failed),
                                 own_p, cell["validity"], *(bool(validity(p, v)["valid"]) for p, v in grid)))
        m = F.monitor_rows(w, steps)
        rows["monitor"] += m
        counts["monitor"].append(len(m))
    wcols = columns.pop("worlds", None)
    if wcols is not None:
        columns.update({f"w|{p}|{a}": wcols for p, a in world_keys})
    return {"wids": wids, "rows": rows, "counts": counts, "columns": columns}


def _tuple(columns: dict[str, list[str]], name: str, d: dict[str, Any]) -> tuple[Any, ...]:
    cols = columns.get(name)
    if cols is None:
        cols = columns[name] = list(d)
    if len(d) != len(cols) or list(d) != cols:
        raise _Fallback(f"{name}: columns differ between worlds")
    return tuple(d.values())


# -- rows kept beside the records ---------------------------------------------------------
# The same per-world rows, computed as each batch of worlds is recorded (``RunWriter`` with
# :func:`row_keeper`, in whichever process ran the worlds) and kept in the run directory's
# rows.bin, for the standard rule variants. A metrics run over streamed records takes them
# instead of decoding every step when they are provably its records' rows: written by
# this very code (its digest is the key), the record files unchanged since (records.read_rows),
# and every world of the records there exactly once, of its latest run. Anything else:
# computed from the steps, as without them. Only msgpack is read back (never a pickle:
# a run directory may come from anyone).

ROWS_FORMAT = 1  # the layout of a kept part; part of the key


@functools.cache
def rows_key() -> str:
    """A digest of the code that makes the rows: this world kind's package, whole, and
    the one kind-free module its rows read (which routes are simulated)."""
    import workbench.routes

    digest = hashlib.sha256(f"stigmergy rows {ROWS_FORMAT} {STANDARD_WORLD_KEYS}".encode())
    root = Path(__file__).resolve().parent
    for path in [*sorted(root.rglob("*.py")), Path(workbench.routes.__file__ or "")]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def pack_rows(items: Items) -> bytes | None:
    """These worlds' rows of every frame under the standard rules, packed (None: the
    fast path cannot vouch for them, so nothing is kept and analysis computes them)."""
    try:
        part = _world_rows(items, list(STANDARD_WORLD_KEYS), [None])
    except _Fallback:
        return None
    part["runs"] = [w.get("run") for w, _ in items]
    data = _pack(part)
    return data if data[:1] == b"m" else None


def row_keeper() -> RowKeeper:
    return RowKeeper(key=rows_key(), pack=pack_rows)


def kept_parts(sources: list[tuple[Path, dict[str, Any]]], n_worlds: int,
               world_keys: list[tuple[str | None, str | None]], agent_keys: list[str | None]
               ) -> list[dict[str, Any]] | None:
    """The kept rows of exactly these worlds (each source's wanted world ids, of their
    run), as parts; None where any is missing or cannot be trusted."""
    if not set(world_keys) <= set(STANDARD_WORLD_KEYS) or not set(agent_keys) <= {None}:
        return None
    try:
        return _kept_parts(sources, n_worlds)
    except (msgspec.DecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None  # not a part this code wrote (a file made by hand): the rows are computed


def _kept_parts(sources: list[tuple[Path, dict[str, Any]]], n_worlds: int) -> list[dict[str, Any]] | None:
    key = rows_key()
    parts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path, want in sources:
        blobs = read_rows(path.parent, key)
        if blobs is None:
            return None
        for blob in blobs:
            if blob[:1] != b"m":
                return None
            part = _resolve(msgspec.msgpack.decode(blob[1:]))
            keep = []
            for wid, run in zip(part["wids"], part["runs"], strict=True):
                ok = wid not in seen and wid in want and want[wid] == run
                if ok:
                    seen.add(wid)
                keep.append(ok)
            if all(keep):
                parts.append(part)
            elif any(keep):
                parts.append(_select(part, keep))
    return parts if len(seen) == n_worlds and parts else None


def _select(part: dict[str, Any], keep: list[bool]) -> dict[str, Any]:
    """A part of only the kept worlds, each column encoded again from its kept values
    (so it is the part those worlds alone would have made)."""
    import numpy as np

    mask = np.array(keep, dtype=np.bool_)
    out: dict[str, Any] = {"wids": [w for w, k in zip(part["wids"], keep, strict=True) if k],
                           "columns": part["columns"], "counts": {}, "cols": {}, "n": {}}
    for name, cols in part["cols"].items():
        counts = part["counts"].get(name)
        rows = mask if counts is None else np.repeat(mask, counts)
        if counts is not None:
            out["counts"][name] = [c for c, k in zip(counts, keep, strict=True) if k]
        picked = rows.tolist()
        out["cols"][name] = [_column(tuple(v for v, k in zip(_values(col, len(picked)), picked, strict=True) if k))
                             for col in cols]
        out["n"][name] = int(rows.sum())
    return out


def _values(col: list[Any], n: int) -> list[Any]:
    """A packed column's values (the inverse of :func:`_column`)."""
    import numpy as np

    kind = col[0]
    if kind == "n":
        return [None] * n
    if kind in ("s", "bn", "o"):
        return list(col[1])
    if kind == "c":
        return _texts(col).tolist()
    if kind == "b":
        return np.frombuffer(col[1], dtype=np.bool_).tolist()
    vals = _numbers(col).tolist()
    if col[2]:
        vals = [None if m else v for v, m in zip(vals, np.frombuffer(col[2], dtype=np.bool_).tolist(), strict=True)]
    return vals
