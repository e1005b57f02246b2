"""World kind 1: four agents, one key-value store, unprompted coordination."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from workbench.models.base import ModelClient
from workbench.templates import template_set
from workbench.worlds.stigmergy.spec import StigmergyCell
from workbench.worlds.stigmergy.world import StigmergyWorld, WorldOutcome

NAME = "stigmergy"
CellSpec = StigmergyCell


def routes(cell: StigmergyCell) -> set[str]:
    from workbench.worlds.stigmergy.tasks import ROLES

    return {cell.route_for(r) for r in ROLES}


def template_root(cell: StigmergyCell, base_dir: Path) -> Path:
    return (base_dir / cell.prompts).resolve()


async def run_world(cell: StigmergyCell, *, world_id: str, cell_id: str, seed: int, run: int, base_dir: Path,
                    client_factory: Callable[[str, str, int, dict[str, Any]], ModelClient],
                    monitor: Any = None) -> WorldOutcome:
    world = StigmergyWorld(cell, world_id=world_id, cell_id=cell_id, seed=seed, run=run,
                           templates=template_set(template_root(cell, base_dir)), client_factory=client_factory,
                           monitor=monitor)
    return await world.run()


def world_metrics(world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    from workbench.metrics.stigmergy import world_row

    return world_row(world, steps)


def contrast_units(records: Any) -> Any:
    """Worlds, paired across cells by world index (see :mod:`workbench.metrics.contrasts`)."""
    from workbench.metrics.frames import units

    return units(records)
