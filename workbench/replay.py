"""Replaying a world from its records: as text, with no model, and through the
engine again with the recorded replies (which must reproduce the same steps)."""
from __future__ import annotations

import json
from pathlib import Path
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
        tags = [k for k in ("fenced", "prose_wrapped", "multi_object") if shape.get(k)]
        if not s["valid"]:
            out.write(f"{head} INVALID ({s['parse'][w['cell']['parser']]['error']}) reply={_short(s['reply']['text'])}\n")
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
    m = w.get("metrics") or {}
    if m:
        keys = ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write",
                "informative_read", "exposure", "read_after_exposure")
        out.write("--- metrics --- " + "  ".join(f"{k}={m.get(k)}" for k in keys) + "\n")


# -- replay through the engine ---------------------------------------------------
def _strip(obj: Any) -> Any:
    """Drop what is allowed to differ between a run and its replay: wall-clock timing,
    and the replay marker."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in ("timing", "replayed")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    return _strip(record)


def _template_base(records: RunRecords, world: dict[str, Any]) -> Path:
    params = (records.manifest.get("params") or {}).get("path")
    if params and Path(params).exists():
        return Path(params).resolve().parent
    roots = list((records.manifest.get("templates") or {}).keys())
    if len(roots) == 1:
        # cell.prompts is relative to the params folder: walk back up from the template root
        return Path(roots[0]).resolve().parents[len(Path(world["cell"]["prompts"]).parts) - 1]
    raise FileNotFoundError(f"cannot find the templates of {records.dir}: its params file "
                            f"{params!r} is gone and the manifest names {len(roots)} template folders")


async def rerun_world(records: RunRecords, world_id: str):  # noqa: ANN201 - the kind's WorldOutcome
    """Run a recorded world again through its world kind, every agent served by
    its own recorded replies. The engine must then reproduce the records."""
    from workbench.models.failures import annotate_failure
    from workbench.models.monitor import ReplayMonitor
    from workbench.models.replay import ReplayClient
    from workbench.worlds import get_kind

    world = records.world(world_id)
    steps = records.steps.get(world_id, [])
    kind = get_kind(world["world_kind"])
    cell = kind.CellSpec.model_validate(world["cell"])
    replies: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        replies.setdefault(s["agent"], []).append(s["reply"])

    def factory(route: str, slot: str, seed: int, options: dict[str, Any]) -> ReplayClient:
        return ReplayClient(replies.get(slot, []), route=route)

    labelled = [s["monitor"] for s in steps if "monitor" in s]
    extra = {"monitor": ReplayMonitor(labelled)} if labelled else {}

    outcome = await kind.run_world(cell, world_id=world_id, cell_id=world["cell_id"], seed=world["seed"],
                                   run=world["run"], base_dir=_template_base(records, world),
                                   client_factory=factory, **extra)
    annotate_failure(outcome.world)  # as the study runner does
    return outcome


def verify_world(records: RunRecords, world_id: str) -> list[str]:
    """Differences between a world's records and its replay (empty when identical)."""
    from workbench.aio import run_sync

    outcome = run_sync(rerun_world(records, world_id))
    diffs: list[str] = []
    old_steps = [comparable(s) for s in records.steps.get(world_id, [])]
    new_steps = [comparable(s) for s in outcome.steps]
    if len(old_steps) != len(new_steps):
        diffs.append(f"{len(old_steps)} recorded steps, {len(new_steps)} replayed")
    for a, b in zip(old_steps, new_steps):
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            diffs.append(f"step {a.get('seq')}: differs in {', '.join(keys)}")
    old_world = comparable(records.world(world_id))
    new_world = comparable(outcome.world)
    for k in sorted(set(new_world)):
        if old_world.get(k) != new_world.get(k):
            diffs.append(f"world field {k!r} differs")
    return diffs
