"""Each agent's conversation as self-contained HTML: inline CSS, no scripts, no
external resources, and every piece of model- or store-derived text passed
through ``html.escape``."""
from __future__ import annotations

from typing import Any

from workbench.errors import UnknownNameError
from workbench.routes import is_simulated_route
from workbench.views.escape import esc_html
from workbench.worlds.stigmergy.views.steps import agent_lanes, effect_summary, lane_label, op_kind, ordered, submission_correct

_BOX = "font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;line-height:1.4;max-width:980px"
_PRE = ("white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:6px 8px;border-radius:4px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px")
_SYSTEM = _PRE + ";background:#f4f4f4;border:1px solid #ddd"
_USER = _PRE + ";background:#eef5ff;border:1px solid #c9dcf5"
_MODEL = _PRE + ";background:#fff8e8;border:1px solid #eedcae"
_BAD = _PRE + ";background:#fdecec;border:1px solid #f0b4b4"
_TAG = "display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;margin-left:6px"
_TAG_COLOURS = {"list": "#1f77b4", "read": "#2ca02c", "write": "#ff7f0e", "submit": "#9467bd",
                "invalid": "#d62728", "failed": "#444444"}


def _tag(text: str, colour: str) -> str:
    return f'<span style="{_TAG};background:{colour};color:white">{esc_html(text)}</span>'


def _block(title: str, body: str, style: str) -> str:
    return f'<div style="margin:6px 0"><b>{esc_html(title)}</b><div style="{style}">{esc_html(body)}</div></div>'


def _step_html(world: dict[str, Any], s: dict[str, Any]) -> str:
    kind = op_kind(s)
    reply = s.get("reply") or {}
    head = (f'<div style="margin-top:10px;border-top:1px solid #eee;padding-top:4px;color:#555">'
            f'step {esc_html(s["seq"])} · own step {esc_html(s.get("agent_step"))} · t={esc_html(s.get("t_done"))}'
            f'{_tag(kind, _TAG_COLOURS.get(kind, "#777"))}')
    if kind == "submit":
        ok = submission_correct(world, s)
        head += _tag("right" if ok else "wrong", "#2ca02c" if ok else "#d62728")
    head += f' <span style="color:#777">{esc_html(effect_summary(world, s))}</span></div>'
    parts = [head]
    if kind == "failed":
        parts.append(_block("call failed", reply.get("error") or "", _BAD))
        return "".join(parts)
    parts.append(_block("reply", reply.get("text") or "", _BAD if kind == "invalid" else _MODEL))
    if reply.get("reasoning"):
        parts.append(f'<details style="margin:2px 0 2px 12px"><summary>reasoning text</summary>'
                     f'<div style="{_MODEL}">{esc_html(reply["reasoning"])}</div></details>')
    result = s.get("result")
    if result is not None:
        parts.append(_block("result", result, _USER))
    elif kind == "submit":
        parts.append('<div style="color:#777">(submitted: no further turn)</div>')
    else:
        parts.append('<div style="color:#777">(step limit reached: no further turn)</div>')
    return "".join(parts)


def transcript_html(world: dict[str, Any], steps: list[dict[str, Any]], agent: str) -> str:
    """One agent's conversation: system prompt, task text, then every reply and
    the result it got, in a ``<details>`` block."""
    info = next((a for a in world.get("agents", []) if a["agent"] == agent), None)
    if info is None:
        raise UnknownNameError(f"no agent {agent!r} in world {world.get('world_id')!r}")
    mine = [s for s in ordered(steps) if s["agent"] == agent]
    sub = info.get("submission")
    if sub:
        rule = (world.get("cell") or {}).get("answer_rule", "one-integer")
        ok = bool((sub.get("correct") or {}).get(rule))
        answer = f"answer {esc_html(sub.get('answer'))} " + ("✓" if ok else "✗")
    else:
        answer = "no answer"
    route = info.get("route", "")
    sim = _tag("simulated", "#8c564b") if is_simulated_route(str(route)) else ""
    summary = (f"<b>{esc_html(lane_label(agent, info.get('role', '')))}</b> · {esc_html(route)}{sim} · "
               f"{len(mine)} steps · {answer}")
    body = [f'<details style="margin:4px 0 4px 12px"><summary>system prompt</summary>'
            f'<div style="{_SYSTEM}">{esc_html(info.get("system_prompt", ""))}</div></details>',
            _block("task", info.get("task_text", ""), _USER)]
    body += [_step_html(world, s) for s in mine]
    return (f'<details style="{_BOX};border:1px solid #ccc;border-radius:6px;padding:4px 10px;margin:6px 0">'
            f'<summary style="cursor:pointer">{summary}</summary>{"".join(body)}</details>')


def transcripts_html(world: dict[str, Any], steps: list[dict[str, Any]]) -> str:
    """Every agent's transcript, one ``<details>`` block each, under a heading."""
    parts = [transcript_html(world, steps, agent) for agent, _ in agent_lanes(world, steps)
             if any(a["agent"] == agent for a in world.get("agents", []))]
    head = (f'<div style="{_BOX}"><div style="margin:4px 0"><b>transcripts of world '
            f'{esc_html(world.get("world_id"))}</b> · {esc_html(world.get("cell_label") or "")}</div>')
    return head + "".join(parts) + "</div>"
