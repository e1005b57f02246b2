"""The design of a run set: every cell's factors, read from the cell spec that
every world record carries.

A cell *is* its full design. Tables are keyed by ``cell_id`` and carry the
factors that vary across the run set as columns; the factors that never vary
are stated once, above the table (``DataFrame.attrs["constant"]``), instead of
being repeated per row. Nested settings are flattened to dotted names
(``sampling.reasoning_effort``), so that two cells differing only in effort are
two cells with a factor that says so. Works for every world kind: it reads the
recorded ``cell`` mapping, never a kind's code.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where a frame is built: validating a study never loads it
    import pandas as pd

UNSET = "(unset)"  # a nested setting one cell gives and another leaves to the provider
NOT_FACTORS = frozenset({"label"})  # a name for tables, not a setting of the world


def level_text(value: Any) -> str:
    """A factor's value as the text tables show and contrasts compare (YAML's
    ``true`` and the recorded ``True`` read alike)."""
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), ensure_ascii=False, sort_keys=True)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted factor names to level texts; an empty mapping contributes nothing
    (every setting under it is unset)."""
    out: dict[str, str] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if not prefix and key in NOT_FACTORS:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = level_text(value)
    return out


def in_group(column: str, factor: str) -> bool:
    """``sampling`` names every ``sampling.*`` setting; ``sampling.temperature`` only itself."""
    return column == factor or column.startswith(factor + ".")


@dataclass(frozen=True)
class Design:
    """One row per cell (index ``cell_id``): its label and every factor's level."""

    frame: pd.DataFrame

    @property
    def cells(self) -> list[str]:
        return list(self.frame.index)

    @property
    def factors(self) -> list[str]:
        return [c for c in self.frame.columns if c != "cell_label"]

    @property
    def varying(self) -> list[str]:
        return [f for f in self.factors if self.frame[f].nunique(dropna=False) > 1]

    @property
    def constant(self) -> dict[str, str]:
        if not len(self.frame):
            return {}
        return {f: str(self.frame[f].iloc[0]) for f in self.factors if f not in self.varying}

    def group(self, factor: str) -> list[str]:
        """The factor columns a (possibly nested) factor name covers."""
        return [c for c in self.factors if in_group(c, factor)]

    def level(self, cell_id: str, factor: str) -> str:
        cols = self.group(factor)
        if len(cols) == 1 and cols[0] == factor:
            return str(self.frame.at[cell_id, factor])
        # a factor set as a value in one cell and as a mapping in another (controlled: none |
        # {messages, verdict}): the value, or the mapping's values in order ("raw-prefix + reject")
        parts = [str(self.frame.at[cell_id, c]) for c in cols if self.frame.at[cell_id, c] != UNSET]
        return " + ".join(parts) or UNSET

    def label(self, cell_id: str) -> str:
        return str(self.frame.at[cell_id, "cell_label"]) if cell_id in self.frame.index else str(cell_id)

    def describe_varying(self, cell_id: str, exclude: Iterable[str] = ()) -> str:
        """"factor=level; ..." over the varying factors (minus ``exclude``): what
        distinguishes this cell from the others of the run set."""
        skip = set(exclude)
        return "; ".join(f"{f}={self.frame.at[cell_id, f]}" for f in self.varying
                         if not any(in_group(f, s) for s in skip)) or "(no other factor varies)"

    def table(self) -> pd.DataFrame:
        """Every factor of every cell, constant ones included: the design in full."""
        out = self.frame.reset_index()
        out.attrs = {"title": "The cells of this run set, with every factor", "constant": {}}
        return out

    def annotate(self, table: pd.DataFrame, title: str, on: str = "cell_id") -> pd.DataFrame:
        """``table`` with the cell's label and every varying factor inserted after
        ``on``, rows in run-set order, and the title and constant factors in attrs."""
        out = table.copy()
        if on in out.columns and len(self.frame):
            cols = ["cell_label", *self.varying]
            extra = self.frame[cols].rename_axis(on).reset_index()
            keep = [c for c in out.columns if c not in cols]
            out = out[keep].merge(extra, on=on, how="left")
            order = {c: i for i, c in enumerate(self.cells)}
            out = out.iloc[sorted(range(len(out)), key=lambda i: (order.get(out[on].iloc[i], len(order)), i))]
            pos = keep.index(on) + 1
            out = out[[*keep[:pos], *cols, *keep[pos:]]].reset_index(drop=True)
        out.attrs = {**table.attrs, "title": title, "constant": self.constant}
        return out


def design_of(worlds: Iterable[Mapping[str, Any]], order: Iterable[str] = ()) -> Design:
    """The design behind a run set's worlds, cells in ``order`` (the params file's,
    from the manifest) and then in the order their worlds appear."""
    rows: dict[str, dict[str, str]] = {}
    for w in worlds:
        cid = str(w["cell_id"])
        if cid not in rows:
            cell = w.get("cell") or {}
            rows[cid] = {"cell_label": str(w.get("cell_label") or cell.get("label") or cid), **flatten(cell)}
    import pandas as pd

    rank = {c: i for i, c in enumerate(order)}
    ids = sorted(rows, key=lambda c: (rank.get(c, len(rank)), list(rows).index(c)))
    frame = pd.DataFrame([rows[c] for c in ids], index=pd.Index(ids, name="cell_id"))
    frame = frame.fillna(UNSET) if len(frame) else pd.DataFrame(columns=["cell_label"], index=pd.Index([], name="cell_id"))
    return Design(frame)


def design_of_records(records: Any) -> Design:
    """:func:`design_of` for a RunRecords, ordered as its manifest lists the cells."""
    worlds = records.light_worlds() if hasattr(records, "light_worlds") else records.worlds  # envelopes suffice
    return design_of(worlds, order=list((records.manifest or {}).get("cells") or {}))


def constant_text(table: pd.DataFrame) -> str:
    """The factors a table does not show because they hold for every row."""
    const = table.attrs.get("constant") or {}
    return "; ".join(f"{k}={v}" for k, v in const.items())


def non_default_parts(spec: Any, skip: Iterable[str] = ()) -> list[str]:
    """``field=value`` for every field of a pydantic cell spec that differs from its
    default (nested ones dotted): what a cell's default label must name so that two
    cells never share a label."""
    skip = set(skip) | set(NOT_FACTORS)
    cls = type(spec)
    defaults: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        if not info.is_required():
            value = info.get_default(call_default_factory=True)
            defaults[name] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    dumped = spec.model_dump(mode="json")
    now = flatten({k: v for k, v in dumped.items() if k not in skip})
    base = flatten({k: v for k, v in defaults.items() if k not in skip and k in dumped})
    return [f"{k}={short(v)}" for k, v in now.items() if base.get(k, UNSET) != v]


def short(text: str, limit: int = 40) -> str:
    """Long levels (a script of replies) abbreviated, with a hash that keeps them apart."""
    if len(text) <= limit:
        return text
    return f"{text[:24]}…#{hashlib.sha256(text.encode()).hexdigest()[:6]}"
