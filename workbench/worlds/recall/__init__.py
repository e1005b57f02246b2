"""World kind 2, the recall world: role-played teams sharing one vector memory,
scored on recalling facts (belief asymmetry, authority collapse, memory anchoring).

Importing it registers the simulated route family ``sim-recall/PROFILE`` (and
``sim-recall/judge``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from workbench.kinds.base import KindCommand, Section, WorldContext, WorldKind, WorldOutcome
from workbench.resources import study_path
from workbench.worlds.recall import simulated as _simulated
from workbench.worlds.recall.spec import RecallCell

_simulated.register()


class RecallKind(WorldKind):
    name = "recall"
    cell_spec = RecallCell
    report_notebook = "recall_analysis"

    def describe_cell(self, cell: Any) -> str:
        return cell.describe()

    def routes(self, cell: RecallCell) -> set[str]:
        """Every route the cell may call: agents (default and per role) and the judge."""
        out = set(cell.agent_routes())
        if cell.scoring == "judge":
            out.add(cell.judge)
        return out

    def check_inputs(self, cell: RecallCell, base_dir: Path, worlds_per_cell: int) -> None:
        """A ``scripts:`` the study wrote stays inside its project (or is absolute): a glob that climbs
        out with ``..`` would read JSON from anywhere on the machine."""
        if "scripts" in cell.model_fields_set:
            from workbench.inputs import confined

            confined(base_dir, cell.scripts, "scripts")

    def template_root(self, cell: RecallCell, base_dir: Path) -> Path:
        """The prompt folder. Called by the params loader for every cell, so the cell's
        scripts are also loaded and validated here: a bad script fails the study file
        before any world runs, with the script's file, turn and field."""
        from workbench.worlds.recall.world import cell_scripts

        self.check_inputs(cell, Path(base_dir), 1)  # no script is read from outside the project
        scripts = cell_scripts(cell, Path(base_dir))
        if cell.poison is not None or cell.spoof is not None:  # a role not in a team, nothing to poison: at load
            from workbench.worlds.recall.adversary import apply

            for script in scripts:
                apply(script, cell.poison, cell.spoof, verified=cell.verified_authority)
        return study_path(base_dir, cell.prompts, explicit="prompts" in cell.model_fields_set)

    def design_files(self, cell: RecallCell, base_dir: Path) -> list[Path]:
        """The scenario scripts the cell runs and the teams file (roles, authorities, briefs),
        hashed by preregistration locks."""
        from workbench.worlds.recall.domains import DOMAINS_FILE
        from workbench.worlds.recall.world import cell_scripts

        return [Path(s.path) for s in cell_scripts(cell, Path(base_dir)) if s.path] + [DOMAINS_FILE]

    async def run_world(self, cell: RecallCell, ctx: WorldContext) -> WorldOutcome:
        """Run one world; the recall world records no monitor labels."""
        from workbench.templates import template_set
        from workbench.worlds.recall.world import RecallWorld

        world = RecallWorld(cell, world_id=ctx.world_id, cell_id=ctx.cell_id, world_index=ctx.world_index,
                            seed=ctx.seed, run=ctx.run, templates=template_set(self.template_root(cell, ctx.base_dir)),
                            base_dir=Path(ctx.base_dir), client_factory=ctx.client_factory)
        return await world.run()

    def world_page(self, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
        from workbench.worlds.recall.page import sections

        return sections(records, world, steps)

    def world_metrics(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
        from workbench.worlds.recall.metrics import world_row

        return world_row(world, steps)

    def summary_text(self, worlds: list[dict[str, Any]]) -> str:
        from workbench.worlds.recall.metrics import summary_text

        return summary_text(worlds)

    def metric_tables(self, records: Any, **_rules: Any) -> dict[str, Any]:
        from workbench.worlds.recall.metrics import metric_tables
        from workbench.worlds.recall.poisoning import poisoning_table

        tables = metric_tables(records.worlds)
        if any(w.get("adversary") for w in records.worlds):  # a poisoner or a spoof in some cell
            tables["poisoning"] = poisoning_table(records.worlds)
        return tables

    def describe_world(self, records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
        from workbench.worlds.recall.metrics import describe_world

        describe_world(records.world(world_id), records.steps.get(world_id, []), out, full=full)

    def generate_scripts(self, out: Path, per_domain: int, seed: int, recalls_per_mode: int = 2) -> list[Path]:
        """Seeded scenario scripts, ``per_domain`` for each domain, under ``out/DOMAIN/``
        (``workbench recall generate``); each is validated by the loader before it is kept."""
        from workbench.worlds.recall.generator import generate_all_scripts

        return generate_all_scripts(out, per_domain, seed, recalls_per_mode=recalls_per_mode)

    def commands(self) -> list[KindCommand]:
        from workbench.worlds.recall.commands import COMMANDS

        return list(COMMANDS)

    def simulated_profiles(self) -> dict[str, str]:
        from workbench.worlds.recall.simulated import PROFILES

        out = {f"sim-recall/{p.name}": p.description for p in PROFILES.values()}
        out["sim-recall/judge"] = "simulated judge: dates, amounts and numbers with units in any common format"
        return out

    def contrast_units(self, records: Any) -> Any:
        """Recalls, paired across cells by script, repetition and turn."""
        from workbench.worlds.recall.metrics import units

        return units(records)


KIND = RecallKind()
