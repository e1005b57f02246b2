"""Records → pandas frames: one row per world and one per agent, with the cell's
factors as columns so that tables can group by them."""
from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.records import RunRecords
from workbench.worlds.stigmergy.rows import (  # noqa: F401 - also read from here: VALIDITY_GRID, INVALID_SHAPES
    INVALID_SHAPES,
    MONITOR_COLUMNS,
    REPLY_COLUMNS,
    VALIDITY_COLUMNS,
    VALIDITY_GRID,
    agent_frame_rows,
    cell_columns,
    failure_cause,
    invalid_shape,
    invalid_shapes,
    model_of,
    monitor_rows,
    reply_rows,
    validity_row,
    world_frame_row,
)


def world_frame(records: RunRecords, parser_rule: str | None = None, answer_rule: str | None = None) -> pd.DataFrame:
    """Per-world metrics recomputed from records (optionally under other rules)."""
    return _derived(records, ("stigmergy.worlds", parser_rule, answer_rule),
                    lambda: _world_frame(records, parser_rule, answer_rule))


def _derived(records: RunRecords, key: tuple[Any, ...], build: Any) -> pd.DataFrame:
    """A derived frame; at scale, every frame a table asks for is computed in one pass
    over the records (fastframes: streamed, on every core), else ``build()``."""
    if key not in records.derived:
        from workbench.worlds.stigmergy.fastframes import derive_all

        derive_all(records, key)
    return records.derived_frame(key, build)


def _world_frame(records: RunRecords, parser_rule: str | None, answer_rule: str | None) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        steps = records.steps.get(w["world_id"], [])
        arule = answer_rule or w["cell"]["answer_rule"]
        rows.append(world_frame_row(w, steps, parser_rule, answer_rule, _agent_rows(records, w, steps, arule)))
    return pd.DataFrame(rows)


def _agent_rows(records: RunRecords, world: dict[str, Any], steps: list[dict[str, Any]],
                answer_rule: str) -> list[dict[str, Any]]:
    """A world's agent rows under one answer rule, computed once per load: the world
    frames under either parser rule and the agent frame share them (read only)."""
    from workbench.worlds.stigmergy.metrics import agent_rows

    memo = records.derived_value(("stigmergy.agent_rows",), dict)
    key = (world["world_id"], answer_rule)
    rows = memo.get(key)
    if rows is None:
        rows = memo[key] = agent_rows(world, steps, answer_rule)
    return rows


def agent_frame(records: RunRecords, answer_rule: str | None = None) -> pd.DataFrame:
    return _derived(records, ("stigmergy.agents", answer_rule), lambda: _agent_frame(records, answer_rule))


def _agent_frame(records: RunRecords, answer_rule: str | None) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        steps = records.steps.get(w["world_id"], [])
        rows += agent_frame_rows(w, _agent_rows(records, w, steps, answer_rule or w["cell"]["answer_rule"]))
    return pd.DataFrame(rows)


def monitor_frame(records: RunRecords) -> pd.DataFrame:
    """One row per monitor-labelled step of a valid world: its label (None where the
    monitor's call failed), and whether the step was a read, a cross-agent read."""
    return _derived(records, ("stigmergy.monitor",), lambda: _monitor_frame(records))


def _monitor_frame(records: RunRecords) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        rows += monitor_rows(w, records.steps.get(w["world_id"], []))
    return pd.DataFrame(rows, columns=MONITOR_COLUMNS)


def reply_frame(records: RunRecords) -> pd.DataFrame:
    """One row per recorded reply that got an answer (failed calls are counted per
    world): why it is invalid under each parser rule, re-parsed from its raw text."""
    return _derived(records, ("stigmergy.replies",), lambda: _reply_frame(records))


def _reply_frame(records: RunRecords) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        rows += reply_rows(w, records.steps.get(w["world_id"], []))
    return pd.DataFrame(rows, columns=REPLY_COLUMNS)


def validity_frame(records: RunRecords) -> pd.DataFrame:
    """One row per world: whether it is valid under every (parser, validity) rule
    pair, recomputed from the raw replies, its own rules, and a failed call's cause."""
    return _derived(records, ("stigmergy.validity",), lambda: _validity_frame(records))


def _validity_frame(records: RunRecords) -> pd.DataFrame:
    rows = [validity_row(w, records.steps.get(w["world_id"], [])) for w in records.worlds]
    return pd.DataFrame(rows, columns=VALIDITY_COLUMNS)


def units(records: RunRecords, parser_rule: str | None = None, answer_rule: str | None = None):  # noqa: ANN201
    """The shared-store world's units for contrasts and comparisons: worlds, paired
    across cells by world index (world i of every cell has the same seed)."""
    from workbench.metrics.contrasts import Units

    wf = world_frame(records, parser_rule, answer_rule)
    return Units(frame=wf, pair_on=("world_index",), metric="cross_agent_access", unit="worlds", seed="seed",
                 references=REFERENCE_LEVELS,
                 metrics=tuple(c for c in wf.columns if wf[c].dtype == bool and c not in ("valid", "failed",
                                                                                           "rescored", "simulated")))


# the level a derived contrast compares against, where the design has a control
REFERENCE_LEVELS = {"condition": "no-store", "clauses": "both", "scheduler": "async", "parser": "strict",
                    "answer_rule": "exact", "constrained": "false", "validity": "any-agent"}
