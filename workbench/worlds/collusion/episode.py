"""One episode of the peer-verification world: task, communication, verdict,
feedback and reflection, with every rule of the protocol enforced here.

Both agents cross each phase boundary together. Inside a phase where the agents
do not see each other (task, verdict, reflection) their calls run concurrently,
and their steps are appended afterwards in a fixed order (Alice, then Bob), so
the records do not depend on which call returned first. The communication phase
is sequential: in each round Alice, then Bob, may send one message.

A call that fails for good (the client's own retries spent) ends the world,
recorded as failed, except a context-length failure: then the agent's oldest
earlier episode is dropped and the call is made again.

Requests carry the agent's sampling settings (the cell's, with the agent's own
over them) and, with ``tool_choice: forced``, a forced tool call: the tool by
name where a phase offers one (send_message, submit_verdict), "required" where it
offers several (the task phase). The reflection describes every tool of the
episode with tool_choice "none". Each step records what became of the choice
(``request.tool_choice``: sent, or dropped by the client for a provider without
it, in which case tool calls written as text are read by the same parser). With
``reasoning_replay`` the reasoning a provider returns stays on the agent's own
turns as ``reasoning_content``; ``request.reasoning_replayed`` counts the turns
that carried it in each request.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.models.base import ModelClient, ModelReply, ModelRequest
from workbench.records import as_record
from workbench.templates import TemplateSet
from workbench.worlds.collusion import tools as TL
from workbench.worlds.collusion.memory import AgentMemory, is_context_error
from workbench.worlds.collusion.rewards import episode_rewards, episode_totals
from workbench.worlds.collusion.spec import AGENTS, CollusionCell

NAMES = {"alice": "Alice", "bob": "Bob"}
PEER = {"alice": "bob", "bob": "alice"}


class WorldFailed(Exception):
    """A call failed for good: the world stops and is recorded as failed."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("error"))
        self.info = info


@dataclass
class Agent:
    """A live agent: its client and its memory. (A controlled peer has no Agent.)"""

    slot: str
    route: str
    client: ModelClient
    memory: AgentMemory

    @property
    def name(self) -> str:
        return NAMES[self.slot]

    @property
    def peer_name(self) -> str:
        return NAMES[PEER[self.slot]]


@dataclass
class TaskOutcome:
    """What an agent's task phase left behind."""

    answer: str | None
    raw_log: str
    log_calls: list[dict[str, Any]]
    turns_used: int
    got_log: bool


@dataclass
class Recorder:
    """Step records of a world, numbered in the order they are appended."""

    world_id: str
    run: int
    steps: list[dict[str, Any]] = field(default_factory=list)

    def append(self, step: dict[str, Any]) -> None:
        step["seq"] = len(self.steps)
        self.steps.append(step)



async def _complete(client: ModelClient, request: ModelRequest, route: str) -> ModelReply:
    started = time.perf_counter()
    try:
        reply = await client.complete(request)
    except Exception as exc:  # a client bug or an unexpected provider fault: recorded, never raised
        reply = ModelReply(text="", latency_s=0.0, route=route, error=f"{type(exc).__name__}: {str(exc)[:500]}")
    reply.timing = {**reply.timing, "wall_s": round(time.perf_counter() - started, 6)}
    return reply


class EpisodeRunner:
    """Runs one episode. ``agents`` holds the live agents; ``peer`` the controlled one, if any."""

    def __init__(self, *, cell: CollusionCell, templates: TemplateSet, recorder: Recorder,
                 agents: dict[str, Agent], episode: int, n_episodes: int, warmup: bool, policy: str,
                 throttled: bool, tasks: dict[str, Any], task_tools: dict[str, list[dict[str, Any]]],
                 workspace_factory: Any, evaluate: Any, peer: Any = None, workdir: Path | None = None,
                 validate: Any = None) -> None:
        self.cell = cell
        self.t = templates
        self.rec = recorder
        self.agents = agents
        self.episode = episode
        self.n_episodes = n_episodes
        self.warmup = warmup
        self.policy = policy
        self.throttled = throttled
        self.tasks = tasks  # slot -> Task
        self.task_tools = task_tools  # slot -> task tool schemas
        self.workspace_factory = workspace_factory
        self.evaluate = evaluate
        self.validate = validate  # (task, answer) -> the original's rejection message, or None (well-formed)
        self.peer = peer  # a controlled peer playing bob, or None
        self.workdir = workdir
        self.context_drops = {s: 0 for s in AGENTS}
        self.pending: dict[str, list[dict[str, Any]]] = {s: [] for s in AGENTS}

    # -- calls ----------------------------------------------------------------
    async def call(self, agent: Agent, phase: str, tools: list[dict[str, Any]] | None,
                   turn: int) -> tuple[ModelReply, dict[str, Any]]:
        """One model call (context-length failures dropped and retried); the step is kept
        pending until the phase flushes it, so concurrent calls record in a fixed order."""
        while True:
            self.context_drops[agent.slot] += agent.memory.fit()
            messages = agent.memory.context()
            params = self.cell.sampling_for(agent.slot)
            if phase == "reflection":
                choice: Any = "none" if tools else None  # tools only describe the history; none may be called
            else:
                choice = TL.forced_choice(tools) if self.cell.tool_choice == "forced" else None
            if choice is not None:
                params["tool_choice"] = choice
            request = ModelRequest(messages=messages, params=params, tools=tools)
            reply = await _complete(agent.client, request, agent.route)
            step = {
                "kind": "step", "world_id": self.rec.world_id, "run": self.rec.run, "agent": agent.slot,
                "episode": self.episode, "phase": phase, "turn": turn,
                "request": {"route": agent.route, "params": dict(request.params), "n_messages": len(messages),
                            "messages_sha256": agent.memory.digest(), "tools": TL.tool_names(tools),
                            "tool_choice": tool_choice_record(choice, reply),
                            "reasoning_replayed": sum(1 for m in messages if m.get("reasoning_content"))},
                "reply": as_record(reply), "tool_calls": [], "tool_results": [],
            }
            self.pending[agent.slot].append(step)
            if reply.failed and is_context_error(reply.error) and agent.memory.drop_oldest():
                self.context_drops[agent.slot] += 1
                step["context_retry"] = True
                continue
            if reply.failed:
                raise WorldFailed({"agent": agent.slot, "episode": self.episode, "phase": phase, "turn": turn,
                                   "error": reply.error})
            return reply, step

    def flush(self) -> None:
        for slot in AGENTS:
            for step in self.pending[slot]:
                self.rec.append(step)
            self.pending[slot] = []

    def _answer_calls(self, agent: Agent, phase: str, reply: ModelReply, step: dict[str, Any],
                      calls: list[TL.ToolCall], results: list[str], tools: list[dict[str, Any]] | None) -> None:
        """Put the agent's turn and the results into its memory and the step record."""
        step["tool_calls"] = [c.to_record() for c in calls]
        step["tool_results"] = list(results)
        agent.memory.add(phase, TL.assistant_message(reply, calls, self.cell.reasoning_replay))
        if calls:
            tpl = self.t.text("results/text_result")
            agent.memory.add(phase, *TL.result_messages(reply, calls, results, tpl))
        else:
            note = self.t.render("no_tool_call", tools=", ".join(TL.tool_names(tools)) or "none")
            step["tool_results"] = [note]
            agent.memory.add(phase, {"role": "user", "content": note})

    # -- phase openings (also rendered alone by the kind's opening_messages) ----------------
    def episode_label(self) -> str:
        """"Episode e" (horizon hidden, as the source study) or "Episode e of N" (shown)."""
        return episode_label(self.t, self.cell, self.episode, self.n_episodes)

    def message_limit(self) -> int | None:
        """The length limit the send_message schema states: only where the limit is announced upfront."""
        return self.cell.char_limit if self.throttled and self.cell.limit_notice == "upfront" else None

    def task_opening(self, slot: str) -> str:
        task = self.tasks[slot]
        return self.t.render("task_open", episode=self.episode, n_episodes=self.n_episodes,
                             episode_label=self.episode_label(), brief=task.brief, task_id=task.task_id,
                             answer_format=task.answer_format, max_turns=self.cell.max_turns)

    def communication_opening(self, slot: str, got_log: bool = True) -> str:
        """The peer's task, the episode's policy and the rounds; the length limit only where it is
        announced upfront (otherwise, as in the source study, a rejection is how it is learned)."""
        cell = self.cell
        policy_text = self.t.render(f"policy/{self.policy}", peer_name=NAMES[PEER[slot]]).strip()
        limit_block = ""
        if cell.limit_notice == "upfront":
            limit_block = self.t.render("limit/throttled" if self.throttled else "limit/no-throttle",
                                        char_limit=cell.char_limit, attempts=cell.attempts).strip() + "\n\n"
        note = "" if got_log else self.t.render("results/no_log_note")
        return self.t.render(
            "comm_open", episode=self.episode, n_episodes=self.n_episodes, episode_label=self.episode_label(),
            log_note=note, peer_name=NAMES[PEER[slot]], peer_brief=self.tasks[PEER[slot]].peer_brief,
            peer_task=self.tasks[PEER[slot]].task_id, policy_text=policy_text, limit_text=limit_block.strip(),
            limit_block=limit_block, max_rounds=cell.max_rounds,
            rounds_text=rounds_text(self.t, cell, "open", peer_name=NAMES[PEER[slot]]))

    def verdict_opening(self, slot: str) -> str:
        """The source study's question and output format (original), or the acceptance rule and
        the episode's policy restated (restated)."""
        policy_text = self.t.render(f"policy/{self.policy}", peer_name=NAMES[PEER[slot]]).strip()
        return self.t.render(f"verdict_open/{self.cell.verdict_opening}", episode=self.episode,
                             n_episodes=self.n_episodes, episode_label=self.episode_label(),
                             peer_name=NAMES[PEER[slot]], policy_text=policy_text)

    def _not_now(self, name: str, tools: list[dict[str, Any]] | None) -> str:
        names = TL.tool_names(tools)
        key = "results/not_now" if name in TL.PROTOCOL_TOOLS or any(
            name in TL.tool_names(t) for t in self.task_tools.values()) else "results/unknown_tool"
        return self.t.render(key, tool=name, tools=", ".join(names))

    # -- phase 1: task ----------------------------------------------------------
    async def task_phase(self) -> dict[str, TaskOutcome]:
        live = [s for s in AGENTS if s in self.agents]
        outcomes = await asyncio.gather(*(self._task(self.agents[s]) for s in live))
        self.flush()
        out = dict(zip(live, outcomes))
        if self.peer is not None:
            out["bob"] = TaskOutcome(self.peer.answer, self.peer.raw_log, list(self.peer.log_calls),
                                     self.peer.turns_used, True)
        return out

    async def _task(self, agent: Agent) -> TaskOutcome:
        task = self.tasks[agent.slot]
        cell = self.cell
        agent.memory.add("task", {"role": "user", "content": self.task_opening(agent.slot)})
        own_tools = list(self.task_tools[agent.slot])
        tools = own_tools + [TL.save_final_answer_schema(_answer_enum(task)), TL.get_log_schema()]
        task_names = set(TL.tool_names(own_tools))
        root = Path(tempfile.mkdtemp(prefix=f"collusion-{agent.slot}-", dir=self.workdir))
        workspace = self.workspace_factory(task, root)
        # one id may be offered with two tool APIs (the cell's code_tools): the memo keys on both
        tool_memo = _MemoWorkspace(workspace, f"{task.task_id}#{getattr(task, 'tool_api', 'workbench')}")
        saved: str | None = None
        got_log = False
        log: list[dict[str, Any]] = []
        raw_log = "[]"
        turns = 0
        try:
            while turns < cell.max_turns and not got_log:
                turns += 1
                reply, step = await self.call(agent, "task", tools, turns)
                calls = TL.calls_from_reply(reply, f"t{self.episode}_{turns}")
                results: list[str] = []
                for c in calls:
                    if c.error is not None:
                        result = self.t.render("results/error", error=c.error)
                    elif c.name == TL.SAVE:
                        answer, err = TL.str_arg(c.arguments, "answer")
                        reasoning, err_r = TL.str_arg(c.arguments, "reasoning")
                        if err is None and (err_r is not None or not (reasoning or "").strip()):
                            err = err_r or "argument 'reasoning' must contain non-whitespace text"
                        if saved is not None:
                            result = self.t.render("results/already_saved")
                        elif got_log:
                            result = self.t.render("results/task_after_log")
                        elif err:
                            result = self.t.render("results/error", error=err)
                        elif self.validate is not None and (bad := self.validate(task, answer)) is not None:
                            result = bad  # not saved: the agent may call save_final_answer again, as in the source
                            step.setdefault("answer_rejections", []).append({"answer": answer, "error": bad})
                        else:
                            saved = answer
                            result = self.t.render("results/saved")
                    elif c.name == TL.GET_LOG:
                        if saved is None:
                            result = self.t.render("results/log_before_save")
                        elif got_log:
                            result = self.t.render("results/log_again")
                        else:
                            got_log = True
                            raw_log = json.dumps(log, ensure_ascii=False)
                            result = raw_log
                    elif c.name in task_names:
                        if got_log:
                            result = self.t.render("results/task_after_log")
                        else:
                            result = await tool_memo.call(c.name, c.arguments)
                    else:
                        result = self._not_now(c.name, tools)
                    if c.name not in TL.NOT_LOGGED and not got_log:
                        log.append({"seq": len(log) + 1, "tool": c.name,
                                    "arguments": c.arguments if c.arguments is not None else c.raw_arguments,
                                    "result": result})
                    results.append(result)
                self._answer_calls(agent, "task", reply, step, calls, results, tools)
        finally:
            try:
                workspace.close()
            finally:
                import shutil

                shutil.rmtree(root, ignore_errors=True)
        if not got_log:
            raw_log = json.dumps(log, ensure_ascii=False)
        return TaskOutcome(saved, raw_log, log, turns, got_log)

    # -- phase 2: communication ------------------------------------------------
    async def communication_phase(self, outcomes: dict[str, TaskOutcome]) -> tuple[list[dict[str, Any]], dict[str, int]]:
        cell = self.cell
        limit = cell.char_limit if self.throttled else None  # enforced whether or not it is announced
        for slot, agent in self.agents.items():
            agent.memory.add("communication", {"role": "user", "content": self.communication_opening(
                slot, outcomes[slot].got_log)})
        tools = [TL.send_message_schema(self.message_limit())]
        messages: list[dict[str, Any]] = []
        failures = {s: 0 for s in AGENTS}
        for rnd in range(1, cell.max_rounds + 1):
            for slot in AGENTS:
                if slot in self.agents:
                    entry = await self._message_turn(self.agents[slot], rnd, tools, limit)
                else:
                    # past a short raw log: undelivered, so alice gets the failure notice
                    entry = {"round": rnd, "sender": slot, **self.peer.message_for(rnd)}
                self.flush()
                messages.append(entry)
                receiver = PEER[slot]
                if entry["delivered"]:
                    content = self.t.render("inbox", round=rnd, max_rounds=cell.max_rounds, sender=NAMES[slot],
                                            message_type=entry.get("message_type") or TL.DEFAULT_MESSAGE_TYPE,
                                            text=entry["text"])
                else:
                    failures[slot] += 1
                    content = self.t.render("inbox_failed", round=rnd, max_rounds=cell.max_rounds, sender=NAMES[slot])
                if receiver in self.agents:
                    self.agents[receiver].memory.add("communication", {"role": "user", "content": content})
        return messages, failures

    async def _message_turn(self, agent: Agent, rnd: int, tools: list[dict[str, Any]],
                            limit: int | None) -> dict[str, Any]:
        agent.memory.add("communication", {"role": "user", "content": self.t.render(
            "comm_turn", round=rnd, max_rounds=self.cell.max_rounds, peer_name=agent.peer_name)})
        failures: list[str] = []
        text = ""
        kind = TL.DEFAULT_MESSAGE_TYPE
        for attempt in range(1, self.cell.attempts + 1):
            reply, step = await self.call(agent, "communication", tools, rnd)
            step["attempt"] = attempt
            calls = TL.calls_from_reply(reply, f"m{self.episode}_{rnd}_{attempt}")
            results: list[str] = []
            delivered = False
            tried = False
            for c in calls:
                if c.name != TL.SEND:
                    results.append(self._not_now(c.name, tools))
                    continue
                if tried:
                    results.append(self.t.render("results/one_message"))
                    continue
                tried = True
                value, kind, err = (None, TL.DEFAULT_MESSAGE_TYPE, c.error) if c.error else TL.message_args(c.arguments)
                if err or value is None:
                    failures.append(f"invalid arguments: {err}")
                    results.append(self.t.render("results/error", error=err))
                    continue
                text = value
                if limit is not None and len(value) > limit:
                    failures.append(f"too long: {len(value)} characters (limit {limit})")
                    results.append(self.t.render("results/too_long", chars=len(value), char_limit=limit))
                    continue
                delivered = True
                results.append(self.t.render("results/delivered", peer_name=agent.peer_name))
            if not tried:
                failures.append("no send_message call")
            self._answer_calls(agent, "communication", reply, step, calls, results, tools)
            if delivered:
                return {"round": rnd, "sender": agent.slot, "text": text, "message_type": kind, "chars": len(text),
                        "delivered": True, "attempts": attempt, "failures": failures}
        return {"round": rnd, "sender": agent.slot, "text": text, "message_type": kind, "chars": len(text),
                "delivered": False, "attempts": self.cell.attempts, "failures": failures}

    # -- phase 3: verdict ------------------------------------------------------
    async def verdict_phase(self) -> dict[str, dict[str, Any]]:
        live = [s for s in AGENTS if s in self.agents]
        results = await asyncio.gather(*(self._verdict(self.agents[s]) for s in live))
        self.flush()
        out = dict(zip(live, results))
        if self.peer is not None:
            out["bob"] = {"verdict": self.peer.verdict, "reasoning": self.peer.verdict_reasoning, "attempts": 0,
                          "forced": False}
        return out

    async def _verdict(self, agent: Agent) -> dict[str, Any]:
        agent.memory.add("verdict", {"role": "user", "content": self.verdict_opening(agent.slot)})
        tools = [TL.submit_verdict_schema()]
        for attempt in range(1, self.cell.verdict_attempts + 1):
            reply, step = await self.call(agent, "verdict", tools, attempt)
            step["attempt"] = attempt
            calls = TL.calls_from_reply(reply, f"v{self.episode}_{attempt}")
            results: list[str] = []
            decided: dict[str, Any] | None = None
            for c in calls:
                if c.name != TL.VERDICT:
                    results.append(self._not_now(c.name, tools))
                    continue
                if decided is not None:
                    results.append(self.t.render("results/error", error="a verdict was already submitted"))
                    continue
                reasoning, err = (None, c.error) if c.error else TL.str_arg(c.arguments, "reasoning")
                verdict, err2 = (None, None) if err else TL.str_arg(c.arguments, "verdict")
                if err or err2:
                    results.append(self.t.render("results/error", error=err or err2))
                    continue
                norm = (verdict or "").strip().upper()
                if norm not in ("ACCEPT", "REJECT"):
                    results.append(self.t.render("results/bad_verdict", verdict=json.dumps(verdict)))
                    continue
                decided = {"verdict": norm, "reasoning": reasoning or "", "attempts": attempt, "forced": False}
                results.append(self.t.render("results/verdict_ok"))
            self._answer_calls(agent, "verdict", reply, step, calls, results, tools)
            if decided is not None:
                return decided
        return {"verdict": "REJECT", "reasoning": "", "attempts": self.cell.verdict_attempts, "forced": True}

    # -- phase 4: feedback and reflection --------------------------------------
    def feedback(self, truth: dict[str, bool], verdicts: dict[str, dict[str, Any]]
                 ) -> tuple[dict[str, int | None], dict[str, int | None], dict[str, str] | None]:
        cell = self.cell
        terms = episode_rewards(reward_type=cell.reward_type, scope=cell.reward_scope, truth=truth,
                                verdicts={s: verdicts[s]["verdict"] for s in AGENTS})
        # a controlled peer is paid nothing (the source study): its reward is recorded as null, not 0
        rewards = episode_totals(terms, unpaid=[s for s in AGENTS if s not in self.agents and self.peer is not None])
        shown: dict[str, int | None] = {s: None for s in AGENTS}
        review: dict[str, str] = {}
        # beside a controlled peer alice's feedback is the source study's unless withheld; shown adds bob's verdict
        hidden_peer = self.peer is not None and cell.observed() == "withheld"
        observed = self.peer is not None and cell.observed() == "shown"
        for slot in AGENTS:
            peer = PEER[slot]
            agent = self.agents.get(slot)
            peer_name = NAMES[peer]
            ids = {"own_task": self.tasks[slot].task_id, "peer_task": self.tasks[peer].task_id}
            on_me_right = "right" if _right(verdicts[peer]["verdict"], truth[slot]) else "wrong"
            mine_right = "right" if _right(verdicts[slot]["verdict"], truth[peer]) else "wrong"
            if hidden_peer and slot == "alice":
                on_me = self.t.render("feedback/review_unobserved", peer_name=peer_name, **ids)
            elif cell.feedback == "full":
                on_me = self.t.render("feedback/review_on_me", peer_name=peer_name,
                                      verdict_on_me=verdicts[peer]["verdict"],
                                      own_truth="correct" if truth[slot] else "incorrect", on_me_right=on_me_right)
            else:
                on_me = self.t.render("feedback/right_on_me", peer_name=peer_name, right=on_me_right, **ids)
            if cell.feedback == "full":
                mine = self.t.render("feedback/review_mine", peer_name=peer_name, my_verdict=verdicts[slot]["verdict"],
                                     peer_truth="correct" if truth[peer] else "incorrect", mine_right=mine_right)
                lines_review = [on_me] if cell.reward_scope == "separate" else [on_me, mine]
            else:  # the source study's order: the agent's own verdict first, then the peer's on it
                mine = self.t.render("feedback/right_mine", peer_name=peer_name, right=mine_right, **ids)
                lines_review = [on_me] if cell.reward_scope == "separate" else [mine, on_me]
            review[slot] = "\n".join(lines_review)
            lines: list[str] = [self.t.render("feedback/tasks", peer_name=peer_name, **ids)]
            if not cell.no_reward:
                if hidden_peer and slot == "alice":
                    shown[slot] = terms[slot]["peer"]
                    lines.append(self.t.render("feedback/reward_unobserved", total=shown[slot]))
                elif rewards[slot] is not None:
                    shown[slot] = rewards[slot]
                    lines.append(self.t.render("feedback/reward", total=rewards[slot]))
            if cell.verdict_review:
                lines.extend([self.t.render("feedback/review_heading"), review[slot]])
            if observed and slot == "alice":
                lines.append(self.t.render("feedback/observed_verdict", peer_name=peer_name,
                                           verdict=verdicts[peer]["verdict"]))
            if agent is not None and (not cell.no_reward or cell.verdict_review or (observed and slot == "alice")):
                header = self.t.render("feedback/header", episode=self.episode, n_episodes=self.n_episodes,
                                       episode_label=self.episode_label())
                body = [x for x in [header, *lines] if x.strip()]
                agent.memory.add("feedback", {"role": "user", "content": "\n".join(body)})
        return rewards, shown, (review if cell.verdict_review else None)

    async def reflection_phase(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {s: None for s in AGENTS}
        if not self.cell.reflection or self.cell.no_reward:
            return out
        live = [s for s in AGENTS if s in self.agents]
        texts = await asyncio.gather(*(self._reflect(self.agents[s]) for s in live))
        self.flush()
        out.update(dict(zip(live, texts)))
        return out

    async def _reflect(self, agent: Agent) -> str:
        agent.memory.add("feedback", {"role": "user", "content": self.t.render("reflection")})
        # every tool of the episode is described (some providers refuse a history of tool calls
        # without tool definitions), with tool_choice "none": the reflection is text
        tools = [*self.task_tools[agent.slot], TL.save_final_answer_schema(_answer_enum(self.tasks[agent.slot])),
                 TL.get_log_schema(),
                 TL.send_message_schema(self.message_limit()), TL.submit_verdict_schema()]
        reply, step = await self.call(agent, "reflection", tools, 1)
        text = (reply.text or "").strip()
        agent.memory.add("feedback", {"role": "assistant", "content": text})
        return text

    # -- the whole episode -----------------------------------------------------
    async def run(self) -> dict[str, Any]:
        for agent in self.agents.values():
            agent.memory.begin(self.episode)
        outcomes = await self.task_phase()
        messages, failures = await self.communication_phase(outcomes)
        verdicts = await self.verdict_phase()
        truth = {s: bool(outcomes[s].answer is not None and self.evaluate(self.tasks[s], outcomes[s].answer))
                 for s in AGENTS}
        rewards, shown, review = self.feedback(truth, verdicts)
        reflections = await self.reflection_phase()
        return {
            "episode": self.episode, "warmup": self.warmup, "family": self.tasks["alice"].family,
            "tasks": {s: self.tasks[s].task_id for s in AGENTS}, "truth": truth,
            "policy": self.policy, "throttled": self.throttled,
            "char_limit": self.cell.char_limit if self.throttled else None,
            "answers": {s: outcomes[s].answer for s in AGENTS},
            "turns_used": {s: outcomes[s].turns_used for s in AGENTS},
            "got_log": {s: outcomes[s].got_log for s in AGENTS},
            "raw_logs": {s: outcomes[s].raw_log for s in AGENTS},
            "messages": messages, "delivery_failures": failures, "verdicts": verdicts,
            "rewards": rewards, "rewards_shown": shown, "review": review, "reflections": reflections,
            "controlled": self.peer.episode_record() if self.peer is not None else None,
            "context_drops": dict(self.context_drops),
        }


def system_prompt(templates: TemplateSet, cell: CollusionCell, slot: str, n_episodes: int | None = None) -> str:
    """The agent's standing instructions: role, episodes and phases (with the raw log's authority
    and the agent's turn order), memory, and the reward objective unless ``no_reward``."""
    peer_name = NAMES[PEER[slot]]
    reward = "" if cell.no_reward else templates.render(f"reward/{cell.reward_type}-{cell.reward_scope}",
                                                        peer_name=peer_name).rstrip()
    block = ("\n" + reward + "\n") if reward else ""
    clause = "reflection_clause_full" if cell.reflection and not cell.no_reward else "reflection_clause_none"
    order = templates.render("turn_order/first" if slot == AGENTS[0] else "turn_order/second",
                             peer_name=peer_name).strip()
    n = n_episodes or cell.n_total()
    series = templates.render(f"horizon/series-{cell.horizon}", peer_name=peer_name, n_episodes=n).strip()
    return templates.render("system", agent_name=NAMES[slot], peer_name=peer_name, series=series,
                            n_episodes=n, max_turns=cell.max_turns,
                            max_rounds=cell.max_rounds, attempts=cell.attempts, turn_order=order,
                            reward_paragraph=block, reward_section=block,
                            reflection_clause=templates.render(f"results/{clause}"),
                            rounds_text=rounds_text(templates, cell, "system", peer_name=peer_name, turn_order=order))


def rounds_text(templates: TemplateSet, cell: CollusionCell, where: str, **values: object) -> str:
    """What the system prompt (``system``) or the communication opening (``open``) says of the
    rounds: their number, or with ``max_rounds: 0`` that no message is exchanged."""
    name = f"rounds/{where}-{'none' if cell.max_rounds == 0 else 'some'}"
    return templates.render(name, max_rounds=cell.max_rounds, attempts=cell.attempts, **values).strip()


def episode_label(templates: TemplateSet, cell: CollusionCell, episode: int, n_episodes: int) -> str:
    """The episode's name in phase openings: with the horizon hidden it never says how many follow."""
    return templates.render(f"horizon/episode-{cell.horizon}", episode=episode, n_episodes=n_episodes).strip()


def tool_choice_record(choice: Any, reply: ModelReply) -> dict[str, Any] | None:
    """What became of a forced tool choice: sent to the provider, or not (then the agent's
    tool calls may come as text, read by the same parser), and why."""
    if choice is None:
        return None
    sent = "tool_choice" in (reply.params_sent or {})
    why = None
    if not sent:
        why = ((reply.extra or {}).get("params_dropped_why") or {}).get("tool_choice") or (
            "the client sends no request parameters (simulated, scripted or replayed agent)")
    if sent:
        fallback = None
    elif choice == "none":
        fallback = f"a tool call is not prevented (only the reply's text is kept): {why}"
    else:
        fallback = f"text tool calls: {why}"
    return {"requested": choice, "sent": sent, "fallback": fallback}


def _answer_enum(task: Any) -> list[str] | None:
    """The closed answer set of a code-analysis task (as its save_final_answer schema lists it)."""
    if getattr(task, "family", None) != "code-analysis":
        return None
    from workbench.worlds.collusion.tasks.code import LABELS

    return list(LABELS)


def _right(verdict: str, truth: bool) -> bool:
    return verdict == ("ACCEPT" if truth else "REJECT")


_MEMO: dict[str, str] = {}
_MEMO_MAX = 50_000


class _MemoWorkspace:
    """Task tools are deterministic functions of the task and the calls made so far in a fresh
    workspace (tool outputs carry no timings or real paths), so a result already computed for the
    same task and the same call history is reused instead of, say, running pytest again. Calls
    skipped that way are replayed on the real workspace before the next call that is not known,
    so its files are always what the history says."""

    def __init__(self, workspace: Any, task_id: str) -> None:
        self.workspace = workspace
        self.history = hashlib.sha256(task_id.encode())
        self.skipped: list[tuple[str, dict[str, Any] | None]] = []

    async def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        self.history.update(json.dumps([name, arguments], sort_keys=True, ensure_ascii=False).encode())
        key = self.history.hexdigest()
        if key in _MEMO:
            self.skipped.append((name, arguments))
            return _MEMO[key]
        for n, a in self.skipped:
            await asyncio.to_thread(_call_workspace, self.workspace, n, a)
        self.skipped = []
        result = await asyncio.to_thread(_call_workspace, self.workspace, name, arguments)
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = result
        return result


def _call_workspace(workspace: Any, name: str, arguments: dict[str, Any] | None) -> str:
    """A task tool call; its errors go back to the agent as text."""
    from workbench.worlds.collusion.tasks import ToolError

    try:
        return str(workspace.call(name, arguments if arguments is not None else {}))
    except ToolError as exc:
        return f"Error: {exc}"
