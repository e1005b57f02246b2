"""World kind 2, the recall world: role-played teams sharing one vector memory,
scored on recalling facts (belief asymmetry, authority collapse, memory anchoring).

The kind's interface for the engine (see :mod:`workbench.worlds`): ``NAME``,
``CellSpec``, ``routes``, ``template_root``, ``design_files``, ``run_world``,
``world_metrics``, and the optional hooks ``summary_text``, ``metric_tables``,
``describe_world`` and ``REPORT_NOTEBOOK``. Importing it registers the
simulated route family ``sim-recall/PROFILE`` (and ``sim-recall/judge``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TextIO

from workbench.models.base import ModelClient
from workbench.worlds.recall import simulated as _simulated
from workbench.worlds.recall.spec import RecallCell

NAME = "recall"
CellSpec = RecallCell
REPORT_NOTEBOOK = "recall_analysis"

_simulated.register()


def routes(cell: RecallCell) -> set[str]:
    """Every route the cell may call: agents (default and per role) and the judge."""
    out = set(cell.agent_routes())
    if cell.scoring == "judge":
        out.add(cell.judge)
    return out


def template_root(cell: RecallCell, base_dir: Path) -> Path:
    """The prompt folder. Called by the params loader for every cell, so the cell's
    scripts are also loaded and validated here: a bad script fails the study file
    before any world runs, with the script's file, turn and field."""
    from workbench.worlds.recall.world import cell_scripts

    cell_scripts(cell, Path(base_dir))
    return (Path(base_dir) / cell.prompts).resolve()


def design_files(cell: RecallCell, base_dir: Path) -> list[Path]:
    """The scenario scripts the cell runs (hashed by preregistration locks)."""
    from workbench.worlds.recall.world import cell_scripts

    return [Path(s.path) for s in cell_scripts(cell, Path(base_dir)) if s.path]


async def run_world(cell: RecallCell, *, world_id: str, cell_id: str, seed: int, run: int, base_dir: Path,
                    client_factory: Callable[[str, str, int, dict[str, Any]], ModelClient],
                    monitor: Any = None):  # noqa: ANN201 - WorldOutcome
    """Run one world. ``monitor`` is accepted for the engine's interface and unused:
    the recall world records no post-hoc labels."""
    from workbench.templates import template_set
    from workbench.worlds.recall.world import RecallWorld

    world = RecallWorld(cell, world_id=world_id, cell_id=cell_id, seed=seed, run=run,
                        templates=template_set(template_root(cell, base_dir)), base_dir=Path(base_dir),
                        client_factory=client_factory)
    return await world.run()


def world_metrics(world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    from workbench.metrics.recall import world_row

    return world_row(world, steps)


def summary_text(worlds: list[dict[str, Any]]) -> str:
    from workbench.metrics.recall import summary_text as _summary

    return _summary(worlds)


def metric_tables(records: Any) -> dict[str, Any]:
    from workbench.metrics.recall import metric_tables as _tables

    return _tables(records.worlds)


def describe_world(records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
    from workbench.metrics.recall import describe_world as _describe

    _describe(records.world(world_id), records.steps.get(world_id, []), out, full=full)


def simulated_profiles() -> dict[str, str]:
    """Routes and descriptions for ``workbench profiles``."""
    from workbench.worlds.recall.simulated import PROFILES

    out = {f"sim-recall/{p.name}": p.description for p in PROFILES.values()}
    out["sim-recall/judge"] = "simulated judge: dates, amounts and numbers with units in any common format"
    return out


def contrast_units(records: Any) -> Any:
    """Recalls, paired across cells by script, repetition and turn."""
    from workbench.metrics.recall import units

    return units(records)
