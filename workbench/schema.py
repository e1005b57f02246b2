"""The record schema: what every world and step record holds whatever its kind, the
version it was written under, and the one migration that lifts older records.

A record is a JSON object on one line of ``worlds.jsonl`` or ``steps.jsonl``. The
fields below are the kind-free envelope the engine, replay, tables and reports rely
on; a kind adds its own fields beside them (its world's store log, a step's parse),
documented by its own module. Loading checks every envelope against these types
(msgspec, in C: records are the hot path of a simulated study) and names the file,
the line and the field of the first record that does not fit.

Versions: records written by release 0.1.0 carry no ``schema_version`` (version 0);
:func:`migrate_world` / :func:`migrate_step` lift them to the current version at load,
so those run sets still load, replay and re-score. Nothing is rewritten on disk.
"""
from __future__ import annotations

from typing import Any

import msgspec

from workbench.errors import InputError

SCHEMA_VERSION = 1


class WorldRecord(msgspec.Struct, kw_only=True):
    """One finished (or failed) world, as the engine writes it after the world ends."""

    schema_version: int  # the record schema it was written under (absent before 1: see migrate_world)
    world_id: str  # "<cell_id>-<world_index, 4 digits>": a name; read cell_id and world_index, never parse it
    cell_id: str  # short content hash of the cell's spec: stable across edits that leave the cell unchanged
    world_index: int  # the world's number in its cell; world i of every cell shares a seed (paired designs)
    world_kind: str  # the registered kind that ran it: decides every table, view and replay of the record
    seed: int  # the world's own seed, derived from the study seed and the world index
    run: int  # the invocation of `run` that wrote it (1 = first; a resumed failure has a later run)
    cell: dict[str, Any]  # the cell's spec as validated (the kind's cell model, JSON)
    valid: bool  # whether the world counts under the cell's own exclusion rules
    failed: dict[str, Any] | None  # why the world ended early (class, cause, error), or None
    agents: list[dict[str, Any]]  # one entry per agent: at least its route
    metrics: dict[str, Any] = {}  # the kind's world metrics, a pure function of the records
    cell_label: str = ""  # the kind's short name for the cell, for tables
    study: str | None = None  # the study's name
    design: str = ""  # the cell's design fingerprint: a hash of every input (workbench.design); "" before it


class StepRecord(msgspec.Struct, kw_only=True):
    """One step of a world: an agent's turn (or a judge's, a monitor's) in the order it took effect."""

    schema_version: int  # as in WorldRecord
    world_id: str  # the world it belongs to
    run: int  # the run that wrote it; only the steps of a world's latest run are its steps
    seq: int  # its place in the world's order of effect (0, 1, ...)


class RecordError(InputError):
    """A record that does not fit the schema: names the file, the line and the field."""


def migrate_world(record: dict[str, Any]) -> dict[str, Any]:
    """Lift a world record to :data:`SCHEMA_VERSION` in place (0.1.0 records: version 0)."""
    version = record.get("schema_version", 0)
    if version > SCHEMA_VERSION:
        raise RecordError(f"world {record.get('world_id')!r} has schema_version {version}; this release reads "
                          f"up to {SCHEMA_VERSION} (upgrade the workbench)")
    if version < 1:
        record.setdefault("world_kind", "stigmergy")  # records from before kinds were named
        if "world_index" not in record and isinstance(record.get("world_id"), str):
            tail = record["world_id"].rsplit("-", 1)[-1]
            if tail.isdigit():
                record["world_index"] = int(tail)
        record["schema_version"] = 1
    return record


def migrate_step(record: dict[str, Any]) -> dict[str, Any]:
    """Lift a step record to :data:`SCHEMA_VERSION` in place."""
    version = record.get("schema_version", 0)
    if version > SCHEMA_VERSION:
        raise RecordError(f"a step of {record.get('world_id')!r} has schema_version {version}; this release reads "
                          f"up to {SCHEMA_VERSION}")
    if version < 1:
        record["schema_version"] = 1
    return record


def _check(record: dict[str, Any], shape: type[msgspec.Struct], where: str) -> None:
    try:
        msgspec.convert(record, shape, strict=True)
    except msgspec.ValidationError as exc:  # "Expected `int`, got `str` - at `$.world_index`"
        raise RecordError(f"{where}: {exc}") from None


def check_world(record: dict[str, Any], where: str) -> None:
    """Raise RecordError naming ``where`` (file:line) and the field when the envelope does not fit."""
    _check(record, WorldRecord, where)


def check_step(record: dict[str, Any], where: str) -> None:
    _check(record, StepRecord, where)


def stamp(record: dict[str, Any]) -> dict[str, Any]:
    """A record as it is written: with the current schema version."""
    record.setdefault("schema_version", SCHEMA_VERSION)
    return record
