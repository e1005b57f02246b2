"""The registry of world kinds.

A kind is a :class:`~workbench.kinds.base.WorldKind` (see there for its hooks).
The three shipped kinds are found by name; another package adds its own through
the entry-point group ``workbench.kinds`` (``name = "package.module:KIND"``); the
variable ``WORKBENCH_KINDS`` (``name=module:KIND,...``) names kinds for one session
and every process it starts (a report's kernel); and code (a test, a notebook) can
call :func:`register_kind`, which holds in that process only. No kind imports another.
"""
from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points
from typing import Any

from workbench.errors import InputError, UnknownNameError
from workbench.kinds.base import WorldContext, WorldKind, WorldOutcome

ENTRY_POINT_GROUP = "workbench.kinds"
ENV_VAR = "WORKBENCH_KINDS"
_BUILTIN: dict[str, str] = {
    "stigmergy": "workbench.worlds.stigmergy:KIND",
    "collusion": "workbench.worlds.collusion:KIND",
    "recall": "workbench.worlds.recall:KIND",
}
_REGISTERED: dict[str, WorldKind] = {}


def register_kind(kind: WorldKind) -> WorldKind:
    """Make ``kind`` available under ``kind.name`` (replacing one of that name registered before)."""
    if not isinstance(kind, WorldKind):
        raise TypeError(f"expected a WorldKind instance, got {type(kind).__name__}")
    _REGISTERED[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    _REGISTERED.pop(name, None)


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _env_kinds() -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in os.environ.get(ENV_VAR, "").split(","))):
        name, eq, target = item.partition("=")
        if not eq or ":" not in target or not name.strip():
            raise InputError(f"{ENV_VAR}: expected name=module:ATTRIBUTE[,...] (got {item!r})")
        out[name.strip()] = target.strip()
    return out


def kind_names() -> list[str]:
    """Every kind that can be named in a study's ``world:``."""
    return sorted({*_BUILTIN, *_entry_points(), *_env_kinds(), *_REGISTERED})


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj


def get_kind(name: str) -> WorldKind:
    if name in _REGISTERED:
        return _REGISTERED[name]
    target = _BUILTIN.get(name) or _entry_points().get(name) or _env_kinds().get(name)
    if target is None:
        raise UnknownNameError(f"unknown world kind {name!r}; expected one of {kind_names()}")
    kind = _load(target)
    if not isinstance(kind, WorldKind):
        raise TypeError(f"world kind {name!r} ({target}) is a {type(kind).__name__}, not a WorldKind")
    return kind


def load_kinds() -> list[WorldKind]:
    """Import every known kind, so that each has registered its simulated routes (a study of one kind
    may name another's simulated agent, e.g. as its monitor)."""
    return [get_kind(n) for n in kind_names()]


def kind_of_records(records: Any) -> WorldKind:
    """The one world kind a run set was recorded with (records from before kinds
    were named are the shared-store kind's); a mix is refused, since every table,
    report and replay is a kind's own."""
    worlds = records.light_worlds() if hasattr(records, "light_worlds") else records.worlds
    kinds = {w.get("world_kind", "stigmergy") for w in worlds} or {records.manifest.get("world_kind")}
    if len(kinds) != 1:
        raise InputError(f"{records.dir} mixes world kinds {sorted(map(str, kinds))}; use one kind per run set")
    return get_kind(kinds.pop() or "stigmergy")


__all__ = ["WorldContext", "WorldKind", "WorldOutcome", "get_kind", "kind_names", "kind_of_records", "load_kinds",
           "register_kind"]
