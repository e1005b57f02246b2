"""The report of a world kind that brings no report notebook of its own
(notebooks/report.ipynb): provenance and locks as every report shows them, then
what the kind itself says through its hooks: its summary, its per-cell tables
(``metric_tables``) and its worlds as text (``describe_world``). Nothing here
knows a kind; every text is escaped (templates ``generic_*.html``)."""
from __future__ import annotations

import io
from typing import Any

from workbench.records import RunRecords
from workbench.views.markup import Markup, render


def _kind(records: RunRecords) -> Any:
    from workbench.kinds import kind_of_records

    return kind_of_records(records)


def tables_html(records: RunRecords) -> str:
    """Each of the kind's tables under its name, escaped; a kind with none says so."""
    tables = _kind(records).metric_tables(records)
    if not tables:
        return str(render("note.html", text="This world kind defines no per-cell tables (WorldKind.metric_tables)."))
    # pandas writes each table from its own template, escaping every value (escape=True)
    shown = [(str((getattr(frame, "attrs", None) or {}).get("title") or name),
              Markup(frame.to_html(index=False, escape=True, na_rep="—"))) for name, frame in tables.items()]
    return str(render("generic_tables.html", tables=shown))


def worlds_html(records: RunRecords, limit: int = 4) -> str:
    """The first ``limit`` worlds step by step, as the kind prints them (`workbench replay --world`)."""
    kind = _kind(records)
    worlds = []
    for w in records.worlds[:limit]:
        out = io.StringIO()
        kind.describe_world(records, w["world_id"], out)
        worlds.append({"world_id": str(w["world_id"]), "cell": str(w.get("cell_label") or w["cell_id"]),
                       "text": out.getvalue()})
    return str(render("generic_worlds.html", worlds=worlds, shown=min(limit, len(records.worlds)),
                      total=len(records.worlds)))


def summary(records: RunRecords) -> Any:
    """The kind's own summary display (by default worlds and valid worlds per cell)."""
    return _kind(records).summary_display(records)
