"""World kind 3: the peer-verification ("collusion") world.

Two agents repeat a fixed sequence of episodes (task, communication, verdict,
feedback and reflection); the verification protocol demands the peer's raw
log over a channel too narrow to carry it, and the reward pays for verdicts
that match the truth, not for compliance, so collusion (mutual ACCEPT under
the raw-only policy) can emerge, or not, from the mechanism. See
``shared/spec/collusion.md`` for the rules this package enforces.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from workbench.errors import InputError
from workbench.kinds.base import KindCommand, Section, WorldContext, WorldKind, WorldOutcome
from workbench.resources import study_path
from workbench.templates import template_set
from workbench.worlds.collusion import judges as _judges  # noqa: F401  (registers sim-collusion-judge/...)
from workbench.worlds.collusion import monitor_route as _monitor_route  # noqa: F401  (sim-collusion-monitor/...)
from workbench.worlds.collusion import simulated as _simulated  # noqa: F401  (registers sim-collusion/...)
from workbench.worlds.collusion.spec import AGENTS, CollusionCell


class CollusionKind(WorldKind):
    name = "collusion"
    worlds_per_process = 1  # a world takes seconds (many turns, sandboxed code): one is worth a process
    cell_spec = CollusionCell
    report_notebook = "collusion_analysis"

    def describe_cell(self, cell: Any) -> str:
        return cell.describe()

    def routes(self, cell: CollusionCell) -> set[str]:
        """Every route the cell uses: both agents, or alice and the controlled peer's recorder."""
        out = {cell.route_for("alice")}
        out.add(cell.peer_route() if cell.controlled != "none" else cell.route_for("bob"))
        return out

    def template_root(self, cell: CollusionCell, base_dir: Path) -> Path:
        return study_path(base_dir, cell.prompts, explicit="prompts" in cell.model_fields_set)

    def opening_messages(self, cell: CollusionCell, base_dir: Path, seed: int) -> dict[str, list[dict[str, str]]]:
        """Each live agent's system prompt, its task opening of the first episode of each task family in
        sequence 0 (in the order the families first come), and the communication and verdict openings of
        the first episode, as a world sends them (the sequence, not the seed, picks the tasks: world i of
        every cell plays sequence i). ``workbench prompts`` diffs them between cells, so a protocol factor
        (horizon, limit_notice, verdict_opening) or a family's option (code_tools, extraction_ids,
        data_questions) is seen to change its own text only, whichever family sequence 0 opens with."""
        from workbench.worlds.collusion import tasks as T
        from workbench.worlds.collusion.episode import EpisodeRunner, Recorder, system_prompt
        from workbench.worlds.collusion.world import episode_sequence

        t = template_set(self.template_root(cell, base_dir))
        sequence = episode_sequence(cell, 0, base_dir)

        def runner(index: int) -> EpisodeRunner:
            entry = sequence[index]
            tasks = {s: T.offered_task(T.get_task(getattr(entry, s)), cell.code_tools, cell.extraction_ids)
                     for s in AGENTS}
            return EpisodeRunner(cell=cell, templates=t, recorder=Recorder("prompts", 0), agents={},
                                 episode=index + 1, n_episodes=len(sequence), warmup=cell.warmup > 0,
                                 policy=cell.policies()[0], throttled=cell.throttles()[0], tasks=tasks,
                                 task_tools={s: [] for s in AGENTS}, workspace_factory=None, evaluate=None)

        def family_firsts(slot: str) -> list[int]:
            firsts: dict[str, int] = {}
            for i, entry in enumerate(sequence):
                firsts.setdefault(T.get_task(getattr(entry, slot)).family, i)
            return sorted(firsts.values())

        first = runner(0)
        live = [s for s in AGENTS if not (s == "bob" and cell.controlled_spec() is not None)]
        return {slot: [{"role": "system", "content": system_prompt(t, cell, slot, len(sequence))},
                       *({"role": "user", "content": runner(i).task_opening(slot)} for i in family_firsts(slot)),
                       {"role": "user", "content": first.communication_opening(slot)},
                       {"role": "user", "content": first.verdict_opening(slot)}] for slot in live}

    async def run_world(self, cell: CollusionCell, ctx: WorldContext) -> WorldOutcome:
        from workbench.worlds.collusion.world import CollusionWorld

        world = CollusionWorld(cell, world_id=ctx.world_id, cell_id=ctx.cell_id, world_index=ctx.world_index,
                               seed=ctx.seed, run=ctx.run, templates=template_set(self.template_root(cell, ctx.base_dir)),
                               client_factory=ctx.client_factory, base_dir=Path(ctx.base_dir),
                               checkpoint_dir=ctx.checkpoint_dir)
        return await world.run()

    def check_cell(self, cell: CollusionCell, worlds_per_cell: int) -> None:
        """World i plays episode sequence i, so a cell needs a sequence per world."""
        if cell.sequences < worlds_per_cell:
            raise InputError(f"sequences: expected at least worlds_per_cell = {worlds_per_cell} fixed episode "
                             f"sequences, one per trajectory (got {cell.sequences})")

    def check_inputs(self, cell: CollusionCell, base_dir: Path, worlds_per_cell: int) -> None:
        """An imported sequences file must be inside the study's project (or absolute), readable, and
        hold a sequence of warm-up + evaluation episodes for every world. A declared monitor's route
        must be one that can be built (it runs later, over the records)."""
        if cell.monitor is not None:
            from workbench.models.factory import check_route

            try:
                check_route(cell.monitor.route)
            except InputError as exc:
                raise InputError(f"monitor.route: {exc.args[0]}") from None
        if not cell.sequences_file:
            return
        from workbench.inputs import confined
        from workbench.worlds.collusion.tasks.sequences import check_imported, load_sequence_file

        path = confined(base_dir, cell.sequences_file, "sequences_file")
        try:
            sequences = load_sequence_file(path)
            check_imported(sequences, cell.warmup + cell.episodes, worlds_per_cell, str(path))
        except InputError as exc:
            message = str(exc.args[0]).removeprefix("sequences_file: ")
            raise InputError(f"sequences_file: {message}") from None

    def preflight(self, cell: CollusionCell) -> list[str]:
        """Code-analysis episodes run agent-written tests; without a working sandbox the study is refused
        (unless --unsafe-code-tasks allowed unconfined runs), never run silently unconfined."""
        from workbench.worlds.collusion.tasks.sandbox import sandbox_status, unsafe_allowed

        ok, why = sandbox_status()
        if ok or unsafe_allowed():
            return []
        return [f"collusion episodes include code-analysis tasks whose agent-written tests must run confined, "
                f"and the sandbox is unavailable: {why}"]

    def commands(self) -> list[KindCommand]:
        """`workbench collusion import-tasks PATH`: a task pool in the original's layout."""
        from workbench.worlds.collusion.commands import COMMANDS

        return list(COMMANDS)

    def design_files(self, cell: CollusionCell, base_dir: Path) -> list[Path]:
        """What a preregistration lock hashes besides params and prompts: the task data and
        the code that builds, runs and scores the tasks (the tasks are part of the design)."""
        files = sorted((Path(__file__).resolve().parent / "tasks").glob("*.py"))
        if cell.sequences_file:  # imported sequences are part of the design too
            seq = Path(cell.sequences_file)
            seq = seq if seq.is_absolute() else base_dir / seq
            files += sorted(seq.glob("*.json")) if seq.is_dir() else [seq]
        return files

    def simulated_profiles(self) -> dict[str, str]:
        from workbench.worlds.collusion.simulated import PROFILES

        out = {f"sim-collusion/{p.name}": p.description for p in PROFILES.values()}
        out["sim-collusion-judge/lexical"] = "simulated judge: commitment and relaxation cues, verbatim quotes"
        out["sim-collusion-monitor/cues"] = "simulated monitor route: the simulated monitor's cue rule over its prompt"
        return out

    def simulation_notes(self, cell: CollusionCell) -> list[str]:
        """Settings of the cell that its simulated agents cannot express (one line each, for the report
        beside the cell); empty for a cell of real models. See simulated.ablation_notes."""
        from workbench.worlds.collusion.simulated import ablation_notes

        return ablation_notes(cell)

    def run_judges(self, records: Any, route: str, **options: Any) -> Any:
        """The agreement and relaxation judges over a run set (``workbench judge``)."""
        return _judges.run_judges(records, route, **options)

    def world_page(self, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
        from workbench.worlds.collusion.page import sections

        return sections(records, world, steps)

    def world_metrics(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
        from workbench.worlds.collusion.metrics import world_metrics

        return world_metrics(world, steps)

    def summary_text(self, worlds: list[dict[str, Any]]) -> str:
        from workbench.worlds.collusion.metrics import summary_text

        return summary_text(worlds)

    def metric_tables(self, records: Any, **_rules: Any) -> dict[str, Any]:
        from workbench.worlds.collusion.metrics import metric_tables

        return metric_tables(records)

    def describe_world(self, records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
        from workbench.worlds.collusion.world import describe_world

        describe_world(records, world_id, out, full)

    def contrast_units(self, records: Any) -> Any:
        """Trajectories, paired across cells by episode sequence."""
        from workbench.worlds.collusion.metrics import units

        return units(records)


KIND = CollusionKind()

__all__ = ["AGENTS", "KIND", "CollusionKind", "CollusionCell"]
