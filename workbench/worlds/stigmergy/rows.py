"""One world's rows of each shared-store frame (see :mod:`frames`), as functions of
that world's records alone: the frames are these rows concatenated, whether built
in one loop (frames) or world by world on every core (fastframes)."""
from __future__ import annotations

import functools
from typing import Any

from workbench.routes import is_simulated_world


def model_of(world: dict[str, Any]) -> str:
    """The cell's model as a table label: one route, or the set of routes joined."""
    routes = sorted({a["route"] for a in world["agents"]})
    return routes[0] if len(routes) == 1 else "+".join(routes)


def cell_columns(world: dict[str, Any]) -> dict[str, Any]:
    cell = world["cell"]
    model = model_of(world)
    return {
        "cell_label": world.get("cell_label") or world["cell_id"],
        "model": model,
        "simulated": is_simulated_world(world),
        **{k: cell.get(k) for k in ("condition", "clauses", "scheduler", "parser", "answer_rule", "validity")},
        "run_set": None,
    }


def world_frame_row(world: dict[str, Any], steps: list[dict[str, Any]], parser_rule: str | None,
                    answer_rule: str | None, agents: list[dict[str, Any]]) -> dict[str, Any]:
    """One world's row of :func:`frames.world_frame`, given its agent rows under the answer rule."""
    from workbench.worlds.stigmergy.metrics import world_row

    row = world_row(world, steps, parser_rule, answer_rule, agents=agents)
    return {**cell_columns(world), **row, "world_index": world.get("world_index")}


def agent_frame_rows(world: dict[str, Any], agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One world's rows of :func:`frames.agent_frame`, given its agent rows under the answer rule."""
    cols = cell_columns(world)
    valid = world["valid"]
    index = world.get("world_index")
    return [{**cols, **r, "world_valid": valid, "world_index": index} for r in agents]


MONITOR_COLUMNS = ["cell_id", "world_id", "agent", "seq", "label", "read", "cross_agent_read"]


def monitor_rows(w: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One world's rows of :func:`frames.monitor_frame`."""
    rows: list[tuple[Any, ...]] = []
    if not w.get("valid"):
        return rows
    for s in steps:
        if "monitor" not in s:
            continue
        op = (s.get("op") or {}).get("op") if s.get("valid") else None
        effect = s.get("effect") or {}
        read = op == "read" and bool(effect.get("found"))
        rows.append((w["cell_id"], w["world_id"], s["agent"], s["seq"], (s["monitor"] or {}).get("label"), read,
                     read and bool(effect.get("cross_agent"))))
    return rows


VALIDITY_GRID: tuple[tuple[str, str], ...] = tuple((p, v) for p in ("strict", "lenient")
                                                   for v in ("any-agent", "pair-only", "none"))
INVALID_SHAPES: tuple[str, ...] = ("fenced", "prose-wrapped", "several objects", "unknown op", "missing fields",
                                   "bad JSON", "empty")


def failure_cause(failed: dict[str, Any] | None) -> str | None:
    """A failed world's cause as its record classes it (``infrastructure: server error``,
    ``model: context length``): the class and cause written when the world ended, or, for
    records from before they were, the same classification of its error text. Never the
    exception's name: a malformed body and a 500 both arrive as InternalServerError."""
    if not failed:
        return None
    from workbench.models.failures import classify_error

    cause, cls = failed.get("cause"), failed.get("class")
    if not cause or not cls:
        cause, cls = classify_error(failed.get("error")) or ("client error", "infrastructure")
    return f"{cls}: {cause}"


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


@functools.lru_cache(maxsize=1 << 16)
def invalid_shapes(text: str, ops: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Why a reply text is invalid under the strict and the lenient rule, re-parsed from
    the text: a pure function, remembered because large simulated run sets repeat
    their texts (parsing them again was a quarter of `workbench metrics` at 10k worlds)."""
    from workbench.worlds.stigmergy.parsing import parse_both

    parsed = parse_both(text, ops)
    return invalid_shape(parsed["strict"], parsed["shape"]), invalid_shape(parsed["lenient"], parsed["shape"])


REPLY_COLUMNS = ["cell_id", "world_id", "agent", "invalid:strict", "invalid:lenient"]


def reply_rows(w: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One world's rows of :func:`frames.reply_frame`."""
    ops = tuple(w.get("allowed_ops") or ())
    cell_id, world_id = w["cell_id"], w["world_id"]
    tools = (w.get("cell") or {}).get("actions") == "tools"  # its replies are tool calls (issue 40)
    rows = []
    for s in steps:
        if s.get("parse") is None:
            continue
        if tools:
            from workbench.worlds.stigmergy.parsing import tool_invalid_shapes

            strict, lenient = tool_invalid_shapes(s["reply"], ops)
        else:
            strict, lenient = invalid_shapes(s["reply"].get("text") or "", ops)
        rows.append((cell_id, world_id, s["agent"], strict, lenient))
    return rows


VALIDITY_COLUMNS = ["cell_id", "world_id", "failed", "failure_cause", "own_parser", "own_validity",
                    *(f"valid:{p}:{v}" for p, v in VALIDITY_GRID)]


def validity_row(w: dict[str, Any], steps: list[dict[str, Any]]) -> tuple[Any, ...]:
    """One world's row of :func:`frames.validity_frame`."""
    from workbench.worlds.stigmergy.metrics import reparse_validity

    return (w["cell_id"], w["world_id"], bool(w.get("failed")), failure_cause(w.get("failed")),
            w["cell"]["parser"], w["cell"]["validity"],
            *(bool(reparse_validity(w, steps, parser, validity)["valid"]) for parser, validity in VALIDITY_GRID))
