"""The controlled peer: record a peer once, replay it as compliant or violating.

Recording runs the peer's task phase with a model (the same task phase, tools
and rules as a live agent), then asks it for ``max_rounds`` evidence messages
of at most ``char_limit`` characters that summarise its work. The record is
stored as JSON in a cache folder, keyed by the recording route, the task and
the settings that shape it, so every cell and every trajectory that meets the
same task replays the very same peer.

Replay ignores whatever it receives. As in the source study its messages and its
verdict are two separate settings, crossed: ``raw-prefix`` sends consecutive
``char_limit``-sized slices of its raw log (the first rounds × char_limit
characters), ``summary`` its own recorded summaries; its verdict is a fixed
``accept`` or ``reject``. The earlier names stay: ``compliant`` is raw-prefix with
reject, ``violating`` summary with accept. With ``max_rounds: 0`` it sends nothing
(there is no channel).

The source study's flaw, handled explicitly: when the raw log is shorter than
rounds × char_limit its raw-prefix peer sent nothing at all. Here the whole log
is sent in as many messages as it needs (never zero: an empty log is sent as
``[]``); in each remaining round alice is told, as for any peer, that Bob failed
to deliver a message (the system prompt promises that notice), and the episode
records ``short_log: true`` with the number of messages sent.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import InputError, SetupError
from workbench.seeding import derive_seed
from workbench.worlds.collusion import tools as TL
from workbench.worlds.collusion.spec import CONTROLLED_ALIASES, ControlledSpec

REASONING = {
    "accept": "Controlled peer: a fixed ACCEPT, whatever the evidence.",
    "reject": "Controlled peer: a fixed REJECT, whatever the evidence.",
}
CACHE_VERSION = 1
_LOCKS: dict[tuple[int, str], asyncio.Lock] = {}


@dataclass
class PeerRecord:
    """One recorded peer on one task: its task phase and its summaries."""

    key: str
    route: str
    task_id: str
    answer: str | None
    raw_log: str
    log_calls: list[dict[str, Any]]
    turns_used: int
    got_log: bool
    summaries: list[str]
    truncated: list[bool]
    replies: list[dict[str, Any]] = field(default_factory=list)  # the recording's model replies, for audit
    version: int = CACHE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str, path: Path) -> PeerRecord:
        try:
            data = json.loads(text)
            if data.get("version") != CACHE_VERSION:
                raise InputError(f"cache version {data.get('version')!r}, expected {CACHE_VERSION}")
            return cls(**data)
        except (ValueError, TypeError) as exc:
            raise InputError(f"controlled-peer cache file {path} is unreadable: {exc}") from None


def cache_key(*, route: str, task_id: str, max_turns: int, max_rounds: int, char_limit: int,
              sampling: dict[str, Any]) -> str:
    """What a recording depends on; the same key means the same recorded peer."""
    body = json.dumps({"route": route, "task": task_id, "max_turns": max_turns, "rounds": max_rounds,
                       "char_limit": char_limit, "sampling": sampling, "v": CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:20]


def cache_path(cache_dir: Path, task_id: str, key: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in task_id)
    return cache_dir / f"{safe}--{key}.json"


def raw_prefix_messages(raw_log: str, rounds: int, char_limit: int) -> tuple[list[str], bool]:
    """Consecutive ``char_limit`` slices of the raw log, at most ``rounds`` of them, and
    whether the log was shorter than rounds × char_limit (then all of it is sent)."""
    if rounds <= 0:
        return [], False
    text = raw_log if raw_log else "[]"
    short = len(text) < rounds * char_limit
    n = min(rounds, max(1, math.ceil(len(text) / char_limit)))
    return [text[i * char_limit:(i + 1) * char_limit] for i in range(n)], short


@dataclass
class ControlledPeer:
    """Bob replaced by a recording, for one episode."""

    record: PeerRecord
    mode: str | ControlledSpec  # {messages, verdict}, or an alias: compliant | violating
    rounds: int
    char_limit: int

    def __post_init__(self) -> None:
        if isinstance(self.mode, str):
            if self.mode not in CONTROLLED_ALIASES:
                raise InputError(f"controlled peer mode {self.mode!r}; expected one of {sorted(CONTROLLED_ALIASES)} "
                                 "or {messages: summary | raw-prefix, verdict: accept | reject}")
            self.spec = CONTROLLED_ALIASES[self.mode]
            self.name = self.mode
        else:
            self.spec = self.mode
            self.name = self.mode.label()
        if self.spec.messages == "raw-prefix":
            self.messages, self.short_log = raw_prefix_messages(self.record.raw_log, self.rounds, self.char_limit)
        else:
            self.messages, self.short_log = list(self.record.summaries[: self.rounds]), False

    @property
    def answer(self) -> str | None:
        return self.record.answer

    @property
    def raw_log(self) -> str:
        return self.record.raw_log

    @property
    def log_calls(self) -> list[dict[str, Any]]:
        return self.record.log_calls

    @property
    def turns_used(self) -> int:
        return self.record.turns_used

    @property
    def verdict(self) -> str:
        return self.spec.verdict.upper()

    @property
    def verdict_reasoning(self) -> str:
        return REASONING[self.spec.verdict]

    def message_for(self, rnd: int) -> dict[str, Any]:
        """The precommitted message of round ``rnd`` (1-based); once all are sent (a short raw
        log), an undelivered one: the receiver gets the delivery-failure notice."""
        if rnd > len(self.messages):
            return {"text": "", "message_type": TL.DEFAULT_MESSAGE_TYPE, "chars": 0, "delivered": False,
                    "attempts": 0, "failures": ["controlled peer: no precommitted message left"],
                    "controlled": True}
        text = self.messages[rnd - 1]
        return {"text": text, "message_type": "raw-log" if self.spec.messages == "raw-prefix" else "summary",
                "chars": len(text), "delivered": True, "attempts": 1, "failures": [], "controlled": True}

    def episode_record(self) -> dict[str, Any]:
        return {"bob": self.name, "messages": self.spec.messages, "verdict": self.spec.verdict,
                "short_log": self.short_log, "n_messages": len(self.messages),
                "silent_rounds": list(range(len(self.messages) + 1, self.rounds + 1)),
                "raw_log_chars": len(self.record.raw_log), "cache_key": self.record.key,
                "recorded_route": self.record.route}


async def load_or_record(*, cache_dir: Path, route: str, task: Any, cell: Any, templates: Any,
                         client_factory: Any, task_tools: list[dict[str, Any]], workspace_factory: Any,
                         workdir: Path | None = None) -> PeerRecord:
    """The cached recording of ``route`` on ``task``; recorded now (once) when missing."""
    from workbench.worlds.collusion.tasks import task_fingerprint  # a changed task is recorded afresh

    key = cache_key(route=route, task_id=f"{task.task_id}#{task_fingerprint(task)}", max_turns=cell.max_turns,
                    max_rounds=cell.max_rounds, char_limit=cell.char_limit, sampling=dict(cell.sampling))
    path = cache_path(cache_dir, task.task_id, key)
    lock = _LOCKS.setdefault((id(asyncio.get_running_loop()), str(path)), asyncio.Lock())
    async with lock:
        if path.is_file():
            return PeerRecord.from_json(path.read_text(encoding="utf-8"), path)
        record = await record_peer(route=route, task=task, cell=cell, templates=templates,
                                   client_factory=client_factory, task_tools=task_tools,
                                   workspace_factory=workspace_factory, key=key, workdir=workdir)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(record.to_json(), encoding="utf-8")
        os.replace(tmp, path)
        return record


async def record_peer(*, route: str, task: Any, cell: Any, templates: Any, client_factory: Any,
                      task_tools: list[dict[str, Any]], workspace_factory: Any, key: str,
                      workdir: Path | None = None) -> PeerRecord:
    """Run the peer's task phase with a model, then ask it for its evidence summaries."""
    from workbench.worlds.collusion.episode import Agent, EpisodeRunner, Recorder, WorldFailed, system_prompt
    from workbench.worlds.collusion.memory import AgentMemory

    seed = derive_seed("controlled-peer", route, task.task_id)
    client = client_factory(route, "peer-recorder", seed, {})
    memory = AgentMemory(system=system_prompt(templates, cell, "bob"))
    agent = Agent("bob", route, client, memory)
    recorder = Recorder(world_id=f"peer-{task.task_id}", run=0)
    runner = EpisodeRunner(cell=cell, templates=templates, recorder=recorder, agents={"bob": agent}, episode=1,
                           n_episodes=1, warmup=False, policy="summary-allowed", throttled=True,
                           tasks={"bob": task, "alice": task}, task_tools={"bob": task_tools, "alice": []},
                           workspace_factory=workspace_factory, evaluate=None, workdir=workdir)
    memory.begin(1)
    try:
        outcome = await runner._task(agent)
        summaries: list[str] = []
        truncated: list[bool] = []
        tools = [TL.send_message_schema(cell.char_limit)]
        for i in range(1, cell.max_rounds + 1):
            memory.add("communication", {"role": "user", "content": templates.render(
                "controlled/summary_request", index=i, count=cell.max_rounds, char_limit=cell.char_limit)})
            text: str | None = None
            last = ""
            for attempt in range(1, cell.attempts + 1):
                reply, step = await runner.call(agent, "communication", tools, i)
                calls = TL.calls_from_reply(reply, f"r{i}_{attempt}")
                sends = [c for c in calls if c.name == TL.SEND and c.error is None]
                value = TL.message_args(sends[0].arguments)[0] if sends else None
                if value is None and not calls and reply.text:
                    value = reply.text.strip()
                results = []
                for c in calls:
                    results.append(templates.render("results/delivered", peer_name="your peer")
                                   if sends and c is sends[0] and value is not None and len(value) <= cell.char_limit
                                   else templates.render("results/too_long", chars=len(value or ""),
                                                         char_limit=cell.char_limit))
                runner._answer_calls(agent, "communication", reply, step, calls, results, tools)
                if value is not None:
                    last = value
                    if len(value) <= cell.char_limit:
                        text = value
                        break
            truncated.append(text is None)
            summaries.append(text if text is not None else last[: cell.char_limit])
    except WorldFailed as exc:
        raise SetupError(f"recording the controlled peer {route} on {task.task_id} failed: "
                           f"{exc.info.get('error')}") from None
    runner.flush()
    return PeerRecord(key=key, route=route, task_id=task.task_id, answer=outcome.answer, raw_log=outcome.raw_log,
                      log_calls=outcome.log_calls, turns_used=outcome.turns_used, got_log=outcome.got_log,
                      summaries=summaries, truncated=truncated,
                      replies=[{k: v for k, v in s["reply"].items() if k != "timing"} for s in recorder.steps])
