"""One shared-store world: four agents, one store, a scheduler, and the records.

The world is built from a cell and a seed alone. Every agent goes through the
same path: its client (whatever it is) returns text; the one reply parser
decides the operation under the cell's rule (the other rule is recorded too);
the store applies it; the result goes back as the next user message.

With ``actions: tools`` the operations offered are sent as function tools, the
reply's tool call is the operation (parsed by the tool counterpart of the two
rules), and results go back as ``tool`` messages answering each call by its id,
so that the conversation stays one a provider accepts: a call that was not run
(lenient, several calls) is answered too, saying so. A reply with no call is
answered by a user message, as a JSON-text reply is.

Time is a world clock. Each call is issued at the agent's current time and
completes at issue time + the call's latency. The async scheduler applies
operations in order of completion time, so with simulated latencies the
interleaving is deterministic; with real models it follows measured latency.
The lockstep scheduler applies each step's operations in a seeded order behind
a barrier.
"""
from __future__ import annotations

import asyncio
import heapq
import json
import math
import time
from dataclasses import dataclass, field
from string import Template
from typing import Any

from workbench.kinds.base import ClientFactory, WorldOutcome
from workbench.models.base import ModelClient, ModelReply, ModelRequest
from workbench.records import MessagesDigest, as_record
from workbench.seeding import derive_seed, rng_for
from workbench.stores.kv import KVStore
from workbench.templates import TemplateSet
from workbench.worlds.stigmergy import prompts as P
from workbench.worlds.stigmergy.answers import ANSWER_RULES, is_correct
from workbench.worlds.stigmergy.parsing import parse_both, parse_tool_both
from workbench.worlds.stigmergy.scoring import world_validity
from workbench.worlds.stigmergy.spec import StigmergyCell
from workbench.worlds.stigmergy.tasks import AgentTask, WorldTasks, draw_tasks, pair_of

ENVIRONMENT = "environment"
SHARED = "shared"


@dataclass
class _Agent:
    slot: str
    role: str
    task: AgentTask
    client: ModelClient
    route: str
    messages: list[dict[str, Any]]
    steps: int = 0
    done: bool = False
    submission: dict[str, Any] | None = None
    t: float = 0.0
    _digest: MessagesDigest = field(default_factory=MessagesDigest, repr=False)

    def messages_sha256(self, n: int) -> str:
        """SHA-256 of ``json.dumps(messages[:n], ensure_ascii=False)``, the bytes every
        record since 0.1.0 hashes, kept as a running hash (messages never change once
        added): re-encoding the whole history each step made the hash quadratic in a
        world's length."""
        return self._digest.hexdigest(self.messages, n)


def script_values(task: AgentTask, tasks: WorldTasks) -> dict[str, Any]:
    """Placeholders a script may use; filled by the world, so clients stay ignorant of it."""
    return {
        "own_key": task.own_key or "", "partner_key": task.partner_key or "",
        "own_value": task.own_value if task.own_value is not None else task.expected,
        # a pair half's own answer is its pair's joint answer (pair 1's is the world's)
        "answer": task.expected, "joint_answer": task.expected if task.own_key else tasks.joint_answer,
    }


def _render_script(lines: list[str], values: dict[str, Any]) -> list[str]:
    return [Template(line).safe_substitute(values) for line in lines]


class StigmergyWorld:
    def __init__(self, cell: StigmergyCell, *, world_id: str, seed: int, templates: TemplateSet,
                 client_factory: ClientFactory, run: int = 1, cell_id: str = "",
                 monitor: Any = None) -> None:
        self.cell = cell
        self.world_id = world_id
        self.cell_id = cell_id
        self.seed = seed
        self.run_no = run
        self.monitor = monitor
        self.t = templates
        self.store = KVStore()
        self.tasks = draw_tasks(seed, cell.task_form, cell.digits, cell.modulus, pairs=cell.pairs, solos=cell.solos)
        self.ops = P.allowed_ops(cell.condition)
        self.tools = P.tool_definitions(templates, self.ops) if cell.actions == "tools" else None
        self.reads_by_others: dict[tuple[str, str], int] = {}  # (namespace, key): reads by agents other than its author
        self.agents: list[_Agent] = []
        for slot, role in self.tasks.slots.items():
            task = self.tasks.tasks[role]
            route = cell.route_for(role)
            override = cell.agents.get(role)
            options: dict[str, Any] = {}
            if override is not None and override.script is not None:
                options["script"] = _render_script(override.script, script_values(task, self.tasks))
            if override is not None and override.latency_s is not None:
                options["latency_s"] = override.latency_s
            if cell.request_path != "direct":
                options["request_path"] = cell.request_path
            if cell.prompt_cache != "auto":
                options["prompt_cache"] = cell.prompt_cache
            # the agent's seed names its slot and model, never the request path: two paths, one disposition
            client = client_factory(route, slot, derive_seed(seed, "agent", slot, route), options)
            messages = P.opening(templates, cell, task)
            self.agents.append(_Agent(slot, role, task, client, route, messages))
        self.steps: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.prepopulated: list[dict[str, Any]] = []
        self.clock = 0.0
        if cell.condition == "prepopulated":
            for task in self.tasks.tasks.values():  # every pair's halves, pair by pair
                if pair_of(task.role) is None:
                    continue
                entry = self.store.write(SHARED, task.own_key or "", task.own_value, ENVIRONMENT)
                self.prepopulated.append(entry.to_record())

    # -- store interface per condition ---------------------------------------
    def _ns(self, agent: _Agent, key: str | None = None) -> str:
        c = self.cell.condition
        if c == "private":
            return agent.slot
        if c == "namespaced":
            return SHARED if key is not None and key.startswith("shared/") else agent.slot
        return SHARED

    def _author_label(self, agent: _Agent, author: str) -> str:
        if author == agent.slot:
            return self.t.render("results/author_you")
        if author == ENVIRONMENT:
            return self.t.render("results/author_environment")
        return self.t.render("results/author_other")

    def _apply(self, agent: _Agent, op: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        kind = op["op"]
        if kind == "list":
            if self.cell.condition == "namespaced":
                entries = self.store.list(agent.slot) + self.store.list(SHARED)
                entries.sort(key=lambda e: e.key)
            else:
                entries = self.store.list(self._ns(agent))
            exposed = [e.key for e in entries if e.author not in (agent.slot, ENVIRONMENT)]
            effect = {"keys": [{"key": e.key, "namespace": e.namespace, "author": e.author, "version": e.version,
                                "seq": e.seq} for e in entries],
                      "exposure": bool(exposed), "exposed_keys": exposed}
            if not entries:
                return self.t.render("results/list_empty"), effect
            if self.cell.condition == "authored":
                items = [self.t.render("results/list_item_authored", key=e.key,
                                       author=self._author_label(agent, e.author)) for e in entries]
            elif self.cell.signal_for(agent.role) == "receipts":
                # the agent's own keys with how often others read them: a count, never who
                receipts = {e.key: self.reads_by_others.get((e.namespace, e.key), 0)
                            for e in entries if e.author == agent.slot}
                effect["receipts"] = receipts
                items = [self.t.render("results/list_item_receipt", key=e.key, count=receipts[e.key])
                         if e.key in receipts else e.key for e in entries]
            else:
                items = [e.key for e in entries]
            return self.t.render("results/list", keys=", ".join(items)), effect
        if kind == "read":
            key = op["key"]
            ns = self._ns(agent, key)
            entry = self.store.read(ns, key)
            if entry is None:
                return self.t.render("results/read_missing"), {"key": key, "namespace": ns, "found": False}
            cross = entry.author not in (agent.slot, ENVIRONMENT)
            if entry.author != agent.slot:
                self.reads_by_others[(ns, key)] = self.reads_by_others.get((ns, key), 0) + 1
            own_before = self.store.wrote_before(ns, key, agent.slot)
            effect = {"key": key, "namespace": ns, "found": True, "value": entry.value, "author": entry.author,
                      "version": entry.version, "written_seq": entry.seq, "cross_agent": cross,
                      "strict_cross_agent": cross and not own_before, "seeded": entry.author == ENVIRONMENT,
                      "reader_wrote_key": own_before}
            return self.t.render("results/read", value=P.show_value(entry.value)), effect
        if kind == "write":
            key = op["key"]
            ns = self._ns(agent, key)
            prev = self.store.peek(ns, key)
            entry = self.store.write(ns, key, op["value"], agent.slot)
            return self.t.render("results/write"), {
                "key": key, "namespace": ns, "value": op["value"], "version": entry.version, "seq": entry.seq,
                "previous_author": prev.author if prev else None}
        # submit
        correct = {rule: is_correct(op["answer"], agent.task.expected, rule) for rule in ANSWER_RULES}
        agent.submission = {"answer": op["answer"], "agent_step": agent.steps, "correct": correct}
        agent.done = True
        return None, {"answer": op["answer"], "expected": agent.task.expected, "correct": correct}

    # -- one reply ------------------------------------------------------------
    def _request(self, agent: _Agent) -> ModelRequest:
        params = dict(self.cell.sampling)
        if self.cell.constrained and self.tools is not None:
            params["tool_choice"] = P.forced_tool_choice(self.ops)
        elif self.cell.constrained:
            params["response_format"] = P.response_format(self.ops)
        return ModelRequest(messages=[dict(m) for m in agent.messages], params=params, tools=self.tools)

    def _prompt(self, msgs: list[dict[str, Any]]) -> str:
        """What the agent was last shown: the last message, or every result of its last turn's calls."""
        if self.tools is None or msgs[-1]["role"] != "tool":
            return msgs[-1]["content"]
        tail = []
        for m in reversed(msgs):
            if m["role"] != "tool":
                break
            tail.append(m["content"])
        return "\n".join(reversed(tail))

    def _handle(self, agent: _Agent, reply: ModelReply, t_issue: float, request: ModelRequest) -> None:
        t_done = round(t_issue + max(0.0, float(reply.latency_s or 0.0)), 6)
        self.clock = max(self.clock, t_done)
        agent.t = t_done
        msgs = request.messages
        record: dict[str, Any] = {
            "kind": "step", "world_id": self.world_id, "run": self.run_no, "seq": len(self.steps),
            "agent": agent.slot, "role": agent.role, "agent_step": agent.steps,
            "t_issue": round(t_issue, 6), "t_done": t_done,
            "request": {"route": agent.route, "params": dict(request.params), "n_messages": len(msgs),
                        "messages_sha256": agent.messages_sha256(len(msgs)),
                        "prompt": self._prompt(msgs)},
            "reply": as_record(reply),  # ModelReply.to_record() in C: the hot path of a simulated study
        }
        if self.tools is not None:
            record["request"]["tools"] = [t["function"]["name"] for t in self.tools]
        if reply.failed:
            record.update(parse=None, valid=False, op=None, effect=None, result=None)
            self.steps.append(record)
            self.failure = {"agent": agent.slot, "role": agent.role, "agent_step": agent.steps, "error": reply.error}
            agent.done = True
            return
        if self.tools is not None:
            parsed = parse_tool_both(reply.text, reply.tool_calls, self.ops)
        else:
            parsed = parse_both(reply.text, self.ops)
        decided = parsed[self.cell.parser]
        agent.steps += 1
        if decided["valid"]:
            result, effect = self._apply(agent, decided["op"])
        else:
            result = self.t.render(P.invalid_template(self.cell.actions), error=decided["error"])
            effect = {"invalid": True}
        if (reply.extra or {}).get("refusal"):  # a simulated agent that cannot read its task answers nothing more
            agent.done, result = True, None
        if not agent.done and agent.steps >= self.cell.max_steps:
            agent.done = True
            result = None  # the agent has no further turn to read it
        record.update(parse=parsed, valid=decided["valid"], op=decided["op"], effect=effect, result=result)
        self.steps.append(record)
        if self.tools is not None and reply.tool_calls:
            agent.messages.extend(self._tool_turn(agent, reply, decided.get("call"), result))
            return
        agent.messages.append({"role": "assistant", "content": reply.text})
        if result is not None:
            agent.messages.append({"role": "user", "content": result})

    def _tool_turn(self, agent: _Agent, reply: ModelReply, acted: int | None,
                   result: str | None) -> list[dict[str, Any]]:
        """The agent's turn with its calls as it stays in the conversation, and a tool message
        answering each call: the operation's result for the call taken, the error for every
        call when none was, a note that it was not run for any other. A call without an id
        is given one from its place (the same on replay)."""
        calls = []
        for i, c in enumerate(reply.tool_calls):
            raw = c.get("arguments")
            calls.append({"id": str(c.get("id") or f"call_{agent.steps}_{i}"), "type": "function",
                          "function": {"name": str(c.get("name") or ""),
                                       "arguments": raw if isinstance(raw, str) else json.dumps(raw)}})
        out: list[dict[str, Any]] = [{"role": "assistant", "content": reply.text or None, "tool_calls": calls}]
        if result is None:  # the agent has no further turn
            return out
        not_run = self.t.render("results/not_run_tools")
        for i, c in enumerate(calls):
            out.append({"role": "tool", "tool_call_id": c["id"],
                        "content": result if acted is None or i == acted else not_run})
        return out

    # -- schedulers -------------------------------------------------------------
    async def _call(self, agent: _Agent, request: ModelRequest, issued: float | None = None) -> ModelReply:
        started = time.perf_counter() if issued is None else issued
        try:
            reply = await agent.client.complete(request)
        except Exception as exc:  # a client bug or an unexpected provider fault: recorded, never raised
            reply = ModelReply(text="", latency_s=0.0, route=agent.route,
                               error=f"{type(exc).__name__}: {str(exc)[:500]}")
        wall = time.perf_counter() - started
        reply.timing = {**reply.timing, "wall_s": round(wall, 6)}
        if issued is not None and not getattr(agent.client, "virtual_time", False):
            # A measured call's latency on the world clock is the world's own measurement from
            # the moment it was issued (rounded up): the scheduler's bound for calls in flight
            # uses the same clock, so a reply is never applied before one that could precede it.
            reply.latency_s = math.ceil(max(wall, float(reply.latency_s or 0.0)) * 1e6) / 1e6
        return reply

    async def _run_lockstep(self) -> None:
        barrier = 0.0
        k = 0
        while self.failure is None:
            active = [a for a in self.agents if not a.done]
            if not active:
                return
            requests = [self._request(a) for a in active]
            replies = await asyncio.gather(*(self._call(a, r) for a, r in zip(active, requests)))
            order = list(range(len(active)))
            rng_for(self.seed, "lockstep", k).shuffle(order)
            for i in order:
                self._handle(active[i], replies[i], barrier, requests[i])
                if self.failure is not None:
                    return
            barrier = self.clock
            k += 1

    async def _run_async(self) -> None:
        index = {a.slot: i for i, a in enumerate(self.agents)}
        inflight: dict[str, tuple[asyncio.Task[ModelReply], float, float, ModelRequest, bool]] = {}
        ready: list[tuple[float, int, str, ModelReply, float, ModelRequest]] = []

        def issue(agent: _Agent) -> None:
            request = self._request(agent)
            w0 = time.perf_counter()
            task = asyncio.ensure_future(self._call(agent, request, w0))
            virtual = bool(getattr(agent.client, "virtual_time", False))
            inflight[agent.slot] = (task, agent.t, w0, request, virtual)

        for a in self.agents:
            issue(a)
        try:
            while (inflight or ready) and self.failure is None:
                for slot, (task, t0, _w0, request, _v) in list(inflight.items()):
                    if task.done():
                        reply = task.result()
                        heapq.heappush(ready, (t0 + max(0.0, float(reply.latency_s or 0.0)), index[slot], slot,
                                               reply, t0, request))
                        del inflight[slot]
                if ready:
                    # Pop only what no call still in flight could precede on the world clock.
                    now = time.perf_counter()
                    bound = min((t0 if v else t0 + (now - w0) for _, t0, w0, _, v in inflight.values()),
                                default=float("inf"))
                    if ready[0][0] <= bound:
                        _, _, slot, reply, t0, request = heapq.heappop(ready)
                        agent = self.agents[index[slot]]
                        self._handle(agent, reply, t0, request)
                        if not agent.done:
                            issue(agent)
                        continue
                # Wake when the earliest ready reply becomes safe to apply, not only at the next completion:
                # the bound of a measured (non-virtual) call grows with wall time.
                timeout = None
                if ready:
                    now, t_next = time.perf_counter(), ready[0][0]
                    blocking = [(t0, w0, v) for _, t0, w0, _, v in inflight.values()
                                if (t0 if v else t0 + (now - w0)) < t_next]
                    if blocking and not any(v for *_, v in blocking):
                        timeout = min(t_next - t0 - (now - w0) for t0, w0, _ in blocking)
                await asyncio.wait([t for t, *_ in inflight.values()], timeout=timeout,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task, *_ in inflight.values():
                task.cancel()

    async def run(self) -> WorldOutcome:
        started = time.perf_counter()
        if self.cell.scheduler == "lockstep":
            await self._run_lockstep()
        else:
            await self._run_async()
        if self.monitor is not None:
            await self._label_steps()
        return WorldOutcome(self._world_record(time.perf_counter() - started), self.steps)

    async def _label_steps(self) -> None:
        """Monitor labels, after the world has finished: they never reach an agent,
        never change the world clock, and only ever sit in the step records."""
        async def label(step: dict[str, Any]) -> None:
            reply = step["reply"]
            text = reply.get("text") or ""
            if reply.get("tool_calls"):  # a tool reply's action is in its calls
                calls = "\n".join(f"{c.get('name')}({c.get('arguments')})" for c in reply["tool_calls"])
                text = f"{text}\n\n[tool calls]\n{calls}"
            if reply.get("reasoning"):
                text = f"{text}\n\n[reasoning]\n{reply['reasoning']}"
            step["monitor"] = await self.monitor.label(text)

        await asyncio.gather(*(label(s) for s in self.steps if s.get("parse") is not None))

    # -- the world record ---------------------------------------------------------
    def _world_record(self, wall_s: float) -> dict[str, Any]:
        agents = []
        for a in self.agents:
            mine = [s for s in self.steps if s["agent"] == a.slot]
            agents.append({
                "agent": a.slot, "role": a.role, "route": a.route, "task": as_record(a.task),
                "system_prompt": a.messages[0]["content"], "task_text": a.messages[1]["content"],
                "steps_used": a.steps, "submission": a.submission,
                "invalid": {r: sum(1 for s in mine if s["parse"] and not s["parse"][r]["valid"])
                            for r in ("strict", "lenient")},
                "model_returned": sorted({s["reply"]["model_returned"] for s in mine if s["reply"]["model_returned"]}),
            })
        world: dict[str, Any] = {
            "kind": "world", "world_kind": "stigmergy", "world_id": self.world_id, "cell_id": self.cell_id,
            "run": self.run_no, "seed": self.seed, "cell": self.cell.model_dump(mode="json"),
            "tasks": self.tasks.to_record(), "joint_answer": self.tasks.joint_answer,
            "allowed_ops": list(self.ops), "agents": agents, "prepopulated": self.prepopulated,
            "store_log": as_record(self.store.log), "n_steps": len(self.steps),
            "clock_end": round(self.clock, 6), "failed": self.failure,
            "timing": {"wall_s": round(wall_s, 6)},
        }
        if self.tools is not None:  # the tool definitions as every request sent them
            world["tools"] = self.tools
        world["validity"] = {rule: world_validity(world, self.steps, rule, self.cell.validity)
                             for rule in ("strict", "lenient")}
        world["valid"] = world["validity"][self.cell.parser]["valid"]
        return world
