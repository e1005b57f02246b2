"""One trajectory of the peer-verification world: a fixed pair of agents over a
fixed, seeded episode sequence, and the records it leaves.

World index i plays sequence i of the cell's fixed sequences (the same for every
cell, so cells are paired trajectory by trajectory). Agents' clients come from
the study's client factory, so simulated, scripted, replayed and hosted models
play either role through the same tool interface. The world is deterministic
given its seed and the replies: nothing depends on wall-clock time or on the
order in which concurrent calls return.
"""
from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from workbench.errors import InputError
from workbench.kinds.base import ClientFactory, WorldOutcome
from workbench.seeding import derive_seed
from workbench.templates import TemplateSet
from workbench.worlds.collusion.episode import NAMES, Agent, EpisodeRunner, Recorder, WorldFailed, system_prompt
from workbench.worlds.collusion.memory import AgentMemory
from workbench.worlds.collusion.simulated import ablation_notes
from workbench.worlds.collusion.spec import AGENTS, CollusionCell

NAME = "collusion"


@functools.lru_cache(maxsize=32)
def _sequences(seed: int, n_sequences: int, n_episodes: int, warmup: int) -> tuple[Any, ...]:
    from workbench.worlds.collusion import tasks as T

    return tuple(tuple(seq) for seq in T.episode_sequences(seed, n_sequences, n_episodes, warmup=warmup))


def episode_sequence(cell: CollusionCell, index: int, base_dir: Path | None = None) -> tuple[Any, ...]:
    """Sequence ``index`` with our data-search questions in the cell's form (``tasks.forms``)."""
    from workbench.worlds.collusion.tasks.forms import in_form

    return in_form(_base_sequence(cell, index, base_dir), cell.data_questions)


def _base_sequence(cell: CollusionCell, index: int, base_dir: Path | None = None) -> tuple[Any, ...]:
    if cell.sequences_file:  # imported (tasks.sequences.load_sequence_file validates and names the field)
        from workbench.worlds.collusion.tasks.sequences import imported_sequence

        return imported_sequence(cell, index, base_dir)
    if not 0 <= index < cell.sequences:
        raise InputError(f"world index {index} has no episode sequence: the cell has sequences={cell.sequences} "
                         "(raise it, or run fewer worlds per cell)")
    return _sequences(cell.sequence_seed, cell.sequences, cell.episodes, cell.warmup)[index]


class CollusionWorld:
    def __init__(self, cell: CollusionCell, *, world_id: str, world_index: int, seed: int, templates: TemplateSet,
                 client_factory: ClientFactory, base_dir: Path, run: int = 1, cell_id: str = "",
                 checkpoint_dir: Path | None = None) -> None:
        self.cell = cell
        self.world_id = world_id
        self.cell_id = cell_id
        self.seed = seed
        self.run_no = run
        self.t = templates
        self.client_factory = client_factory
        self.base_dir = Path(base_dir)
        self.index = world_index
        self.checkpoint_dir = checkpoint_dir
        self.resume: dict[str, Any] | None = None
        self.recorder = Recorder(world_id, run)
        self.agents: dict[str, Agent] = {}
        for slot in AGENTS:
            if slot == "bob" and cell.controlled != "none":
                continue
            spec = getattr(cell, slot)
            route = cell.route_for(slot)
            options: dict[str, Any] = {}
            if spec.script is not None:
                options["script"] = list(spec.script)
            if spec.latency_s is not None:
                options["latency_s"] = spec.latency_s
            client = client_factory(route, slot, derive_seed(seed, "agent", slot, route), options)
            memory = AgentMemory(system=system_prompt(templates, cell, slot), scope=cell.memory_scope,
                                 keep=spec.keep(), limit_tokens=cell.context_limit_tokens)
            self.agents[slot] = Agent(slot, route, client, memory)

    def _peer_cache(self) -> Path:
        p = Path(self.cell.peer_cache)
        return p if p.is_absolute() else (self.base_dir / p)

    async def run(self) -> WorldOutcome:
        from workbench.worlds.collusion import tasks as T
        from workbench.worlds.collusion.controlled import ControlledPeer, load_or_record

        started = time.perf_counter()
        cell = self.cell
        failure: dict[str, Any] | None = None
        episodes: list[dict[str, Any]] = []
        policies, throttles = cell.policies(), cell.throttles()
        sequence: tuple[Any, ...] = ()
        with tempfile.TemporaryDirectory(prefix="collusion-world-") as workdir:
            try:
                sequence = episode_sequence(cell, self.index, self.base_dir)
                checkpoint = self._open_checkpoint(sequence)
                if checkpoint is not None:
                    episodes = self._restore(checkpoint)
                for i, ep in enumerate(sequence):
                    if i < len(episodes):
                        continue  # restored from the checkpoint
                    tasks = {"alice": T.offered_task(T.get_task(ep.alice), cell.code_tools, cell.extraction_ids),
                             "bob": T.offered_task(T.get_task(ep.bob), cell.code_tools, cell.extraction_ids)}
                    tools = {s: T.task_tools(tasks[s]) for s in AGENTS}
                    peer = None
                    if cell.controlled != "none":
                        record = await load_or_record(
                            cache_dir=self._peer_cache(), route=cell.peer_route(), task=tasks["bob"], cell=cell,
                            templates=self.t, client_factory=self.client_factory, task_tools=tools["bob"],
                            workspace_factory=T.Workspace, workdir=Path(workdir))
                        peer = ControlledPeer(record, cell.controlled, cell.max_rounds, cell.char_limit)
                    runner = EpisodeRunner(
                        cell=cell, templates=self.t, recorder=self.recorder, agents=self.agents, episode=i + 1,
                        n_episodes=len(sequence), warmup=i < cell.warmup, policy=policies[i],
                        throttled=throttles[i], tasks=tasks, task_tools=tools, workspace_factory=T.Workspace,
                        evaluate=T.evaluate, peer=peer, workdir=Path(workdir),
                        validate=(None if cell.answer_check == "none"
                                  else lambda task, answer: T.validate_answer(task.family, task, answer)))
                    n_before = len(self.recorder.steps)
                    try:
                        finished = await runner.run()
                    finally:
                        runner.flush()
                    episodes.append(finished)
                    if checkpoint is not None:
                        self._save(checkpoint, finished, n_before)
            except WorldFailed as exc:
                failure = dict(exc.info)
            except (RuntimeError, ValueError, KeyError) as exc:  # e.g. a controlled peer that cannot be recorded
                failure = {"error": f"{type(exc).__name__}: {exc}", "episode": len(episodes) + 1}
        return WorldOutcome(self._record(episodes, failure, sequence, time.perf_counter() - started),
                            self.recorder.steps)

    # -- episode-level checkpoints (see world_checkpoint) ------------------------------------
    def _open_checkpoint(self, sequence: tuple[Any, ...]) -> Any:
        if self.checkpoint_dir is None:
            return None
        from workbench.worlds.collusion import world_checkpoint as CK

        facts = {"world_id": self.world_id, "cell_id": self.cell_id, "seed": self.seed, "index": self.index,
                 "cell": self.cell.model_dump(mode="json"), "templates": self.t.hashes(),
                 "sequence": [[e.family, e.alice, e.bob] for e in sequence],
                 "agents": {s: [a.route, a.memory.system] for s, a in self.agents.items()}}
        return CK.TrajectoryCheckpoint(CK.checkpoint_path(self.checkpoint_dir, self.world_id), CK.fingerprint(facts))

    def _restore(self, checkpoint: Any) -> list[dict[str, Any]]:
        from workbench.worlds.collusion import world_checkpoint as CK

        entries = checkpoint.load()
        if checkpoint.discarded:
            self.resume = {"episodes_restored": 0, "discarded": checkpoint.discarded}
        for entry in entries:
            # a world's steps carry the run of its record (loaders keep a world's steps of that run);
            # which runs made the restored episodes is in timing.resumed
            self.recorder.steps.extend({**step, "run": self.run_no} for step in entry["steps"])
            for slot, mem in entry["memory"].items():
                CK.restore_memory(self.agents[slot].memory, mem)
        if entries:
            for slot, state in entries[-1]["clients"].items():
                CK.restore_client(self.agents[slot].client, state)
            self.resume = {"episodes_restored": len(entries), "from_runs": sorted({e["run"] for e in entries}),
                           "discarded": None}
        return [e["record"] for e in entries]

    def _save(self, checkpoint: Any, record: dict[str, Any], n_before: int) -> None:
        from workbench.worlds.collusion import world_checkpoint as CK

        checkpoint.append({"episode": record["episode"], "run": self.run_no, "record": record,
                           "steps": self.recorder.steps[n_before:],
                           "memory": {s: CK.memory_entry(a.memory) for s, a in self.agents.items()},
                           "clients": {s: CK.client_state(a.client) for s, a in self.agents.items()}})

    def _record(self, episodes: list[dict[str, Any]], failure: dict[str, Any] | None, sequence: tuple[Any, ...],
                wall_s: float) -> dict[str, Any]:
        cell = self.cell
        agents = []
        for slot in AGENTS:
            if slot in self.agents:
                a = self.agents[slot]
                agents.append({"agent": slot, "role": slot, "route": a.route, "name": NAMES[slot],
                               "system_prompt": a.memory.system, "memory_length": getattr(cell, slot).memory_length,
                               "sampling": cell.sampling_for(slot)})
            else:
                agents.append({"agent": slot, "role": slot, "route": "controlled", "name": NAMES[slot],
                               "recorded_route": cell.peer_route(), "controlled": _controlled_json(cell)})
        settings = [{"episode": i + 1, "warmup": i < cell.warmup, "policy": p, "throttled": t,
                     "char_limit": cell.char_limit if t else None}
                    for i, (p, t) in enumerate(zip(cell.policies(), cell.throttles()))]
        return {
            "kind": "world", "world_kind": NAME, "world_id": self.world_id, "cell_id": self.cell_id,
            "run": self.run_no, "seed": self.seed, "cell": cell.model_dump(mode="json"),
            "valid": failure is None, "failed": failure, "agents": agents,
            "sequence_index": self.index,
            "sequence": [{"family": e.family, "alice": e.alice, "bob": e.bob} for e in sequence],
            "settings": {"episodes": settings, "reward_type": cell.reward_type, "reward_scope": cell.reward_scope,
                         "no_reward": cell.no_reward, "verdict_review": cell.verdict_review,
                         "reflection": cell.reflection and not cell.no_reward, "memory_scope": cell.memory_scope,
                         "memory_length": {s: getattr(cell, s).memory_length for s in AGENTS},
                         "controlled": _controlled_json(cell), "observed_verdict": cell.observed(),
                         "horizon": cell.horizon, "limit_notice": cell.limit_notice,
                         "verdict_opening": cell.verdict_opening, "code_tools": cell.code_tools,
                         "extraction_ids": cell.extraction_ids, "data_questions": cell.data_questions,
                         "max_rounds": cell.max_rounds,
                         "feedback": cell.feedback, "tool_choice": cell.tool_choice,
                         "reasoning_replay": cell.reasoning_replay, "prompts": cell.prompts,
                         "simulation_notes": ablation_notes(cell)},
            "episodes": episodes, "n_steps": len(self.recorder.steps),
            # how the run went, not what happened in it (replay and comparisons leave timing out):
            # episodes restored from a checkpoint, from which runs, or why a checkpoint was discarded
            "timing": {"wall_s": round(wall_s, 6), **({"resumed": self.resume} if self.resume else {})},
        }


def describe_world(records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
    """What ``workbench replay DIR WORLD`` prints: episode by episode, the verdicts,
    rewards and messages (model-written text printed as data, shortened unless ``full``)."""
    world = records.world(world_id)
    cut = (lambda s: s) if full else (lambda s: s if len(s) <= 160 else s[:157] + "...")
    out.write(f"world {world_id} ({world.get('cell_label') or world['cell'].get('label') or ''}) "
              f"sequence {world.get('sequence_index')} valid={world['valid']}\n")
    for a in world["agents"]:
        out.write(f"  {a['agent']}: {a['route']}\n")
    if world.get("failed"):
        out.write(f"  FAILED: {world['failed']}\n")
    for ep in world["episodes"]:
        v = ep["verdicts"]
        out.write(f"episode {ep['episode']}{' (warm-up)' if ep['warmup'] else ''} {ep['family']} policy={ep['policy']} "
                  f"throttled={ep['throttled']} truth={ep['truth']} verdicts=alice:{v['alice']['verdict']} "
                  f"bob:{v['bob']['verdict']} rewards={ep['rewards']}\n")
        for m in ep["messages"]:
            state = "delivered" if m["delivered"] else f"FAILED ({'; '.join(m['failures'])})"
            out.write(f"  r{m['round']} {m['sender']} [{m['chars']} chars, {state}]: {cut(m['text'])!r}\n")
        for slot in AGENTS:
            r = (ep.get("reflections") or {}).get(slot)
            if r:
                out.write(f"  reflection {slot}: {cut(r)!r}\n")


def _controlled_json(cell: CollusionCell) -> Any:
    """The controlled setting as written (an alias name, or its messages and verdict)."""
    c = cell.controlled
    return c if isinstance(c, str) else c.model_dump(mode="json")
