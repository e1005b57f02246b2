"""Records → pandas frames: one row per world and one per agent, with the cell's
factors as columns so that tables can group by them."""
from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.records import RunRecords
from workbench.models.factory import is_simulated_route


def model_of(world: dict[str, Any]) -> str:
    """The cell's model as a table label: one route, or the set of routes joined."""
    routes = sorted({a["route"] for a in world["agents"]})
    return routes[0] if len(routes) == 1 else "+".join(routes)


def _cell_columns(world: dict[str, Any]) -> dict[str, Any]:
    cell = world["cell"]
    model = model_of(world)
    return {
        "cell_label": world.get("cell_label") or world["cell_id"],
        "model": model,
        "simulated": all(is_simulated_route(a["route"]) for a in world["agents"]),
        **{k: cell.get(k) for k in ("condition", "clauses", "scheduler", "parser", "answer_rule", "validity")},
        "run_set": None,
    }


def world_frame(records: RunRecords, parser_rule: str | None = None, answer_rule: str | None = None) -> pd.DataFrame:
    """Per-world metrics recomputed from records (optionally under other rules)."""
    from workbench.metrics.stigmergy import world_row

    rows = []
    for w in records.worlds:
        row = world_row(w, records.steps.get(w["world_id"], []), parser_rule, answer_rule)
        rows.append({**_cell_columns(w), **row, "world_index": w.get("world_index")})
    return pd.DataFrame(rows)


def agent_frame(records: RunRecords, answer_rule: str | None = None) -> pd.DataFrame:
    from workbench.metrics.stigmergy import agent_rows

    rows = []
    for w in records.worlds:
        cols = _cell_columns(w)
        valid = w["valid"]
        for r in agent_rows(w, records.steps.get(w["world_id"], []), answer_rule):
            rows.append({**cols, **r, "world_valid": valid, "world_index": w.get("world_index")})
    return pd.DataFrame(rows)
