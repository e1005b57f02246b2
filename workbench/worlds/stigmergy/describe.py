"""A recorded shared-store world as text (`workbench replay --world`): its setup, then
every step in the order it took effect, with no model called."""
from __future__ import annotations

import json
from typing import Any, TextIO

from workbench.records import RunRecords


def _short(value: Any, n: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[: n - 1] + "…"


def print_world(records: RunRecords, world_id: str, out: TextIO, *, full: bool = False) -> None:
    """The world's setup, then every step in the order it took effect."""
    w = records.world(world_id)
    steps = records.steps.get(world_id, [])
    out.write(f"world {w['world_id']}  cell {w['cell_id']} ({w.get('cell_label', '')})  seed {w['seed']}\n")
    out.write(f"form {w['tasks']['form']}  joint answer {w['joint_answer']}  "
              f"valid {w['valid']}  failed {bool(w['failed'])}\n")
    for a in w["agents"]:
        t = a["task"]
        keys = f" own {t['own_key']}={t['own_value']} partner {t['partner_key']}" if t.get("own_key") else ""
        out.write(f"  {a['agent']}  {a['role']:<7} {a['route']:<22} {t['kind']:<10} expects {t['expected']}{keys}\n")
    for e in w.get("prepopulated", []):
        out.write(f"  seeded: {e['key']} = {_short(e['value'])} (by {e['author']})\n")
    if full and w["agents"]:
        out.write("--- system prompt (first agent) ---\n" + w["agents"][0]["system_prompt"] + "\n")
    out.write("--- steps ---\n")
    for s in steps:
        head = f"{s['seq']:>3} t={s['t_done']:>8.3f} {s['agent']} {s['role']:<7} #{s['agent_step']:<2}"
        if s.get("parse") is None:
            out.write(f"{head} FAILED CALL: {s['reply'].get('error')}\n")
            continue
        shape = s["parse"]["shape"]
        tags = [k for k in ("fenced", "prose_wrapped", "multi_object", "no_call", "multi_call", "unknown_tool",
                            "bad_args") if shape.get(k)]
        if not s["valid"]:
            calls = "".join(f" call={c.get('name')}({_short(c.get('arguments'))})" for c in s["reply"].get("tool_calls") or [])
            out.write(f"{head} INVALID ({s['parse'][w['cell']['parser']]['error']}) reply={_short(s['reply']['text'])}"
                      f"{calls}\n")
            continue
        op, eff = s["op"], s["effect"] or {}
        kind = op["op"]
        if kind == "list":
            keys = ", ".join(f"{k['key']}<{k['author']}>" for k in eff.get("keys", [])) or "(empty)"
            desc = f"list -> {keys}" + ("  [exposure]" if eff.get("exposure") else "")
        elif kind == "read":
            if eff.get("found"):
                flags = [f for f in ("cross_agent", "strict_cross_agent", "seeded") if eff.get(f)]
                desc = f"read {op['key']} -> {_short(eff.get('value'))} <{eff.get('author')} v{eff.get('version')}>"
                desc += f"  [{', '.join(flags)}]" if flags else ""
            else:
                desc = f"read {op['key']} -> no such key"
        elif kind == "write":
            desc = f"write {op['key']} = {_short(op['value'])} (v{eff.get('version')})"
        else:
            ok = eff.get("correct", {})
            desc = f"submit {_short(op['answer'])} (expected {eff.get('expected')}; {ok})"
        out.write(f"{head} {desc}{'  {' + ','.join(tags) + '}' if tags else ''}\n")
        if full:
            out.write(f"      reply: {_short(s['reply']['text'], 200)}\n")
            for c in s["reply"].get("tool_calls") or []:
                out.write(f"      call: {c.get('name')}({_short(c.get('arguments'), 200)})\n")
    m = w.get("metrics") or {}
    if m:
        names = ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write",
                "informative_read", "exposure", "read_after_exposure")
        out.write("--- metrics --- " + "  ".join(f"{k}={m.get(k)}" for k in names) + "\n")
