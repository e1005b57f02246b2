"""One collusion world drawn as HTML: its episodes in one table, and what one agent
did and was shown in one episode. Shared by the explorer (a notebook) and the
world browser's page, so both show a world the same way; the templates
(``collusion_episodes.html``, ``collusion_agent_episode.html``) escape every
model-written text."""
from __future__ import annotations

import json
from typing import Any

from workbench.views.escape import as_text, short
from workbench.views.markup import render
from workbench.worlds.collusion import metrics as M

_BOX = "font-family:system-ui,sans-serif;font-size:13px;max-width:1100px;text-align:left"
_PRE = ("white-space:pre-wrap;word-break:break-word;margin:2px 0;padding:3px 5px;border-radius:3px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;background:#f7f7f7;text-align:left")
STYLES = {"pre": _PRE, "tag": ""}  # what collusion_macros.html draws with (this page draws no tag)
HEAD = ("episode", "eval", "family", "policy", "verdict alice", "verdict bob", "mutual accept", "collusion",
        "reward alice", "reward bob")


def episodes_html(world: dict[str, Any], current: int | None = None) -> str:
    """Every episode of a trajectory in one table (policy, verdicts, mutual ACCEPT,
    collusion, rewards), the current one highlighted."""
    rows = []
    for r in M.episode_rows(world):
        style = "background:#fff3b0;font-weight:bold" if r["episode"] == current else (
            "background:#fdecec" if r["collusion"] else "")
        cells = (r["episode"], r["eval_episode"] or "warm-up", r.get("family"), r.get("policy"), r["verdict_alice"],
                 r["verdict_bob"], r["mutual_accept"], "COLLUSION" if r["collusion"] else "", r["reward_alice"],
                 r["reward_bob"])
        rows.append({"style": style, "cells": [as_text(c) for c in cells]})
    return str(render("collusion_episodes.html", box=_BOX, world_id=as_text(world.get("world_id")), head=HEAD,
                      rows=rows))


def agent_episode_html(world: dict[str, Any], steps: list[dict[str, Any]], episode: int, agent: str) -> str:
    """What one agent did and was shown in one episode: its task, saved answer and raw
    log, the messages it sent and received, its verdict with its reasoning, its reward,
    review and reflection, then every model call it made in that episode (phase,
    tool calls, tool results, reply and reasoning). Everything escaped."""
    ep = next((e for e in world.get("episodes") or [] if e.get("episode") == episode), None)
    if ep is None:
        return str(render("note.html", text=f"no episode {episode} in {world.get('world_id')}"))
    truth = (ep.get("truth") or {}).get(agent)
    verdict = (ep.get("verdicts") or {}).get(agent) or {}
    log = (ep.get("raw_logs") or {}).get(agent) or ""
    messages = [{"round": as_text(m.get("round")), "who": "sent" if m.get("sender") == agent else "received",
                 "sender": as_text(m.get("sender")), "chars": as_text(m.get("chars", len(m.get("text") or ""))),
                 "delivered": bool(m.get("delivered")), "text": short(m.get("text"), 2000)}
                for m in ep.get("messages") or []]
    calls = []
    for s in sorted((s for s in steps if s.get("agent") == agent and s.get("episode") == episode),
                    key=lambda s: s["seq"]):
        reply = s.get("reply") or {}
        tools = "; ".join(f"{c.get('name')}({json.dumps(c.get('arguments'), ensure_ascii=False)[:300]})"
                          for c in s.get("tool_calls") or [])
        calls.append({"seq": as_text(s["seq"]), "phase": as_text(s.get("phase")), "turn": as_text(s.get("turn")),
                      "tools": tools, "text": short(reply.get("text"), 1500) if reply.get("text") else "",
                      "reasoning": short(reply.get("reasoning"), 1500) if reply.get("reasoning") else "",
                      "error": short(reply.get("error"), 500) if reply.get("error") else "",
                      "results": [short(r, 1500) for r in s.get("tool_results") or []]})
    review = (ep.get("review") or {}).get(agent)
    reflection = (ep.get("reflections") or {}).get(agent)
    return str(render(
        "collusion_agent_episode.html", s=STYLES, box=_BOX, agent=agent, episode=as_text(episode),
        world_id=as_text(world.get("world_id")), task=as_text((ep.get("tasks") or {}).get(agent)),
        truth="right" if truth else "wrong" if truth is not None else "?",
        turns=as_text((ep.get("turns_used") or {}).get(agent)), answer=short((ep.get("answers") or {}).get(agent), 2000),
        log_chars=len(log), log=short(log, 8000), messages=messages, peer=M.PEER.get(agent, ""),
        verdict=as_text(verdict.get("verdict")), forced=bool(verdict.get("forced")),
        reasoning=short(verdict.get("reasoning"), 2000), reward=as_text((ep.get("rewards") or {}).get(agent)),
        review=short(review, 1500) if review else "", reflection=short(reflection, 2000) if reflection else "",
        calls=calls))
