"""What every notebook calls first: plotly set up so that figures survive
papermill and nbconvert (the default renderer under papermill yields HTML with
no chart at all), and small display helpers."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.views.blocks import banner, heading

__all__ = ["RENDERERS", "banner", "heading", "run_summary", "setup"]

RENDERERS = "plotly_mimetype+workbench_notebook"  # rich in JupyterLab; inlined plotly.js (once) in HTML


def _register_offline_renderer() -> None:
    """plotly's ``notebook`` renderer inlines plotly.js once but hard-codes a MathJax
    <script> from a CDN into every figure; this one is the same without it."""
    import plotly.io as pio
    from plotly.io._base_renderers import NotebookRenderer

    class OfflineNotebookRenderer(NotebookRenderer):
        def to_mimebundle(self, fig_dict):
            from plotly.io import to_html

            html = to_html(fig_dict, config=self.config, auto_play=self.auto_play, include_plotlyjs=False,
                           include_mathjax=False, full_html=False, animation_opts=self.animation_opts,
                           default_width="100%", default_height=525, validate=False)
            return {"text/html": html}

    if "workbench_notebook" not in pio.renderers:
        pio.renderers["workbench_notebook"] = OfflineNotebookRenderer()


def setup(figures_dir: str | Path | None = None) -> None:
    """Plotly renderers and pandas display options; with ``figures_dir`` (the report
    notebooks' parameter of that name), every figure shown is also saved there."""
    import pandas as pd
    import plotly.io as pio

    from workbench.views.figure_sink import save_figures_to

    save_figures_to(figures_dir)
    _register_offline_renderer()
    if pio.renderers.default != RENDERERS:
        pio.renderers.default = RENDERERS
        # Emit plotly.js now, in this cell's output: left to the first figure, it would
        # land inside whatever widget shows that figure (4.8 MB of widget state).
        pio.renderers._activate_pending_renderers()
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.width", 200)


def run_summary(run_dir: str | Path) -> Any:
    """A display object for a run directory of any world kind."""
    from IPython.display import HTML

    from workbench.kinds import kind_of_records
    from workbench.records import load_run
    from workbench.views.markup import render

    records = load_run(run_dir)
    if not records.worlds:
        return HTML(str(render("note.html", text=f"{run_dir} holds no finished world yet.")))
    kind = kind_of_records(records)
    return kind.summary_display(records)
