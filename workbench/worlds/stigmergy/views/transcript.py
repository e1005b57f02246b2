"""Each agent's conversation as self-contained HTML (template
``stigmergy_transcripts.html``): inline CSS, no scripts, no external resources;
every piece of model- or store-derived text is escaped by the template."""
from __future__ import annotations

from typing import Any

from workbench.errors import UnknownNameError
from workbench.routes import is_simulated_route
from workbench.views.escape import as_text
from workbench.views.markup import render
from workbench.worlds.stigmergy.views.steps import agent_lanes, effect_summary, lane_label, op_kind, ordered, submission_correct

_BOX = "font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;line-height:1.4;max-width:980px"
_PRE = ("white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:6px 8px;border-radius:4px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px")
_SYSTEM = _PRE + ";background:#f4f4f4;border:1px solid #ddd"
_USER = _PRE + ";background:#eef5ff;border:1px solid #c9dcf5"
_MODEL = _PRE + ";background:#fff8e8;border:1px solid #eedcae"
_BAD = _PRE + ";background:#fdecec;border:1px solid #f0b4b4"
_TAG = "display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;margin-left:6px"
STYLES = {"box": _BOX, "system": _SYSTEM, "user": _USER, "model": _MODEL, "bad": _BAD, "tag": _TAG}
_TAG_COLOURS = {"list": "#1f77b4", "read": "#2ca02c", "write": "#ff7f0e", "submit": "#9467bd",
                "invalid": "#d62728", "failed": "#444444"}


def _step(world: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    kind = op_kind(s)
    reply = s.get("reply") or {}
    return {"seq": as_text(s["seq"]), "agent_step": as_text(s.get("agent_step")), "t_done": as_text(s.get("t_done")),
            "kind": kind, "colour": _TAG_COLOURS.get(kind, "#777"),
            "ok": submission_correct(world, s) if kind == "submit" else None,
            "effect": effect_summary(world, s), "error": as_text(reply.get("error") or ""),
            "text": as_text(reply.get("text") or ""), "reasoning": as_text(reply.get("reasoning") or ""),
            "has_result": s.get("result") is not None, "result": as_text(s.get("result"))}


def _agent(world: dict[str, Any], steps: list[dict[str, Any]], agent: str) -> dict[str, Any]:
    info = next((a for a in world.get("agents", []) if a["agent"] == agent), None)
    if info is None:
        raise UnknownNameError(f"no agent {agent!r} in world {world.get('world_id')!r}")
    mine = [s for s in ordered(steps) if s["agent"] == agent]
    sub = info.get("submission")
    if sub:
        rule = (world.get("cell") or {}).get("answer_rule", "one-integer")
        ok = bool((sub.get("correct") or {}).get(rule))
        answer = f"answer {as_text(sub.get('answer'))} " + ("✓" if ok else "✗")
    else:
        answer = "no answer"
    route = info.get("route", "")
    return {"lane": lane_label(agent, info.get("role", "")), "route": as_text(route),
            "simulated": is_simulated_route(str(route)), "answer": answer,
            "system_prompt": as_text(info.get("system_prompt", "")), "task_text": as_text(info.get("task_text", "")),
            "steps": [_step(world, s) for s in mine]}


def _render(world: dict[str, Any], agents: list[dict[str, Any]], heading: bool = True) -> str:
    return str(render("stigmergy_transcripts.html", s=STYLES, heading=heading, world_id=as_text(world.get("world_id")),
                      cell_label=as_text(world.get("cell_label") or ""), agents=agents))


def transcript_html(world: dict[str, Any], steps: list[dict[str, Any]], agent: str) -> str:
    """One agent's conversation: system prompt, task text, then every reply and
    the result it got, in a ``<details>`` block."""
    return _render(world, [_agent(world, steps, agent)], heading=False)


def transcripts_html(world: dict[str, Any], steps: list[dict[str, Any]]) -> str:
    """Every agent's transcript, one ``<details>`` block each, under a heading."""
    return _render(world, [_agent(world, steps, agent) for agent, _ in agent_lanes(world, steps)
                           if any(a["agent"] == agent for a in world.get("agents", []))])
