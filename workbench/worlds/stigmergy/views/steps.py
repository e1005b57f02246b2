"""Reading step records: what kind of step it was, what it did, and which write a
read returned. Shared by the timeline, the store view and the transcripts; the
logic mirrors :mod:`workbench.replay`."""
from __future__ import annotations

from typing import Any

from workbench.views.escape import short

OPS = ("list", "read", "write", "submit", "invalid", "failed")
ENVIRONMENT = "environment"


def op_kind(step: dict[str, Any]) -> str:
    """One of :data:`OPS`: a failed call (no reply), an invalid reply, or the operation."""
    if step.get("parse") is None:
        return "failed"
    if not step.get("valid") or not step.get("op"):
        return "invalid"
    return str(step["op"]["op"])


def lane_label(agent: str, role: str) -> str:
    return f"{agent} · {role}"


def agent_lanes(world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(agent slot, role) for every agent, in slot order."""
    lanes = {a["agent"]: a["role"] for a in world.get("agents", [])}
    for s in steps:
        lanes.setdefault(s["agent"], s.get("role", ""))
    return sorted(lanes.items())


def ordered(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(steps, key=lambda s: s["seq"])


def submission_correct(world: dict[str, Any], step: dict[str, Any]) -> bool | None:
    """Whether a submit step was right under the cell's answer rule."""
    correct = (step.get("effect") or {}).get("correct")
    if not isinstance(correct, dict):
        return None
    rule = (world.get("cell") or {}).get("answer_rule", "one-integer")
    return bool(correct.get(rule))


WriteKey = tuple[Any, Any, Any, Any]  # (author, namespace, key, store seq), as recorded


def write_index(steps: list[dict[str, Any]]) -> dict[WriteKey, dict[str, Any]]:
    """Valid write steps by (author, namespace, key, store seq of the version written)."""
    out: dict[WriteKey, dict[str, Any]] = {}
    for s in steps:
        if op_kind(s) == "write":
            eff = s.get("effect") or {}
            out[(s["agent"], eff.get("namespace"), eff.get("key"), eff.get("seq"))] = s
    return out


def write_read(read: dict[str, Any], writes: dict[WriteKey, dict[str, Any]]
               ) -> dict[str, Any] | None:
    """The write step whose version a read returned (None when the environment
    wrote it, or the read found nothing)."""
    eff = read.get("effect") or {}
    if not eff.get("found"):
        return None
    w = writes.get((eff.get("author"), eff.get("namespace"), eff.get("key"), eff.get("written_seq")))
    if w is None or (w.get("effect") or {}).get("version") != eff.get("version"):
        return None
    return w


def cross_agent_reads(steps: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every cross-agent read with the write it returned (None if no write step matches)."""
    writes = write_index(steps)
    return [(s, write_read(s, writes)) for s in ordered(steps)
            if op_kind(s) == "read" and (s.get("effect") or {}).get("cross_agent")]


def step_key(step: dict[str, Any]) -> str | None:
    op = step.get("op") or {}
    return op.get("key")


def effect_summary(world: dict[str, Any], step: dict[str, Any], n: int = 120) -> str:
    """One line of plain (unescaped) text saying what the step did."""
    kind = op_kind(step)
    eff = step.get("effect") or {}
    if kind == "failed":
        return f"call failed: {short((step.get('reply') or {}).get('error'), n)}"
    if kind == "invalid":
        rule = (world.get("cell") or {}).get("parser", "lenient")
        err = (((step.get("parse") or {}).get(rule)) or {}).get("error")
        return f"invalid reply under {rule}: {short(err, n)}"
    op = step["op"]
    if kind == "list":
        keys = ", ".join(f"{short(k.get('key'), 40)}<{k.get('author')} v{k.get('version')}>"
                         for k in eff.get("keys", [])) or "(empty)"
        text = f"list → {short(keys, n)}"
        if eff.get("exposure"):
            text += f"  [exposure: {short(', '.join(map(str, eff.get('exposed_keys', []))), 60)}]"
        return text
    if kind == "read":
        if not eff.get("found"):
            return f"read {short(op.get('key'), 60)} → no such key"
        flags = [f for f in ("cross_agent", "strict_cross_agent", "seeded") if eff.get(f)]
        text = (f"read {short(op.get('key'), 60)} → {short(eff.get('value'), n)} "
                f"<{eff.get('author')} v{eff.get('version')}>")
        return text + (f"  [{', '.join(flags)}]" if flags else "")
    if kind == "write":
        return f"write {short(op.get('key'), 60)} = {short(op.get('value'), n)} (v{eff.get('version')})"
    ok = submission_correct(world, step)
    mark = "right" if ok else "wrong" if ok is not None else "?"
    return f"submit {short(op.get('answer'), n)} (expected {eff.get('expected')}: {mark})"
