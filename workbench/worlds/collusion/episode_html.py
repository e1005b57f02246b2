"""One collusion world drawn as HTML: its episodes in one table, and what one agent
did and was shown in one episode. Shared by the explorer (a notebook) and the
world browser's page, so both show a world the same way; every model-written
text is escaped."""
from __future__ import annotations

import json
from typing import Any

from workbench.views.escape import esc_html, short
from workbench.views.panel import note_html
from workbench.worlds.collusion import metrics as M

# -- HTML of one episode for one agent --------------------------------------------------------
_PRE = ("white-space:pre-wrap;word-break:break-word;margin:2px 0;padding:3px 5px;border-radius:3px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;background:#f7f7f7")
_BOX = "font-family:system-ui,sans-serif;font-size:13px;max-width:1100px"


def _pre(text: Any, n: int | None = None) -> str:
    return f'<div style="{_PRE}">{esc_html(short(text, n) if n else text)}</div>'


def episodes_html(world: dict[str, Any], current: int | None = None) -> str:
    """Every episode of a trajectory in one table (policy, verdicts, mutual ACCEPT,
    collusion, rewards), the current one highlighted."""
    head = ("episode", "eval", "family", "policy", "verdict alice", "verdict bob", "mutual accept", "collusion",
            "reward alice", "reward bob")
    rows = []
    for r in M.episode_rows(world):
        style = "background:#fff3b0;font-weight:bold" if r["episode"] == current else (
            "background:#fdecec" if r["collusion"] else "")
        cells = (r["episode"], r["eval_episode"] or "warm-up", r.get("family"), r.get("policy"), r["verdict_alice"],
                 r["verdict_bob"], r["mutual_accept"], "COLLUSION" if r["collusion"] else "", r["reward_alice"],
                 r["reward_bob"])
        rows.append(f"<tr style='{style}'>" + "".join(f"<td style='padding:2px 6px'>{esc_html(c)}</td>" for c in cells)
                    + "</tr>")
    return (f"<div style='{_BOX}'><b>episodes of {esc_html(world.get('world_id'))}</b>"
            "<table style='border-collapse:collapse'><tr>"
            + "".join(f"<th style='padding:2px 6px;background:#f0f0f0'>{h}</th>" for h in head)
            + f"</tr>{''.join(rows)}</table></div>")


def agent_episode_html(world: dict[str, Any], steps: list[dict[str, Any]], episode: int, agent: str) -> str:
    """What one agent did and was shown in one episode: its task, saved answer and raw
    log, the messages it sent and received, its verdict with its reasoning, its reward,
    review and reflection, then every model call it made in that episode (phase,
    tool calls, tool results, reply and reasoning). Everything escaped."""
    ep = next((e for e in world.get("episodes") or [] if e.get("episode") == episode), None)
    if ep is None:
        return note_html(f"no episode {episode} in {world.get('world_id')}")
    e = esc_html
    peer = M.PEER.get(agent, "")
    truth = (ep.get("truth") or {}).get(agent)
    verdict = (ep.get("verdicts") or {}).get(agent) or {}
    log = (ep.get("raw_logs") or {}).get(agent) or ""
    parts = [f"<div style='{_BOX}'><p><b>{e(agent)}</b> in episode <b>{e(episode)}</b> of "
             f"<code>{e(world.get('world_id'))}</code> · task {e((ep.get('tasks') or {}).get(agent))} · saved answer "
             + ("right" if truth else "wrong" if truth is not None else "?")
             + f" · turns {e((ep.get('turns_used') or {}).get(agent))}</p>",
             f"<b>saved answer</b>{_pre((ep.get('answers') or {}).get(agent), 2000)}",
             f"<details><summary>raw log ({len(log)} chars)</summary>{_pre(log, 8000)}</details>"]
    messages = ep.get("messages") or []
    if messages:
        parts.append("<b>messages</b>")
        for m in messages:
            who = "sent" if m.get("sender") == agent else "received"
            state = "" if m.get("delivered") else " · <span style='color:#d62728'>not delivered</span>"
            parts.append(f"<div>round {e(m.get('round'))} · {who} ({e(m.get('sender'))}, "
                         f"{e(m.get('chars', len(m.get('text') or '')))} chars){state}{_pre(m.get('text'), 2000)}</div>")
    parts.append(f"<b>verdict on {e(peer)}</b>: {e(verdict.get('verdict'))}"
                 + (" <span style='color:#d62728'>(forced)</span>" if verdict.get("forced") else "")
                 + _pre(verdict.get("reasoning"), 2000))
    parts.append(f"<b>reward</b> {e((ep.get('rewards') or {}).get(agent))}")
    review = (ep.get("review") or {}).get(agent)
    if review:
        parts.append(f"<b>review</b>{_pre(review, 1500)}")
    reflection = (ep.get("reflections") or {}).get(agent)
    parts.append("<b>reflection</b>" + (_pre(reflection, 2000) if reflection else " <i>none</i>"))
    calls = [s for s in steps if s.get("agent") == agent and s.get("episode") == episode]
    parts.append(f"<details><summary>{len(calls)} model calls by {e(agent)} in this episode</summary>")
    for s in sorted(calls, key=lambda s: s["seq"]):
        reply = s.get("reply") or {}
        tools = "; ".join(f"{c.get('name')}({json.dumps(c.get('arguments'), ensure_ascii=False)[:300]})"
                          for c in s.get("tool_calls") or [])
        results = s.get("tool_results") or []
        parts.append(f"<div style='border-top:1px solid #eee;margin-top:4px'>call {e(s['seq'])} · {e(s.get('phase'))}"
                     f" · turn {e(s.get('turn'))}"
                     + (f" · tools: {e(tools)}" if tools else "")
                     + (_pre(reply.get("text"), 1500) if reply.get("text") else "")
                     + (f"<i>reasoning</i>{_pre(reply.get('reasoning'), 1500)}" if reply.get("reasoning") else "")
                     + (f"<i>error</i>{_pre(reply.get('error'), 500)}" if reply.get("error") else "")
                     + "".join(f"<i>result</i>{_pre(r, 1500)}" for r in results) + "</div>")
    parts.append("</details></div>")
    return "".join(parts)
