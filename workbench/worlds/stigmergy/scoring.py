"""World validity from records, under either parser rule: used when the world is
recorded and again when a run is re-scored without calling any model."""
from __future__ import annotations

from typing import Any

from workbench.errors import InputError
from workbench.worlds.stigmergy.parsing import step_valid

VALIDITY_RULES: tuple[str, ...] = ("any-agent", "pair-only", "none")


def world_validity(world: dict[str, Any], steps: list[dict[str, Any]], parser_rule: str,
                   validity_rule: str, *, reparse: bool = False) -> dict[str, Any]:
    """Whether the world counts: failed calls always exclude it; unparseable replies
    exclude it according to ``validity_rule``. With ``reparse`` the raw replies (texts,
    and tool calls in a cell acting through tools) are parsed again instead of trusting
    the recorded outcomes (re-scoring)."""
    if world.get("failed"):
        return {"valid": False, "reason": f"failed call: {world['failed'].get('error')}"}
    refused = sorted({s["agent"] for s in steps if ((s.get("reply") or {}).get("extra") or {}).get("refusal")})
    if refused:  # under every rule: the simulation could not act, so the world says nothing about behaviour
        cause = steps[[s["agent"] for s in steps].index(refused[0])]["reply"]["extra"]["refusal"]
        return {"valid": False, "reason": f"{cause} ({', '.join(refused)})"}
    if validity_rule not in VALIDITY_RULES:
        raise InputError(f"unknown validity rule {validity_rule!r}; expected one of {VALIDITY_RULES}")
    if validity_rule == "none":
        return {"valid": True, "reason": None}
    ops = tuple(world["allowed_ops"])
    actions = (world.get("cell") or {}).get("actions") or "json-text"  # absent: recorded before tools existed
    roles = {a["agent"]: a["role"] for a in world["agents"]}

    def unparseable(step: dict[str, Any]) -> bool:
        if step.get("parse") is None:  # a failed call, handled above
            return False
        if reparse:
            return not step_valid(step["reply"], parser_rule, ops, actions)
        return not step["parse"][parser_rule]["valid"]

    bad = sorted({s["agent"] for s in steps if unparseable(s)
                  and (validity_rule == "any-agent" or roles[s["agent"]].startswith("pair"))})
    if bad:
        return {"valid": False, "reason": f"unparseable reply under {parser_rule} from {', '.join(bad)}"}
    return {"valid": True, "reason": None}
