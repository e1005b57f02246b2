"""Records → pandas frames: one row per world and one per agent, with the cell's
factors as columns so that tables can group by them."""
from __future__ import annotations

import functools
from typing import Any

import pandas as pd

from workbench.records import RunRecords
from workbench.routes import is_simulated_world


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
        "simulated": is_simulated_world(world),
        **{k: cell.get(k) for k in ("condition", "clauses", "scheduler", "parser", "answer_rule", "validity")},
        "run_set": None,
    }


def world_frame(records: RunRecords, parser_rule: str | None = None, answer_rule: str | None = None) -> pd.DataFrame:
    """Per-world metrics recomputed from records (optionally under other rules)."""
    return records.derived_frame(("stigmergy.worlds", parser_rule, answer_rule),
                                 lambda: _world_frame(records, parser_rule, answer_rule))


def _world_frame(records: RunRecords, parser_rule: str | None, answer_rule: str | None) -> pd.DataFrame:
    from workbench.worlds.stigmergy.metrics import world_row

    rows = []
    for w in records.worlds:
        steps = records.steps.get(w["world_id"], [])
        arule = answer_rule or w["cell"]["answer_rule"]
        row = world_row(w, steps, parser_rule, answer_rule, agents=_agent_rows(records, w, steps, arule))
        rows.append({**_cell_columns(w), **row, "world_index": w.get("world_index")})
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
    return records.derived_frame(("stigmergy.agents", answer_rule), lambda: _agent_frame(records, answer_rule))


def _agent_frame(records: RunRecords, answer_rule: str | None) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        cols = _cell_columns(w)
        valid = w["valid"]
        steps = records.steps.get(w["world_id"], [])
        for r in _agent_rows(records, w, steps, answer_rule or w["cell"]["answer_rule"]):
            rows.append({**cols, **r, "world_valid": valid, "world_index": w.get("world_index")})
    return pd.DataFrame(rows)


def monitor_frame(records: RunRecords) -> pd.DataFrame:
    """One row per monitor-labelled step of a valid world: its label (None where the
    monitor's call failed), and whether the step was a read, a cross-agent read."""
    rows = []
    for w in records.worlds:
        if not w.get("valid"):
            continue
        for s in records.steps.get(w["world_id"], []):
            if "monitor" not in s:
                continue
            op = (s.get("op") or {}).get("op") if s.get("valid") else None
            effect = s.get("effect") or {}
            read = op == "read" and bool(effect.get("found"))
            rows.append({"cell_id": w["cell_id"], "world_id": w["world_id"], "agent": s["agent"], "seq": s["seq"],
                         "label": (s["monitor"] or {}).get("label"), "read": read,
                         "cross_agent_read": read and bool(effect.get("cross_agent"))})
    return pd.DataFrame(rows, columns=["cell_id", "world_id", "agent", "seq", "label", "read", "cross_agent_read"])


# -- attrition -----------------------------------------------------------------------------
VALIDITY_GRID: tuple[tuple[str, str], ...] = tuple((p, v) for p in ("strict", "lenient")
                                                   for v in ("any-agent", "pair-only", "none"))
INVALID_SHAPES: tuple[str, ...] = ("fenced", "prose-wrapped", "several objects", "unknown op", "missing fields",
                                   "bad JSON", "empty")


def failure_cause(error: str | None) -> str | None:
    """A failed call's cause as a short class: the error's text up to its first
    colon or parenthesis (the provider's exception name, or our own reason)."""
    if not error:
        return None
    head = str(error).split(":", 1)[0].split("(", 1)[0].strip()
    return head[:60] or "unknown"


def invalid_shape(outcome: dict[str, Any] | None, shape: dict[str, Any]) -> str | None:
    """Why a reply is invalid under one parser rule, as one of INVALID_SHAPES (None
    when it is valid). An extracted object with a bad operation is classed by the
    operation; a reply no object could be taken from is classed by its shape."""
    if outcome is None or outcome.get("valid"):
        return None
    error = str(outcome.get("error") or "")
    if error.startswith("unknown operation"):
        return "unknown op"
    if error.startswith(('missing "op"', '"read"', '"write"', '"submit"', "JSON nested")):
        return "missing fields"
    if shape.get("empty") or error == "empty reply":
        return "empty"
    if shape.get("multi_object"):
        return "several objects"
    if shape.get("fenced"):
        return "fenced"
    if shape.get("prose_wrapped"):
        return "prose-wrapped"
    return "bad JSON"


def reply_frame(records: RunRecords) -> pd.DataFrame:
    """One row per recorded reply that got an answer (failed calls are counted per
    world): why it is invalid under each parser rule, re-parsed from its raw text."""
    return records.derived_frame(("stigmergy.replies",), lambda: _reply_frame(records))


@functools.lru_cache(maxsize=1 << 16)
def invalid_shapes(text: str, ops: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Why a reply text is invalid under the strict and the lenient rule, re-parsed from
    the text: a pure function, remembered because large simulated run sets repeat
    their texts (parsing them again was a quarter of `workbench metrics` at 10k worlds)."""
    from workbench.worlds.stigmergy.parsing import parse_both

    parsed = parse_both(text, ops)
    return invalid_shape(parsed["strict"], parsed["shape"]), invalid_shape(parsed["lenient"], parsed["shape"])


def _reply_frame(records: RunRecords) -> pd.DataFrame:
    rows = []
    for w in records.worlds:
        ops = tuple(w.get("allowed_ops") or ())
        cell_id, world_id = w["cell_id"], w["world_id"]
        for s in records.steps.get(world_id, []):
            if s.get("parse") is None:
                continue
            strict, lenient = invalid_shapes(s["reply"].get("text") or "", ops)
            rows.append((cell_id, world_id, s["agent"], strict, lenient))
    return pd.DataFrame(rows, columns=["cell_id", "world_id", "agent", "invalid:strict", "invalid:lenient"])


def validity_frame(records: RunRecords) -> pd.DataFrame:
    """One row per world: whether it is valid under every (parser, validity) rule
    pair, recomputed from the raw replies, its own rules, and a failed call's cause."""
    return records.derived_frame(("stigmergy.validity",), lambda: _validity_frame(records))


def _validity_frame(records: RunRecords) -> pd.DataFrame:
    from workbench.worlds.stigmergy.metrics import reparse_validity

    rows = []
    for w in records.worlds:
        steps = records.steps.get(w["world_id"], [])
        row: dict[str, Any] = {"cell_id": w["cell_id"], "world_id": w["world_id"], "failed": bool(w.get("failed")),
                               "failure_cause": failure_cause((w.get("failed") or {}).get("error")),
                               "own_parser": w["cell"]["parser"], "own_validity": w["cell"]["validity"]}
        for parser, validity in VALIDITY_GRID:
            row[f"valid:{parser}:{validity}"] = bool(reparse_validity(w, steps, parser, validity)["valid"])
        rows.append(row)
    cols = ["cell_id", "world_id", "failed", "failure_cause", "own_parser", "own_validity",
            *(f"valid:{p}:{v}" for p, v in VALIDITY_GRID)]
    return pd.DataFrame(rows, columns=cols)


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
