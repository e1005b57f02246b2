"""Writing named tables to disk, the same layout for every world kind (kind-free)."""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pandas as pd

CSV_SLICE_ROWS = 100_000  # rows a background writer formats at a time
_CSV: dict[Path, pd.DataFrame] = {}  # what forked writers inherit


def write_tables(tables: dict[str, pd.DataFrame], out_dir: str | Path) -> dict[str, Path]:
    """Any world kind's named tables as CSV (and Parquet where the columns allow it),
    so that ``workbench metrics`` writes the same layout for every kind."""
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    index: dict[str, dict[str, object]] = {}
    for name, table in tables.items():
        table.to_csv(out / "tables" / f"{name}.csv", index=False)
        written[f"table:{name}"] = out / "tables" / f"{name}.csv"
        index[name] = {k: v for k, v in table.attrs.items() if isinstance(v, (str, int, float, dict, list))}
    # what a CSV cannot carry: each table's title, the factors constant over its rows, its rules
    (out / "tables" / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False, default=str),
                                               encoding="utf-8")
    written["index"] = out / "tables" / "index.json"
    return written


def rules_folder(parser_rule: str | None, answer_rule: str | None) -> str:
    """Where re-scored metrics go under DIR/metrics: named after their rules, so a
    re-score never overwrites the tables of the recorded rules."""
    if not parser_rule and not answer_rule:
        return ""
    return f"{parser_rule or 'recorded'}-{answer_rule or 'recorded'}"


def write_csvs_behind(frames: dict[Path, pd.DataFrame]) -> Callable[[], None]:
    """Write each frame to its CSV path (``to_csv(index=False)``) in forked processes,
    slice by slice, while the caller goes on; the returned function waits for them and
    joins each file's slices. The bytes are those ``to_csv`` writes in one go (each
    value is formatted on its own, so slices of rows format as the whole does). Small
    frames, or one core, are written here and now."""
    big = {path: frame for path, frame in frames.items() if len(frame) > CSV_SLICE_ROWS}
    for path, frame in frames.items():
        if path not in big:
            frame.to_csv(path, index=False)
    if not big:
        return lambda: None
    n = min(2, _cores())
    if n < 2:
        for path, frame in big.items():
            frame.to_csv(path, index=False)
        return lambda: None
    _CSV.clear()
    _CSV.update(big)
    jobs = [(path, lo, min(lo + CSV_SLICE_ROWS, len(frame))) for path, frame in big.items()
            for lo in range(0, len(frame), CSV_SLICE_ROWS)]
    pool = ProcessPoolExecutor(max_workers=n, mp_context=get_context("fork"))
    futures = [pool.submit(_csv_slice, *job) for job in jobs]  # the writers fork at the first

    def wait() -> None:
        try:
            parts = [f.result() for f in futures]
        finally:
            pool.shutdown()
            _CSV.clear()
        for path in big:
            with path.open("wb") as out:
                for part in (p for p in parts if p[0] == path):
                    with part[1].open("rb") as fh:
                        shutil.copyfileobj(fh, out, 1 << 20)
                    part[1].unlink()
    return wait


def _csv_slice(path: Path, lo: int, hi: int) -> tuple[Path, Path]:
    part = path.with_name(f".{path.name}.{lo}")
    _CSV[path].iloc[lo:hi].to_csv(part, index=False, header=lo == 0)
    return path, part


def _cores() -> int:
    from multiprocessing import get_all_start_methods

    if "fork" not in get_all_start_methods():  # pragma: no cover - Windows: written here
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
