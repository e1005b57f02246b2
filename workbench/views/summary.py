"""The table a study notebook shows after running: whatever the world kind
summarises its cells with (the shared-store kind: rates per model and condition)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.views.escape import esc_html


def run_summary(run_dir: str | Path) -> Any:
    """A display object for a run directory of any world kind."""
    from IPython.display import HTML

    from workbench.records import load_run
    from workbench.worlds import kind_of_records

    records = load_run(run_dir)
    if not records.worlds:
        return HTML(f"<p><i>{esc_html(str(run_dir))} holds no finished world yet.</i></p>")
    kind = kind_of_records(records)
    if hasattr(kind, "summary_text"):
        return HTML(f"<pre>{esc_html(kind.summary_text(records.worlds))}</pre>")
    from workbench.metrics.frames import world_frame
    from workbench.views.styled import per_model_table

    return per_model_table(world_frame(records))
