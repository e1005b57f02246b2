"""A run set as Inspect eval logs: one log per cell, one sample per world.

``workbench export inspect RUN_DIR --out LOGDIR`` writes, with Inspect's own log
API (``inspect_ai.log.write_eval_log``, the ``[inspect]`` extra), one ``.eval``
file per cell, so that ``inspect view``, ``inspect view bundle`` and
``inspect_ai.analysis.samples_df`` / ``evals_df`` read our runs. Each log:

- ``eval``: the cell's label as task name (one task per cell, so that logs, the
  viewer's list and ``evals_df`` tell cells apart by name; the file name holds it
  with every character Inspect's file naming cannot take as ``-``), the study as
  dataset, the cell's spec as task arguments, its model route(s), the git
  revision and package versions of the run's manifest, and ``metadata.simulated``
  (true when no agent of the cell was a real model: such a log describes the
  workbench, never a model);
- one sample per world (id = world id). Its events: a ``solvers`` span (Inspect's
  name for the part of a sample where agents act) holding one agent span per
  agent, in which each recorded call is a ``ModelEvent`` whose input is that
  agent's own conversation (its system prompt, then the prompts it was sent and
  the replies it gave: never another agent's) with usage, cost and latency, and
  what the call did, as ``InfoEvent``s (a parsed store operation and its result)
  or ``ToolEvent``s (native tool calls and their results). Agents act
  concurrently, so their spans interleave in the event list; every event names
  its span, which is how Inspect's reader and viewer build the tree. The kind's
  record lists (retrievals, memory operations, recalls, episodes with their
  verdicts) are ``InfoEvent``s of the ``solvers`` span, placed by turn or episode.
  The sample's ``messages`` hold every agent's conversation, agent after agent,
  each message naming its agent in metadata, without the system prompts: a
  sample has one message list, and Inspect's viewer folds every system message
  of a list into one row (four agents' prompts read as one), so each agent's
  system prompt is where its calls' inputs are, in its span (as Inspect's own
  hand-offs drop a sub-agent's system prompt from the conversation they return).
  The rest of the world record is metadata;
- scores: every scalar number or boolean of the world record's ``metrics``,
  one scorer each, the kind's headline metric first (Inspect's headline is the
  first scorer's first metric), and per scorer the mean and its standard error
  over the cell's worlds in ``results``;
- ``model_usage`` per sample and per log, by route.

A model call's input is rebuilt from the records (the agent's system prompt,
then each prompt it was sent and each reply it gave). Where the rebuilt list
hashes to the ``messages_sha256`` the step recorded, the event says
``input: verified``; otherwise (the records hold only part of what was sent, as
for the collusion world's tool turns) it says ``input: partial``.

Only records are read: no environment variable, no key, no model client.
Inspect is imported when an export runs, so the rest of the workbench does not
need it.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.records import RunRecords, load_run
from workbench.routes import is_simulated_world

# The metric read first in each kind's results (Inspect's headline is the first scorer's first
# metric): the report's headline, the metric of the kind's contrast_units(...), as a world's score.
# The shared store and collusion compare worlds (trajectories) on cross_agent_access and
# ever_colluded, world metrics of those names; recall compares recalls on ``correct``, and a
# world's share of correct recalls is its ``accuracy``. Names only: this module knows no world
# kind's code (tests/test_inspect_export.py holds each name to the kind's contrast units).
HEADLINE = {"stigmergy": "cross_agent_access", "recall": "accuracy", "collusion": "ever_colluded"}
# Scalars of a world's metrics that identify or flag the world rather than measure it.
NOT_SCORES = frozenset({"world_id", "cell_id", "seed", "world_index", "rescored", "valid", "failed", "simulated"})
# Record lists shown as events, placed by the step field they share (order: -1 before the
# steps with that value, +1 after them). Everything else of the record goes to metadata.
RECORD_EVENTS = (("retrievals", "turn", -1), ("memory_log", "turn", 1), ("recalls", "turn", 1),
                 ("episodes", "episode", 1))
# World-record fields not copied to a sample's metadata (they are its scores, its id or shown otherwise).
_NOT_METADATA = frozenset({"kind", "schema_version", "metrics", "agents", "cell", "study", "world_id"})


class InspectMissing(WorkbenchError):
    """inspect_ai is not installed (it is the optional ``[inspect]`` extra)."""


def _inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError as exc:
        raise InspectMissing("the Inspect export needs inspect_ai: pip install -e '.[inspect]' "
                             "(make test installs it)") from exc


def _uid(*parts: Any) -> str:
    """A stable id (22 characters, like Inspect's), so that an export written twice is the same."""
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _when(text: str | None) -> datetime:
    if text:
        try:
            t = datetime.fromisoformat(text)
            return t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
        except ValueError:
            pass
    return datetime(1970, 1, 1, tzinfo=UTC)


def score_values(world: dict[str, Any]) -> dict[str, bool | int | float]:
    """The world's scores: the scalar numbers and booleans of its ``metrics`` (not NaN, not
    an identifier), headline first. The same function decides what the round trip compares."""
    metrics = world.get("metrics") or {}
    out: dict[str, bool | int | float] = {}
    head = HEADLINE.get(str(world.get("world_kind")))
    names = ([head] if head in metrics else []) + [k for k in metrics if k != head]
    for k in names:
        v = metrics[k]
        if k in NOT_SCORES or isinstance(v, str) or v is None:
            continue
        if isinstance(v, bool) or (isinstance(v, int | float) and math.isfinite(v)):
            out[k] = v
    return out


def _mean_stderr(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def file_task(name: str) -> str:
    """A task name as a log's file name holds it, where Inspect's listing reads it back (no
    underscore: its separator; no slash or space)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-") or "run"


def _messages_sha(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode()).hexdigest()


# -- one world ----------------------------------------------------------------
class _World:
    """Builds one world's sample from its record and steps."""

    def __init__(self, world: dict[str, Any], steps: list[dict[str, Any]], start: datetime) -> None:
        self.world, self.steps, self.start = world, steps, start
        self.agents = {str(a.get("agent")): a for a in world.get("agents") or []}

    def sample(self) -> Any:
        from inspect_ai.log import EvalError, EvalSample, condense_sample
        from inspect_ai.model import ModelOutput
        from inspect_ai.scorer import Score

        w = self.world
        events, messages, usage, last_reply = self._events()
        scores = {k: Score(value=v) for k, v in score_values(w).items()}
        failed = w.get("failed")
        error = None
        if failed:
            text = json.dumps(failed, ensure_ascii=False, default=str)
            error = EvalError(message=f"world failed: {text}", traceback=text, traceback_ansi=text)
        wall = (w.get("timing") or {}).get("wall_s")
        sample = EvalSample(
            id=str(w["world_id"]), epoch=1, input=self._input(), target=self._target(),
            messages=messages,
            output=ModelOutput.from_content(model=last_reply[0], content=last_reply[1]) if last_reply else ModelOutput(),
            scores=scores or None, metadata=self._metadata(), store=self._store(), events=events,
            model_usage=usage, total_time=wall, working_time=wall, error=error,
            uuid=_uid("sample", w.get("study"), w["world_id"], w.get("run")),
        )
        return condense_sample(sample)

    # what the sample shows first
    def _input(self) -> str:
        lines = [f"{self.world.get('world_kind')} world {self.world['world_id']} "
                 f"(cell {self.world.get('cell_label') or self.world.get('cell_id')}, seed {self.world.get('seed')})"]
        seen: set[str] = set()
        for s in self.steps:
            a, prompt = str(s.get("agent")), (s.get("request") or {}).get("prompt")
            if a in self.agents and a not in seen and prompt:
                seen.add(a)
                lines.append(f"[{a} · {self.agents[a].get('role', '')}]\n\n{prompt}")
        return "\n\n".join(lines)  # paragraphs: Inspect's viewer renders the input as markdown

    def _target(self) -> str:
        t = self.world.get("joint_answer")
        return "" if t is None else str(t)

    def _metadata(self) -> dict[str, Any]:
        w = self.world
        meta: dict[str, Any] = {
            "world_kind": w.get("world_kind"), "cell_id": w.get("cell_id"), "cell_label": w.get("cell_label"),
            "study": w.get("study"), "simulated": is_simulated_world(w), "factors": w.get("cell") or {},
            "agents": [{k: v for k, v in a.items() if k != "system_prompt"} for a in w.get("agents") or []],
        }
        scored = set(score_values(w))
        other = {k: v for k, v in (w.get("metrics") or {}).items() if k not in scored}
        if other:
            meta["metrics_other"] = other
        for k, v in w.items():
            if k not in _NOT_METADATA and k not in meta:
                meta[k] = v
        return json.loads(json.dumps(meta, ensure_ascii=False, default=str))

    def _store(self) -> dict[str, Any]:
        """A shared store's final state (the latest version of each key), where the record has one."""
        out: dict[str, Any] = {}
        for e in self.world.get("store_log") or []:
            if isinstance(e, dict) and "key" in e:
                ns = e.get("namespace")
                out[f"{ns}:{e['key']}" if ns and ns != "shared" else str(e["key"])] = e.get("value")
        return json.loads(json.dumps(out, ensure_ascii=False, default=str))

    # events and messages
    def _events(self) -> tuple[list[Any], list[Any], dict[str, Any], tuple[str, str] | None]:
        """Every step's events in the order of effect, the record's lists placed among them; one
        span per agent (opened at its first call, closed after its last) inside one ``solvers``
        span, every event naming its span (see the module docstring)."""
        from inspect_ai.event import SpanBeginEvent, SpanEndEvent

        history: dict[str, list[dict[str, Any]]] = defaultdict(list)
        chat: dict[str, list[Any]] = defaultdict(list)
        usage: dict[str, Any] = {}
        placed: list[tuple[dict[str, Any], str, list[Any]]] = []
        anchor_prev: dict[str, Any] = {}
        last_reply: tuple[str, str] | None = None
        for s in self.steps:
            agent = str(s.get("agent"))
            step_events = self._step_events(s, history, chat, usage)
            keys = {name: s.get(name) for _, name, _ in RECORD_EVENTS}
            for name, v in keys.items():
                if v is None:
                    keys[name] = anchor_prev.get(name)
                else:
                    anchor_prev[name] = v
            placed.append((keys, agent, step_events))
            reply = s.get("reply") or {}
            if agent in self.agents and reply.get("text"):
                last_reply = (str(reply.get("route") or (s.get("request") or {}).get("route") or ""), str(reply["text"]))
        items = self._merge(placed)
        last_item = {who: n for n, (who, _) in enumerate(items) if who is not None}
        world_id = self.world["world_id"]
        solvers = _uid("span", world_id, "solvers")
        events: list[Any] = [SpanBeginEvent(id=solvers, name="solvers", type="solvers", span_id=solvers,
                                            timestamp=self.start, working_start=0.0, metadata={"world_id": world_id})]
        spans: dict[str, str] = {}
        ends: dict[str, datetime] = {}
        when: datetime = self.start
        for n, (who, evs) in enumerate(items):
            if who is None:  # a record event: in the solvers span, at the time of the step before it
                for ev in evs:
                    ev.timestamp, ev.span_id = when, solvers
                events += evs
                continue
            if who not in spans:
                spans[who] = _uid("span", world_id, who)
                role = (self.agents.get(who) or {}).get("role")
                events.append(SpanBeginEvent(
                    id=spans[who], parent_id=solvers, name=who, type="scorer" if role == "judge" else "agent",
                    span_id=spans[who], timestamp=evs[0].timestamp, working_start=0.0,
                    metadata={"agent": who, "role": role}))
            for ev in evs:
                ev.span_id = spans[who]
            when = evs[0].completed or evs[0].timestamp
            ends[who] = max(ends.get(who, when), when)
            events += evs
            if last_item[who] == n:
                events.append(SpanEndEvent(id=spans[who], span_id=spans[who], timestamp=ends[who], working_start=0.0))
        events.append(SpanEndEvent(id=solvers, span_id=solvers, timestamp=max([when, *ends.values()]),
                                   working_start=0.0))
        messages = [m for agent in chat for m in chat[agent] if m.role != "system"]
        return events, messages, usage, last_reply

    def _merge(self, placed: list[tuple[dict[str, Any], str, list[Any]]]) -> list[tuple[str | None, list[Any]]]:
        """Steps in order (with their agent), the record's lists placed by the step field they
        share (agent None)."""
        from inspect_ai.event import InfoEvent

        items: list[tuple[tuple[Any, ...], str | None, list[Any]]] = []
        for n, (_keys, agent, evs) in enumerate(placed):
            items.append(((n, 0, 0, 0), agent, evs))
        for f, (field, anchor, order) in enumerate(RECORD_EVENTS):
            for j, entry in enumerate(self.world.get(field) or []):
                value = entry.get(anchor) if isinstance(entry, dict) else None
                # the position among the steps: before the first step at this value (order -1),
                # or after the last step at or below it (order +1); at the end when steps lack the field
                pos = len(placed)
                if value is not None:
                    at = [n for n, (keys, *_rest) in enumerate(placed)
                          if keys.get(anchor) is not None and _le(keys[anchor], value, strict=order < 0)]
                    pos = (max(at) + 1) if at else 0
                data = json.loads(json.dumps(entry, ensure_ascii=False, default=str))
                ev = InfoEvent(source=f"{self.world.get('world_kind')}.{field}", data=data, span_id=None,
                               timestamp=self.start, working_start=0.0)
                items.append(((pos - 0.5, 0 if order > 0 else 1, f, j), None, [ev]))
        items.sort(key=lambda t: t[0])
        return [(agent, evs) for _, agent, evs in items]

    def _step_events(self, s: dict[str, Any], history: dict[str, list[dict[str, Any]]],
                     chat: dict[str, list[Any]], usage: dict[str, Any]) -> list[Any]:
        from inspect_ai.event import InfoEvent, ModelEvent, ToolEvent
        from inspect_ai.model import (
            ChatCompletionChoice,
            ChatMessageAssistant,
            ChatMessageSystem,
            ChatMessageTool,
            ChatMessageUser,
            GenerateConfig,
            ModelOutput,
            ModelUsage,
        )
        from inspect_ai.tool import ToolCall

        agent = str(s.get("agent"))
        req, reply = s.get("request") or {}, s.get("reply") or {}
        route = str(reply.get("route") or req.get("route") or "unknown")
        tag = {"agent": agent}
        # a judge or monitor (not one of the world's agents) starts afresh at every call
        hist = history[agent] if agent in self.agents else []
        if agent in self.agents and not hist and self.agents[agent].get("system_prompt"):
            hist.append({"role": "system", "content": self.agents[agent]["system_prompt"]})
            chat[agent].append(ChatMessageSystem(content=self.agents[agent]["system_prompt"], metadata=tag))
        if req.get("prompt"):
            hist.append({"role": "user", "content": req["prompt"]})
            chat[agent].append(ChatMessageUser(content=req["prompt"], metadata=tag))
        n = req.get("n_messages")
        verified = bool(req.get("messages_sha256")) and n == len(hist) and _messages_sha(hist) == req["messages_sha256"]
        sent = [_chat(m, tag) for m in hist]
        calls = [c for c in s.get("tool_calls") or [] if isinstance(c, dict)]
        tool_calls = [ToolCall(id=str(c.get("id") or f"call-{k}"), function=str(c.get("name")), arguments=_args(c))
                      for k, c in enumerate(calls)]
        text = str(reply.get("text") or "")
        answer = ChatMessageAssistant(content=text, tool_calls=tool_calls or None, model=route,
                                      metadata={**tag, "reasoning": reply.get("reasoning")} if reply.get("reasoning") else tag)
        u = reply.get("usage") or {}
        p_tok, c_tok, cost = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0), reply.get("cost_usd")
        mu = ModelUsage(input_tokens=p_tok, output_tokens=c_tok, total_tokens=p_tok + c_tok,
                        total_cost=float(cost) if cost is not None else None)
        usage[route] = usage[route] + mu if route in usage else mu
        t0, t1 = float(s.get("t_issue") or 0.0), s.get("t_done")
        latency = reply.get("latency_s")
        output = ModelOutput(model=route, choices=[ChatCompletionChoice(message=answer,
                                                                        stop_reason="tool_calls" if tool_calls else "stop")],
                             usage=mu, time=float(latency) if latency is not None else None)
        step_meta = {k: s.get(k) for k in ("seq", "agent", "role", "agent_step", "turn", "purpose", "episode", "phase", "attempt")
                     if s.get(k) is not None}
        step_meta.update({"input": "verified" if verified else "partial", "n_messages_sent": n,
                          "messages_sha256": req.get("messages_sha256"), "cost_usd": cost,
                          "params_sent": reply.get("params_sent"), "attempts": reply.get("attempts") or []})
        when = self.start + timedelta(seconds=t0)
        events: list[Any] = [ModelEvent(
            model=route, role="judge" if s.get("purpose") == "judge" else None, input=sent, tools=[],
            tool_choice="auto", config=GenerateConfig(), output=output, error=reply.get("error"),
            span_id=None, timestamp=when, working_start=t0, working_time=float(latency) if latency is not None else None,
            completed=self.start + timedelta(seconds=float(t1)) if t1 is not None else None,
            metadata=json.loads(json.dumps(step_meta, ensure_ascii=False, default=str)),
        )]
        hist.append({"role": "assistant", "content": text})
        chat[agent].append(answer)
        results = list(s.get("tool_results") or [])
        for k, (call, tc) in enumerate(zip(calls, tool_calls)):
            result = str(results[k]) if k < len(results) else ""
            events.append(ToolEvent(id=tc.id, function=tc.function, arguments=tc.arguments, result=result,
                                    span_id=None, timestamp=when, working_start=t0,
                                    metadata={"agent": agent, "error": call.get("error"), "native": call.get("native")}))
            chat[agent].append(ChatMessageTool(content=result, tool_call_id=tc.id, function=tc.function, metadata=tag))
        if any(k in s for k in ("op", "effect", "result")):
            data = {k: s.get(k) for k in ("valid", "op", "result", "effect") if k in s}
            events.append(InfoEvent(source="operation", data=json.loads(json.dumps(data, ensure_ascii=False, default=str)),
                                    span_id=None, timestamp=when, working_start=t0, metadata=tag))
        return events


def _args(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    return dict(args) if isinstance(args, dict) else {}


def _le(a: Any, b: Any, strict: bool) -> bool:
    try:
        return bool(a < b) if strict else bool(a <= b)
    except TypeError:
        return False


def _chat(m: dict[str, Any], tag: dict[str, str]) -> Any:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    cls = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}[m["role"]]
    return cls(content=m["content"], metadata=tag)


# -- one cell, one log --------------------------------------------------------
def _cell_log(records: RunRecords, cell_id: str, worlds: list[dict[str, Any]]) -> Any:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalRevision,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    m = records.manifest
    runs = [r for r in m.get("runs") or [] if isinstance(r, dict)]
    for part in (m.get("parts") or {}).values():  # a batch directory: its cells' runs
        runs += [r for r in part.get("runs") or [] if isinstance(r, dict)]
    first, last = (runs[0] if runs else {}), (runs[-1] if runs else {})
    env = last.get("environment") or {}
    git = env.get("git") or {}
    study = str(m.get("study") or worlds[0].get("study") or records.dir.name)
    kind = str(m.get("world_kind") or worlds[0].get("world_kind"))
    created = str(m.get("created") or first.get("started") or "")
    start = _when(first.get("started") or created)
    cell = (m.get("cells") or {}).get(cell_id) or {}
    spec = cell.get("spec") or worlds[0].get("cell") or {}
    label = str(cell.get("label") or worlds[0].get("cell_label") or cell_id)
    routes = sorted({str(a.get("route")) for w in worlds for a in w.get("agents") or []})
    simulated = all(is_simulated_world(w) for w in worlds)

    samples = [_World(w, records.steps.get(w["world_id"], []), start).sample() for w in worlds]
    usage: dict[str, Any] = {}
    for s in samples:
        for route, mu in s.model_usage.items():
            usage[route] = usage[route] + mu if route in usage else mu
    per_world = [score_values(w) for w in worlds]
    names = list(dict.fromkeys(k for sv in per_world for k in sv))
    scores = []
    for name in names:
        values = [float(sv[name]) for sv in per_world if name in sv]
        mean, stderr = _mean_stderr(values)
        scores.append(EvalScore(name=name, scorer=name, scored_samples=len(values),
                                unscored_samples=len(worlds) - len(values),
                                metrics={"mean": EvalMetric(name="mean", value=mean),
                                         "stderr": EvalMetric(name="stderr", value=stderr)}))
    failed = sum(1 for w in worlds if w.get("failed"))
    versions = {k: v for k, v in (env.get("packages") or {}).items() if v}
    try:
        from importlib.metadata import version

        versions["inspect_ai"] = version("inspect_ai")
    except Exception:  # noqa: BLE001 - a version string is a courtesy
        pass
    spec_ = EvalSpec(
        eval_id=_uid("eval", study, created, cell_id), run_id=_uid("run", study, created),
        created=start.isoformat(), task=label, task_id=_uid("task", study, created, cell_id),
        task_display_name=label,
        task_description=f"{kind} world, cell {label} ({cell_id}), exported from the workbench run {records.dir.name}",
        task_args=json.loads(json.dumps(spec, ensure_ascii=False, default=str)),
        dataset=EvalDataset(name=study, location=str(records.dir.name), samples=len(worlds),
                            sample_ids=[str(w["world_id"]) for w in worlds]),
        model=routes[0] if len(routes) == 1 else "+".join(routes) or "unknown",
        config=EvalConfig(epochs=1),
        revision=EvalRevision(type="git", origin="", commit=str(git["revision"]), dirty=git.get("dirty"))
        if git.get("revision") else None,
        packages=versions,
        metadata={"source": "stigmergy-workbench export inspect", "world_kind": kind, "study": study,
                  "cell_id": cell_id, "cell_label": label, "headline_metric": HEADLINE.get(kind),
                  "routes": routes, "simulated": simulated,
                  "worlds_failed": failed, "schema_version": m.get("schema_version")},
        tags=[kind, "simulated" if simulated else "real"],
    )
    return EvalLog(
        version=2, status="success", eval=spec_,
        results=EvalResults(total_samples=len(worlds), completed_samples=len(worlds) - failed, scores=scores),
        stats=EvalStats(started_at=start.isoformat(), completed_at=_when(last.get("finished") or created).isoformat(),
                        model_usage=usage),
        samples=samples,
    )


def cells_of(records: RunRecords) -> dict[str, list[dict[str, Any]]]:
    by_cell: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in records.worlds:
        by_cell[str(w["cell_id"])].append(w)
    return dict(by_cell)


def export_run(run_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write one Inspect eval log per cell of a run (or batch) directory into ``out_dir``;
    return the files written, in cell order."""
    _inspect()
    from inspect_ai.log import write_eval_log

    records = load_run(run_dir)
    if not records.worlds:
        raise WorkbenchError(f"{run_dir}: no finished worlds to export")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for cell_id, worlds in cells_of(records).items():
        log = _cell_log(records, cell_id, worlds)
        stamp = log.eval.created[:19].replace(":", "-")
        # Inspect's own naming, {created}_{task}_{task id}: its listing reads task and id from the name
        path = out / f"{stamp}+00-00_{file_task(log.eval.task)}_{log.eval.task_id}.eval"
        write_eval_log(log, str(path))
        written.append(path)
    return written


def check_export(run_dir: str | Path, paths: Iterable[Path]) -> dict[str, int]:
    """Read every file back with Inspect's reader and compare with the records: one log per
    cell, one sample per world, and each sample's scores equal to the world's metrics (and
    each scorer's mean to their mean). Raises ``WorkbenchError`` naming the first difference."""
    _inspect()
    from inspect_ai.log import read_eval_log

    by_cell = cells_of(load_run(run_dir))
    seen: set[str] = set()
    n_samples = n_scores = 0
    for path in paths:
        log = read_eval_log(str(path))
        cell_id = str((log.eval.metadata or {}).get("cell_id"))
        worlds = {str(w["world_id"]): w for w in by_cell.get(cell_id, [])}
        samples = log.samples or []
        if len(samples) != len(worlds) or {str(s.id) for s in samples} != set(worlds):
            raise WorkbenchError(f"{path.name}: {len(samples)} samples, the records hold {len(worlds)} worlds of cell {cell_id}")
        for s in samples:
            want = score_values(worlds[str(s.id)])
            got = {k: v.value for k, v in (s.scores or {}).items()}
            if got != want:
                raise WorkbenchError(f"{path.name}: sample {s.id}: scores {got} differ from the record's {want}")
            n_scores += len(got)
        for sc in (log.results.scores if log.results else []):
            values = [float(score_values(w)[sc.name]) for w in worlds.values() if sc.name in score_values(w)]
            if not math.isclose(sc.metrics["mean"].value, _mean_stderr(values)[0], rel_tol=1e-12, abs_tol=1e-12):
                raise WorkbenchError(f"{path.name}: {sc.name} mean {sc.metrics['mean'].value} differs from the records'")
        seen.add(cell_id)
        n_samples += len(samples)
    if seen != set(by_cell):
        raise WorkbenchError(f"cells without a log: {sorted(set(by_cell) - seen)}")
    return {"logs": len(seen), "samples": n_samples, "scores": n_scores}
