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
