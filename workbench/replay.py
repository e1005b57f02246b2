"""Replaying a world through the engine again with its recorded replies, which must
reproduce the same steps (a world as text is its kind's ``describe_world``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import MissingFileError
from workbench.records import RunRecords


# -- replay through the engine ---------------------------------------------------
def _strip(obj: Any) -> Any:
    """Drop what is allowed to differ between a run and its replay: wall-clock timing,
    the replay marker, and the schema version (stamped when written; a replay is not)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in ("timing", "replayed", "schema_version")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    return _strip(record)


def _template_base(records: RunRecords, world: dict[str, Any]) -> Path:
    params = (records.manifest.get("params") or {}).get("path")
    if params and Path(params).exists():
        return Path(params).resolve().parent
    roots = list((records.manifest.get("templates") or {}).keys())
    if len(roots) == 1:
        # cell.prompts is relative to the params folder: walk back up from the template root
        return Path(roots[0]).resolve().parents[len(Path(world["cell"]["prompts"]).parts) - 1]
    raise MissingFileError(f"cannot find the templates of {records.dir}: its params file "
                            f"{params!r} is gone and the manifest names {len(roots)} template folders")


async def rerun_world(records: RunRecords, world_id: str):  # noqa: ANN201 - the kind's WorldOutcome
    """Run a recorded world again through its world kind, every agent served by
    its own recorded replies. The engine must then reproduce the records."""
    from workbench.kinds import WorldContext, get_kind
    from workbench.models.failures import annotate_failure
    from workbench.models.monitor import ReplayMonitor
    from workbench.models.replay import ReplayClient

    world = records.world(world_id)
    steps = records.steps.get(world_id, [])
    kind = get_kind(world["world_kind"])
    cell = kind.cell_spec.model_validate(world["cell"])
    replies: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        replies.setdefault(s["agent"], []).append(s["reply"])

    def factory(route: str, slot: str, seed: int, options: dict[str, Any]) -> ReplayClient:
        return ReplayClient(replies.get(slot, []), route=route)

    labelled = [s["monitor"] for s in steps if "monitor" in s]
    extra = {"monitor": ReplayMonitor(labelled)} if labelled else {}

    ctx = WorldContext(world_id=world_id, cell_id=world["cell_id"], world_index=world["world_index"],
                       seed=world["seed"], run=world["run"],
                       base_dir=_template_base(records, world), client_factory=factory, monitor=extra.get("monitor"))
    outcome = await kind.run_world(cell, ctx)
    annotate_failure(outcome.world)  # as the study runner does
    return outcome


def verify_world(records: RunRecords, world_id: str) -> list[str]:
    """Differences between a world's records and its replay (empty when identical)."""
    from workbench.aio import run_sync

    outcome = run_sync(rerun_world(records, world_id))
    diffs: list[str] = []
    old_steps = [comparable(s) for s in records.steps.get(world_id, [])]
    new_steps = [comparable(s) for s in outcome.steps]
    if len(old_steps) != len(new_steps):
        diffs.append(f"{len(old_steps)} recorded steps, {len(new_steps)} replayed")
    for a, b in zip(old_steps, new_steps):
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            diffs.append(f"step {a.get('seq')}: differs in {', '.join(keys)}")
    old_world = comparable(records.world(world_id))
    new_world = comparable(outcome.world)
    # a cell recorded before its kind gained a factor is the same design with that factor at its
    # default: both sides compared as today's spec reads them
    from workbench.kinds import get_kind

    spec = get_kind(old_world["world_kind"]).cell_spec
    for w in (old_world, new_world):
        if isinstance(w.get("cell"), dict):
            w["cell"] = spec.model_validate(w["cell"]).model_dump(mode="json")
    for k in sorted(set(new_world)):
        if old_world.get(k) != new_world.get(k):
            diffs.append(f"world field {k!r} differs")
    return diffs
