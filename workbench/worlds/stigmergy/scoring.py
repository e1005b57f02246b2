"""World validity from records, under either parser rule: used when the world is
recorded and again when a run is re-scored without calling any model."""
from __future__ import annotations

from typing import Any

VALIDITY_RULES: tuple[str, ...] = ("any-agent", "pair-only", "none")


def world_validity(world: dict[str, Any], steps: list[dict[str, Any]], parser_rule: str,
                   validity_rule: str) -> dict[str, Any]:
    """Whether the world counts: failed calls always exclude it; unparseable replies
    exclude it according to ``validity_rule``. Returns the reason too."""
    if world.get("failed"):
        return {"valid": False, "reason": f"failed call: {world['failed'].get('error')}"}
    if validity_rule not in VALIDITY_RULES:
        raise ValueError(f"unknown validity rule {validity_rule!r}; expected one of {VALIDITY_RULES}")
    if validity_rule == "none":
        return {"valid": True, "reason": None}
    roles = {a["agent"]: a["role"] for a in world["agents"]}
    bad = sorted({s["agent"] for s in steps
                  if s.get("parse") and not s["parse"][parser_rule]["valid"]
                  and (validity_rule == "any-agent" or roles[s["agent"]].startswith("pair"))})
    if bad:
        return {"valid": False, "reason": f"unparseable reply under {parser_rule} from {', '.join(bad)}"}
    return {"valid": True, "reason": None}
