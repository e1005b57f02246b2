"""The report of a world kind that brings no report notebook of its own
(notebooks/report.ipynb): provenance and locks as every report shows them, then
what the kind itself says through its hooks: its summary, its per-cell tables
(``metric_tables``) and its worlds as text (``describe_world``). Nothing here
knows a kind; every text is escaped."""
from __future__ import annotations

import html
import io
from typing import Any

from workbench.records import RunRecords


def _kind(records: RunRecords) -> Any:
    from workbench.kinds import kind_of_records

    return kind_of_records(records)


def tables_html(records: RunRecords) -> str:
    """Each of the kind's tables under its name, escaped; a kind with none says so."""
    tables = _kind(records).metric_tables(records)
    if not tables:
        return "<p><i>This world kind defines no per-cell tables (WorldKind.metric_tables).</i></p>"
    parts = []
    for name, frame in tables.items():
        title = (getattr(frame, "attrs", None) or {}).get("title") or name
        parts.append(f"<h3>{html.escape(str(title))}</h3>" + frame.to_html(index=False, escape=True, na_rep="—"))
    return "".join(parts)


def worlds_html(records: RunRecords, limit: int = 4) -> str:
    """The first ``limit`` worlds step by step, as the kind prints them (`workbench replay --world`)."""
    kind = _kind(records)
    parts = []
    for w in records.worlds[:limit]:
        out = io.StringIO()
        kind.describe_world(records, w["world_id"], out)
        parts.append(f"<h3>{html.escape(w['world_id'])} · {html.escape(str(w.get('cell_label') or w['cell_id']))}</h3>"
                     f"<pre>{html.escape(out.getvalue())}</pre>")
    shown = min(limit, len(records.worlds))
    return "".join(parts) + f"<p><i>{shown} of {len(records.worlds)} worlds shown.</i></p>"


def summary(records: RunRecords) -> Any:
    """The kind's own summary display (by default worlds and valid worlds per cell)."""
    return _kind(records).summary_display(records)
