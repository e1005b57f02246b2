"""Writing named tables to disk, the same layout for every world kind (kind-free)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


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
