"""Writing a run's metrics to disk: per-world and per-agent tables (Parquet and
CSV) and the cell tables (CSV), all recomputed from the records."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.metrics.files import write_csvs_behind, write_tables
from workbench.records import RunRecords
from workbench.worlds.stigmergy import tables as T
from workbench.worlds.stigmergy.frames import agent_frame, world_frame


def cell_tables(records: RunRecords, parser_rule: str | None = None,
                answer_rule: str | None = None, holm: bool = False) -> dict[str, pd.DataFrame]:
    """Every shipped table of a run, by name: one row per cell (or per matched pair
    of cells, for contrasts), each with its title and constant factors in attrs.
    Built once per load and rules (`workbench metrics` writes them, then prints
    them); each caller gets copies."""
    tables = records.derived_value(("stigmergy.cell_tables", parser_rule, answer_rule, holm),
                                   lambda: _cell_tables(records, parser_rule, answer_rule, holm))
    return {name: t.copy() for name, t in tables.items()}


def _cell_tables(records: RunRecords, parser_rule: str | None, answer_rule: str | None,
                 holm: bool) -> dict[str, pd.DataFrame]:
    from workbench.metrics.contrasts import Estimability, contrast_table, contrasts_for
    from workbench.metrics.design import design_of_records
    from workbench.worlds.stigmergy.frames import monitor_frame, reply_frame, units, validity_frame

    design = design_of_records(records)
    wf = world_frame(records, parser_rule, answer_rule)
    af = agent_frame(records, answer_rule)
    rules = f"parser {parser_rule or 'as recorded'}, answer rule {answer_rule or 'as recorded'}"
    tables = {
        "cells": design.table(),
        "coordination": T.coordination_table(wf, design),
        "contrasts": contrast_table(units(records, parser_rule, answer_rule), design,
                                    contrasts_for(records, design), holm=holm, rule=Estimability.of(records)),
        "joint_by_cross_read": T.joint_by_cross_read(wf, design),
        "attrition": T.attrition_table(validity_frame(records), reply_frame(records), design),
        "writes": T.writes_table(wf, design),
        "e1": T.e1_table(wf, af, design),
        "looks": T.looks_table(af, design),
        "no_read": T.no_read_table(af, design),
        "vocabulary": T.vocabulary_table(wf, design),
        "writing_for_readers": T.writing_for_readers_table(af, design),
        "pairs": T.pair_table(af, design),
        "reply_shapes": T.reply_shape_table(af, design),
        "reply_shapes_by_route": T.reply_shape_contrasts(af, design, declared=contrasts_for(records, design)),
        "exposure_then_read": T.exposure_then_read(wf, af, design),
        "text_signal": T.text_signal_table(af, design),
        "monitor_labels": T.monitor_label_table(monitor_frame(records), design),
        "rescoring": T.rescore_table({
            "recorded rules": world_frame(records),
            "strict parser": world_frame(records, "strict"),
            "lenient parser": world_frame(records, "lenient"),
            "exact answer": world_frame(records, None, "exact"),
            "one-integer answer": world_frame(records, None, "one-integer"),
        }, design),
    }
    for name, t in tables.items():
        if name != "rescoring":
            t.attrs["rules"] = rules
    return tables


def write_metrics(records: RunRecords, out_dir: str | Path, parser_rule: str | None = None,
                  answer_rule: str | None = None, holm: bool = False) -> dict[str, Path]:
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    csvs: dict[Path, pd.DataFrame] = {}
    for name, frame in (("worlds", world_frame(records, parser_rule, answer_rule)),
                        ("agents", agent_frame(records, answer_rule))):
        for col in frame.columns:  # parquet wants one type per column
            if frame[col].dtype == object:
                frame[col] = frame[col].map(lambda v: v if v is None or isinstance(v, str) else str(v))
        frame.to_parquet(out / f"{name}.parquet", index=False)
        csvs[out / f"{name}.csv"] = frame
        written[name] = out / f"{name}.parquet"
    wait = write_csvs_behind(csvs)  # formatted by other processes while the cell tables are built
    try:
        written.update(write_tables(cell_tables(records, parser_rule, answer_rule, holm=holm), out))
    finally:
        wait()
    return written
