"""Writing a run's metrics to disk: per-world and per-agent tables (Parquet and
CSV) and the cell tables (CSV), all recomputed from the records."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.metrics import tables as T
from workbench.metrics.frames import agent_frame, world_frame
from workbench.records import RunRecords


def cell_tables(records: RunRecords, parser_rule: str | None = None,
                answer_rule: str | None = None) -> dict[str, pd.DataFrame]:
    """Every shipped table of a run, by name."""
    wf = world_frame(records, parser_rule, answer_rule)
    af = agent_frame(records, answer_rule)
    return {
        "coordination": T.coordination_table(wf),
        "joint_by_cross_read": T.joint_by_cross_read(wf),
        "attrition": T.attrition_table(world_frame(records, "strict", answer_rule),
                                       world_frame(records, "lenient", answer_rule)),
        "writes": T.writes_table(wf),
        "e1": T.e1_table(wf, af),
        "looks": T.looks_table(af),
        "exposure_then_read": T.exposure_then_read(wf, af),
        "text_signal": T.text_signal_table(af),
        "rescoring": T.rescore_table({
            "recorded rules": world_frame(records),
            "strict parser": world_frame(records, "strict"),
            "lenient parser": world_frame(records, "lenient"),
            "exact answer": world_frame(records, None, "exact"),
            "one-integer answer": world_frame(records, None, "one-integer"),
        }),
    }


def write_metrics(records: RunRecords, out_dir: str | Path, parser_rule: str | None = None,
                  answer_rule: str | None = None) -> dict[str, Path]:
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, frame in (("worlds", world_frame(records, parser_rule, answer_rule)),
                        ("agents", agent_frame(records, answer_rule))):
        frame = frame.copy()
        for col in frame.columns:  # parquet wants one type per column
            if frame[col].dtype == object:
                frame[col] = frame[col].map(lambda v: v if v is None or isinstance(v, str) else str(v))
        frame.to_parquet(out / f"{name}.parquet", index=False)
        frame.to_csv(out / f"{name}.csv", index=False)
        written[name] = out / f"{name}.parquet"
    for name, table in cell_tables(records, parser_rule, answer_rule).items():
        table.to_csv(out / "tables" / f"{name}.csv", index=False)
        written[f"table:{name}"] = out / "tables" / f"{name}.csv"
    return written


def write_tables(tables: dict[str, pd.DataFrame], out_dir: str | Path) -> dict[str, Path]:
    """Any world kind's named tables as CSV (and Parquet where the columns allow it),
    so that ``workbench metrics`` writes the same layout for every kind."""
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, table in tables.items():
        table.to_csv(out / "tables" / f"{name}.csv", index=False)
        written[f"table:{name}"] = out / "tables" / f"{name}.csv"
    return written
