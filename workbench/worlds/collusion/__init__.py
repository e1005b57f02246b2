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
from typing import Any, Callable, TextIO

from workbench.models.base import ModelClient
from workbench.templates import template_set
from workbench.worlds.collusion import judges as _judges  # noqa: F401  (registers sim-collusion-judge/...)
from workbench.worlds.collusion import simulated as _simulated  # noqa: F401  (registers sim-collusion/...)
from workbench.worlds.collusion.spec import AGENTS, CollusionCell
from workbench.worlds.collusion.world import CollusionWorld, WorldOutcome

NAME = "collusion"
CellSpec = CollusionCell
REPORT_NOTEBOOK = "collusion_analysis"  # what `workbench report` executes on a run set of this kind


def routes(cell: CollusionCell) -> set[str]:
    """Every route the cell uses: both agents, or alice and the controlled peer's recorder."""
    out = {cell.route_for("alice")}
    out.add(cell.peer_route() if cell.controlled != "none" else cell.route_for("bob"))
    return out


def template_root(cell: CollusionCell, base_dir: Path) -> Path:
    return (base_dir / cell.prompts).resolve()


async def run_world(cell: CollusionCell, *, world_id: str, cell_id: str, seed: int, run: int, base_dir: Path,
                    client_factory: Callable[[str, str, int, dict[str, Any]], ModelClient],
                    monitor: Any = None) -> WorldOutcome:
    world = CollusionWorld(cell, world_id=world_id, cell_id=cell_id, seed=seed, run=run,
                           templates=template_set(template_root(cell, base_dir)), client_factory=client_factory,
                           base_dir=Path(base_dir))
    return await world.run()


def check_cell(cell: CollusionCell, worlds_per_cell: int) -> None:
    """World i plays episode sequence i, so a cell needs a sequence per world."""
    if cell.sequences < worlds_per_cell:
        raise ValueError(f"sequences: expected at least worlds_per_cell = {worlds_per_cell} fixed episode "
                         f"sequences, one per trajectory (got {cell.sequences})")


def preflight(cell: CollusionCell) -> list[str]:
    """Code-analysis episodes run agent-written tests; without a working sandbox the study is refused
    (unless --unsafe-code-tasks allowed unconfined runs), never run silently unconfined."""
    from workbench.worlds.collusion.tasks.sandbox import sandbox_status, unsafe_allowed

    ok, why = sandbox_status()
    if ok or unsafe_allowed():
        return []
    return [f"collusion episodes include code-analysis tasks whose agent-written tests must run confined, "
            f"and the sandbox is unavailable: {why}"]


def design_files(cell: CollusionCell, base_dir: Path) -> list[Path]:
    """What a preregistration lock hashes besides params and prompts: the task data and
    the code that builds, runs and scores the tasks (the tasks are part of the design)."""
    return sorted((Path(__file__).resolve().parent / "tasks").glob("*.py"))


def simulated_profiles() -> dict[str, str]:
    """Routes and descriptions for ``workbench profiles``."""
    from workbench.worlds.collusion.simulated import PROFILES

    out = {f"sim-collusion/{p.name}": p.description for p in PROFILES.values()}
    out["sim-collusion-judge/lexical"] = "simulated judge: commitment and relaxation cues, verbatim quotes"
    return out


def run_judges(records: Any, route: str, **options: Any) -> Any:
    """The agreement and relaxation judges over a run set (``workbench judge``)."""
    return _judges.run_judges(records, route, **options)


def world_metrics(world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    from workbench.metrics.collusion import world_metrics as _wm

    return _wm(world, steps)


def summary_text(worlds: list[dict[str, Any]]) -> str:
    from workbench.metrics.collusion import summary_text as _st

    return _st(worlds)


def metric_tables(records: Any) -> dict[str, Any]:
    from workbench.metrics.collusion import metric_tables as _mt

    return _mt(records)


def describe_world(records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
    from workbench.worlds.collusion.world import describe_world as _dw

    _dw(records, world_id, out, full)


def contrast_units(records: Any) -> Any:
    """Trajectories, paired across cells by episode sequence."""
    from workbench.metrics.collusion import units

    return units(records)


__all__ = ["AGENTS", "NAME", "CellSpec", "CollusionWorld", "WorldOutcome", "routes", "template_root", "run_world",
           "check_cell", "design_files", "world_metrics", "summary_text", "metric_tables", "describe_world", "contrast_units"]
