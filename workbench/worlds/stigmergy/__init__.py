"""World kind 1: agents (the paper: four, one interdependent pair) sharing one key-value store, unprompted
coordination."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from workbench.kinds.base import Section, WorldContext, WorldKind, WorldOutcome
from workbench.records import RowKeeper
from workbench.resources import study_path
from workbench.templates import template_set
from workbench.worlds.stigmergy import simulated as _simulated  # registers the sim/PROFILE routes
from workbench.worlds.stigmergy.spec import StigmergyCell


class StigmergyKind(WorldKind):
    name = "stigmergy"
    cell_spec = StigmergyCell
    report_notebook = "analysis"
    rescoring = True  # parser and answer rules can be swapped on recorded replies
    terminal_tables = ("coordination", "contrasts", "attrition", "e1", "looks", "exposure_then_read")

    def describe_cell(self, cell: Any) -> str:
        return cell.describe()

    def routes(self, cell: StigmergyCell) -> set[str]:
        return {cell.route_for(r) for r in cell.roles()}

    def calibration(self) -> list[dict[str, Any]]:
        from workbench.worlds.stigmergy.calibration import check_all

        return [c.row() for c in check_all()]

    def profile_text(self, name: str) -> str | None:
        import yaml

        from workbench.worlds.stigmergy.simulated import PROFILES

        profile = PROFILES.get(name.removeprefix("sim/"))
        if profile is None:
            return None
        return yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, allow_unicode=True)

    def opening_messages(self, cell: StigmergyCell, base_dir: Path, seed: int) -> dict[str, list[dict[str, str]]]:
        from workbench.worlds.stigmergy import prompts as P
        from workbench.worlds.stigmergy.tasks import draw_tasks

        t = template_set(self.template_root(cell, base_dir))
        tasks = draw_tasks(seed, cell.task_form, cell.digits, cell.modulus, pairs=cell.pairs, solos=cell.solos)
        return {role: P.opening(t, cell, task) for role, task in tasks.tasks.items()}

    # metrics that need the store: a no-store world (submit is its only operation) cannot have them
    NEED_STORE = frozenset({"cross_agent_access", "strict_cross_agent_access", "informative_read", "pair_write",
                            "exposure", "exposed_then_read_world", "signalled_note"})

    def impossible(self, cell: StigmergyCell, metric: str) -> bool:
        return cell.condition == "no-store" and metric in self.NEED_STORE

    def contrast_metrics(self) -> set[str] | None:
        """The per-world yes/no metrics (the definitions say "per world: ..." and are not counts)."""
        from workbench.worlds.stigmergy.metrics import DEFINITIONS

        return {m for m, text in DEFINITIONS.items() if text.startswith("per world:")
                and not text.startswith("per world: the number")}

    def rehearsal_problems(self, cell: StigmergyCell, root: Path, profiles: dict[str, Any]) -> list[str]:
        from workbench.worlds.stigmergy.fitting import rehearsal_problems

        return rehearsal_problems(self, cell, root, profiles)

    def unrendered_templates(self, cell: StigmergyCell) -> set[str]:
        """What workbench.worlds.stigmergy.prompts never renders for this cell: the other
        action interface's templates, the other persistence clauses, the namespaced paragraph outside the namespaced condition, and the
        reader-told sentence where readers are not told or there is no store."""
        from workbench.worlds.stigmergy.prompts import interface_unrendered
        from workbench.worlds.stigmergy.spec import CLAUSES
        from workbench.worlds.stigmergy.tasks import PAIR_FORMS

        out = {f"persistence/{c}.txt" for c in CLAUSES if c != cell.clauses}
        out |= interface_unrendered(cell.actions)  # the other action interface's templates
        if cell.condition != "namespaced":
            out.add("namespaced_paragraph.txt")
        if cell.reader_signal != "told" or cell.condition == "no-store":
            out.add("reader_told.txt")
        # the pair tasks of the other vocabularies, and list items of the other signals
        variants = {"named": "", "own-only": "-own-only", "withheld": "-withheld"}
        out |= {f"tasks/{form}{suffix}.txt" for form in PAIR_FORMS for level, suffix in variants.items()
                if level != cell.vocabulary}
        if cell.condition != "authored":
            out |= {"results/list_item_authored.txt", "results/author_you.txt", "results/author_environment.txt",
                    "results/author_other.txt"}
        if cell.reader_signal != "receipts" or cell.condition == "authored":
            out.add("results/list_item_receipt.txt")
        return out

    def template_root(self, cell: StigmergyCell, base_dir: Path) -> Path:
        return study_path(base_dir, cell.prompts, explicit="prompts" in cell.model_fields_set)

    async def run_world(self, cell: StigmergyCell, ctx: WorldContext) -> WorldOutcome:
        from workbench.worlds.stigmergy.world import StigmergyWorld

        world = StigmergyWorld(cell, world_id=ctx.world_id, cell_id=ctx.cell_id, seed=ctx.seed, run=ctx.run,
                               templates=template_set(self.template_root(cell, ctx.base_dir)),
                               client_factory=ctx.client_factory, monitor=ctx.monitor)
        return await world.run()

    def world_page(self, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
        from workbench.worlds.stigmergy.page import sections

        return sections(records, world, steps)

    def world_metrics(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
        from workbench.worlds.stigmergy.metrics import world_row

        return world_row(world, steps)

    def row_keeper(self, worlds: int) -> RowKeeper | None:
        """The per-world rows of every shared-store frame, kept as worlds are recorded:
        ``workbench metrics`` on 100,000 worlds reads them instead of 2 GB of steps.
        Only for studies the analysis reads them for (as many worlds as its one-pass
        frames start at): below that, computing the rows again costs less than
        keeping them (about 0.35 ms of CPU per world while the study runs)."""
        from workbench.worlds.stigmergy.fastframes import MIN_WORLDS, row_keeper

        return row_keeper() if worlds >= MIN_WORLDS else None

    def summary_text(self, worlds: list[dict[str, Any]]) -> str:
        from workbench.worlds.stigmergy.summary import summary_text

        return summary_text(worlds)

    def summary_display(self, records: Any) -> Any:
        """Rates per model and condition, styled."""
        from workbench.worlds.stigmergy.frames import world_frame
        from workbench.worlds.stigmergy.views import per_model_table

        return per_model_table(world_frame(records))

    def metric_tables(self, records: Any, *, parser_rule: str | None = None, answer_rule: str | None = None,
                      holm: bool = False) -> dict[str, Any]:
        from workbench.worlds.stigmergy.export import cell_tables

        return cell_tables(records, parser_rule, answer_rule, holm=holm)

    def export_metrics(self, records: Any, out: Path, *, parser_rule: str | None = None,
                       answer_rule: str | None = None, holm: bool = False) -> list[Path]:
        from workbench.worlds.stigmergy.export import write_metrics

        return list(write_metrics(records, out, parser_rule, answer_rule, holm=holm).values())

    def describe_world(self, records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
        from workbench.worlds.stigmergy.describe import print_world

        print_world(records, world_id, out, full=full)

    def simulated_profiles(self) -> dict[str, str]:
        return {f"sim/{p.name}": p.description for p in _simulated.PROFILES.values()}

    def study_profile(self, name: str, body: dict[str, Any]) -> Any:
        return _simulated.study_profile(name, body)

    def contrast_units(self, records: Any) -> Any:
        """Worlds, paired across cells by world index (see :mod:`workbench.metrics.contrasts`)."""
        from workbench.worlds.stigmergy.frames import units

        return units(records)


KIND = StigmergyKind()
