"""`workbench report DIR`: execute the analysis notebook on a run set and export
it as one offline HTML file beside the records."""
from __future__ import annotations

from pathlib import Path

from workbench.errors import InputError, MissingFileError
from workbench.publish.html import export_html
from workbench.publish.notebooks import execute


def _report_notebook(records) -> Path:  # noqa: ANN001 - RunRecords
    """The notebook a world kind reports with (its ``report_notebook``, found by its
    ``notebook_path`` hook); the shared-store kind's is ``analysis``."""
    from workbench.kinds import kind_of_records

    kind = kind_of_records(records)
    if not kind.report_notebook:
        raise InputError(f"the {kind.name} world kind has no report notebook (WorldKind.report_notebook)")
    return kind.notebook_path(kind.report_notebook)


def make_report(run_dir: str | Path, *, compare_dir: str | Path | None = None, output: str | Path | None = None,
                timeout_s: int = 900, max_timelines: int = 4, figures_dir: str | Path | None = None,
                progress: bool = False) -> Path:
    """Execute the kind's report notebook on ``run_dir`` and export it as offline
    HTML; with ``figures_dir``, every figure the report shows is also written there
    as SVG, PDF and PNG (for papers); ``progress`` shows papermill's cell bar."""
    from workbench.records import load_run

    run_dir = Path(run_dir).resolve()
    records = load_run(run_dir)  # fails early and clearly on a wrong directory
    if not records.worlds:
        raise MissingFileError(f"{run_dir} holds no finished world to report on")
    notebook = _report_notebook(records)
    executed = execute(notebook, run_dir / notebook.name, {
        "run_dir": str(run_dir), "compare_dir": str(Path(compare_dir).resolve()) if compare_dir else "",
        "max_timelines": max_timelines,
        "figures_dir": str(Path(figures_dir).resolve()) if figures_dir else ""}, timeout_s=timeout_s, progress=progress)
    if figures_dir:
        from workbench.publish.figures import render_figures

        render_figures(figures_dir)
    study = records.manifest.get("study") or run_dir.name
    return export_html(executed, Path(output) if output else run_dir / "report.html",
                       title=f"stigmergy-workbench report: {study}")
