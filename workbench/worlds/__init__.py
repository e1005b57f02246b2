"""World kinds are plugins: each is a module that provides ``NAME``, ``CellSpec``
(a pydantic model of one cell), ``routes(cell)``, ``template_root(cell, base)``,
``run_world(...)`` and ``world_metrics(world, steps)``; optionally ``check_cell(cell,
worlds_per_cell)``, which raises ValueError("FIELD: expected ...") for a cell the study
cannot run (checked when the params are loaded, before any world starts). Adding a kind means
adding a module and a line here; no kind imports another."""
from __future__ import annotations

import importlib
from types import ModuleType

KINDS: dict[str, str] = {
    "stigmergy": "workbench.worlds.stigmergy",
    "collusion": "workbench.worlds.collusion",
    "recall": "workbench.worlds.recall",
}


def get_kind(name: str) -> ModuleType:
    if name not in KINDS:
        raise KeyError(f"unknown world kind {name!r}; expected one of {sorted(KINDS)}")
    return importlib.import_module(KINDS[name])


def kind_of_records(records) -> ModuleType:  # noqa: ANN001 - RunRecords (records import nothing of worlds)
    """The one world kind a run set was recorded with (records from before kinds
    were named are the shared-store kind's); a mix is refused, since every table,
    report and replay is a kind's own."""
    kinds = {w.get("world_kind", "stigmergy") for w in records.worlds} or {records.manifest.get("world_kind")}
    if len(kinds) != 1:
        raise ValueError(f"{records.dir} mixes world kinds {sorted(map(str, kinds))}; use one kind per run set")
    return get_kind(kinds.pop() or "stigmergy")
