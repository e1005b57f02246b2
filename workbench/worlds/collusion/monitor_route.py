"""A monitor route over collusion-world records: a model (or the simulated route
``sim-collusion-monitor/cues`` offline) reads one episode's channel (and, by the
factor ``reads``, the agents' private reasoning) and answers whether the agents
collude, with one JSON object ``{"collusion": true|false, "evidence": [...],
"explanation": ...}``.

Post hoc, like the judges (:mod:`judges`): the world never calls it, and a run
set can be monitored again by another route. It goes through the same model
interface (:func:`workbench.models.factory.make_client`) with the same request
shape and parameters (temperature 0 by default). The prompt comes from the
templates ``monitor_channel`` / ``monitor_reasoning`` of the collusion prompt
folder (``params/prompts/collusion``, or ``prompts``); each label is a line of
``monitors.jsonl`` beside the records, holding the prompt text, its SHA-256,
the template's SHA-256, the reply and the parsed flag, keyed by a hash of
(route, reads, prompt, parameters): rerunning skips what is already labelled.
A reply without a true/false ``collusion`` is ``unparseable``, a failed call
``error``; both count as not flagged in the tables (:func:`monitor.recorded_frame`).

Which monitor runs on which cell: the cell's declared ``monitor: {route,
reads}``, else the route and reading given to :func:`run_monitor`.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.models.base import ModelClient, ModelReply, ModelRequest
from workbench.models.factory import make_client
from workbench.seeding import derive_seed
from workbench.templates import template_set
from workbench.worlds.collusion.judges import (
    PROMPT_DIR,
    _append,
    parse_judgment,
    register_simulated_reader,
    simulated_json_reply,
)
from workbench.worlds.collusion.monitor import (
    MONITORS_FILE,
    READS,
    SimulatedMonitor,
    channel_block,
    episode_from_blocks,
    reasoning_text,
)
from workbench.worlds.collusion.rows import cell_label

TEMPLATES = {"channel": "monitor_channel", "channel+reasoning": "monitor_reasoning"}
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0}
SIM_ROUTE = "sim-collusion-monitor/cues"
SIM_MONITOR_PROFILES = ("cues",)


@dataclass(frozen=True)
class MonitorItem:
    """One episode for one monitor route: the prompt sent and where it came from."""

    route: str
    reads: str
    world_id: str
    cell_id: str
    cell: str
    episode: int
    policy: str
    template: str
    template_sha256: str
    prompt: str

    @property
    def item(self) -> str:
        return f"monitor:{self.route}:{self.reads}:{self.world_id}:{self.episode}"


def declared_monitor(world: dict[str, Any]) -> tuple[str, str] | None:
    """The (route, reads) a world's recorded cell declares (``monitor:``), or None."""
    m = (world.get("cell") or {}).get("monitor")
    if isinstance(m, dict) and m.get("route"):
        return str(m["route"]), str(m.get("reads") or "channel")
    return None


def monitor_items(world: dict[str, Any], route: str, reads: str, prompts: str | Path | None = None,
                  policies: Sequence[str] | None = None) -> list[MonitorItem]:
    """One item per episode of ``world`` (of the given policies; every one by default)."""
    if reads not in READS:
        raise InputError(f"monitor reads {reads!r}; expected one of {list(READS)}")
    templates = template_set(prompts or PROMPT_DIR)
    name = TEMPLATES[reads]
    sha = hashlib.sha256(templates.text(name).encode()).hexdigest()
    out = []
    for ep in world.get("episodes") or []:
        if policies is not None and ep.get("policy") not in policies:
            continue
        values: dict[str, Any] = {"policy": ep.get("policy"), "channel": channel_block(ep)}
        if reads == "channel+reasoning":
            values["reasoning"] = reasoning_text(ep) or "(no reasoning was recorded)"
        out.append(MonitorItem(route, reads, str(world["world_id"]), str(world.get("cell_id", "")), cell_label(world),
                               int(ep["episode"]), str(ep.get("policy")), name, sha,
                               templates.render(name, **values)))
    return out


def parse_label(text: str) -> dict[str, Any]:
    """``status`` ok (a true/false ``collusion``), else unparseable; ``flagged`` only when
    ok and true; the evidence quotes and explanation as given."""
    obj = parse_judgment(text or "")
    if obj is None or not isinstance(obj.get("collusion"), bool):
        return {"status": "unparseable", "flagged": False, "claimed": None, "evidence": [], "explanation": None}
    ev = obj.get("evidence")
    evidence = [str(x) for x in ev] if isinstance(ev, list) else ([str(ev)] if isinstance(ev, str) else [])
    expl = obj.get("explanation")
    return {"status": "ok", "flagged": bool(obj["collusion"]), "claimed": bool(obj["collusion"]),
            "evidence": evidence, "explanation": None if expl is None else str(expl)}


def cache_key(item: MonitorItem, params: dict[str, Any]) -> str:
    blob = json.dumps({"monitor": item.reads, "route": item.route, "prompt": item.prompt, "params": params},
                      sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


async def label_one(item: MonitorItem, *, seed: int, params: dict[str, Any],
                    client: ModelClient | None = None) -> dict[str, Any]:
    """One call, one record (never raises on a failed call: ``status`` error)."""
    key = cache_key(item, params)
    client = client or make_client(item.route, seed=derive_seed(seed, "monitor", key))
    reply: ModelReply = await client.complete(ModelRequest(messages=[{"role": "user", "content": item.prompt}],
                                                           params=dict(params)))
    if reply.failed:
        parsed: dict[str, Any] = {"status": "error", "flagged": False, "claimed": None, "evidence": [],
                                  "explanation": reply.error}
    else:
        parsed = parse_label(reply.text)
    return {"kind": "monitor_label", "item": item.item, "key": key, "route": item.route, "reads": item.reads,
            "world_id": item.world_id, "cell_id": item.cell_id, "cell": item.cell, "episode": item.episode,
            "policy": item.policy, **parsed, "model_returned": reply.model_returned,
            "simulated": bool((reply.extra or {}).get("simulated")), "reply_text": reply.text,
            "usage": reply.usage, "cost_usd": reply.cost_usd, "params": dict(params), "template": item.template,
            "template_sha256": item.template_sha256, "prompt": item.prompt,
            "prompt_sha256": hashlib.sha256(item.prompt.encode()).hexdigest()}


def collect_items(worlds: Sequence[dict[str, Any]], route: str | None = None, reads: str | None = None,
                  prompts: str | Path | None = None, policies: Sequence[str] | None = None) -> list[MonitorItem]:
    """Items for every world: its cell's declared monitor, or ``route``/``reads`` where
    given (they override the declaration). A run set where neither names a route is
    refused, naming the cell field."""
    items: list[MonitorItem] = []
    for w in worlds:
        declared = declared_monitor(w)
        r = route or (declared[0] if declared else None)
        if r is None:
            continue
        items.extend(monitor_items(w, r, reads or (declared[1] if declared else "channel"), prompts, policies))
    if not items and route is None and not any(declared_monitor(w) for w in worlds):
        raise InputError("no cell declares a monitor (cell field monitor: {route: ROUTE, reads: channel | "
                         "channel+reasoning}); give a route (--route) to monitor every cell")
    return items


async def arun_monitor(records: Any, route: str | None = None, *, reads: str | None = None, seed: int = 0,
                       concurrency: int = 4, prompts: str | Path | None = None, out: str | Path | None = None,
                       params: dict[str, Any] | None = None, limit: int | None = None,
                       policies: Sequence[str] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """The async form of :func:`run_monitor`."""
    from workbench.models.factory import check_route
    from workbench.records import load_run

    if isinstance(records, (str, Path)):
        records = load_run(records)
    if reads is not None and reads not in READS:
        raise InputError(f"monitor reads {reads!r}; expected one of {list(READS)}")
    params = dict(DEFAULT_PARAMS if params is None else params)
    items = collect_items(records.worlds, route, reads, prompts, policies)
    if limit is not None:
        items = items[:limit]
    for r in dict.fromkeys(it.route for it in items):
        check_route(r)
    path = Path(out) if out is not None else Path(records.dir) / MONITORS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r for r in _monitor_lines(path) if r.get("status") != "error"]  # failed calls are tried again
    done_items = {(r.get("item"), r["key"]): r for r in lines}
    by_key = {r["key"]: r for r in lines}
    results: dict[str, dict[str, Any]] = {}
    todo: list[MonitorItem] = []
    for it in items:
        key = cache_key(it, params)
        if (it.item, key) in done_items:
            results[it.item] = done_items[(it.item, key)]
        elif key in by_key:  # the same prompt labelled for another episode: the same answer, addressed here
            rec = {**by_key[key], "item": it.item, "world_id": it.world_id, "cell_id": it.cell_id, "cell": it.cell,
                   "episode": it.episode, "policy": it.policy}
            _append(path, rec)
            results[it.item] = rec
        else:
            todo.append(it)
    sem = asyncio.Semaphore(max(1, concurrency))
    done = 0

    async def one(it: MonitorItem) -> None:
        nonlocal done
        async with sem:
            rec = await label_one(it, seed=seed, params=params)
        results[it.item] = rec
        _append(path, rec)
        done += 1
        if progress is not None:
            progress(done, len(todo))

    try:
        await asyncio.gather(*(one(it) for it in todo))
    finally:
        if any(not it.route.split("/", 1)[0].startswith("sim") for it in todo):
            from workbench.models.litellm_client import aclose_clients

            await aclose_clients()
    return [results[it.item] for it in items if it.item in results]


def _monitor_lines(path: Path) -> list[dict[str, Any]]:
    from workbench.records import read_jsonl, repair_tail

    repair_tail(path)  # a kill mid-write leaves half a line: cut it, label that episode again
    return [r for r in read_jsonl(path) if r.get("kind") == "monitor_label" and r.get("key")]


def run_monitor(records: Any, route: str | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Label every episode of a run set (RunRecords or its directory) with each cell's
    declared monitor, or with ``route`` (and ``reads``) for every cell; labels are
    appended to ``monitors.jsonl`` beside the records (or ``out``) and reused on the
    next call. Keywords: ``reads``, ``seed``, ``concurrency``, ``prompts`` (a folder
    with ``monitor_channel.txt`` and ``monitor_reasoning.txt``), ``out``, ``params``
    (default temperature 0), ``limit``, ``policies`` (None: every episode),
    ``progress``. Returns the label records."""
    from workbench.aio import run_sync

    return run_sync(arun_monitor(records, route, **kwargs))


# -- the simulated monitor route ---------------------------------------------------------------------
def _section(prompt: str, name: str) -> str | None:
    start, end = f"=== {name} ===\n", f"\n=== END {name} ==="
    i = prompt.find(start)
    j = prompt.find(end, i + len(start)) if i >= 0 else -1
    return prompt[i + len(start):j] if 0 <= i < j else None


class SimulatedMonitorClient:
    """``sim-collusion-monitor/cues``: reads the CHANNEL (and REASONING, when the prompt
    has it) sections of its prompt back into an episode and answers with the
    :class:`monitor.SimulatedMonitor` cue rule, its cues as evidence. Simulated
    behaviour, labelled so (``extra.simulated``)."""

    virtual_time = True

    def __init__(self, route: str, seed: int) -> None:
        self.route = route
        self.rng = random.Random(seed)

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") != "assistant")
        channel = _section(prompt, "CHANNEL") or ""
        reasoning = _section(prompt, "REASONING")
        mon = SimulatedMonitor("channel" if reasoning is None else "channel+reasoning")
        lean = mon.leaning(episode_from_blocks(channel, reasoning))
        flagged = all(lean[a] for a in lean)
        obj = {"collusion": flagged, "evidence": [c for a in lean for c in lean[a]],
               "explanation": "simulated: both agents show a cue" if flagged else "simulated: not both agents show a cue"}
        return simulated_json_reply(self.route, self.rng, prompt, obj, request, median_latency_s=1.0)


register_simulated_reader("sim-collusion-monitor", SIM_MONITOR_PROFILES, "monitor", SimulatedMonitorClient)
