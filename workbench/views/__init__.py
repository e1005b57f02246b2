"""Views: pure functions from records (a world dict and its steps) or from
metric tables/frames to plotly figures, pandas Stylers and HTML strings.

They never run worlds or call models; notebooks and reports only call them.
Everything a model or the store wrote is escaped where it enters HTML
(:mod:`workbench.views.escape`)."""
from workbench.views.cells import attrition_figure, e1_interaction_figure, exposure_then_read_figure
from workbench.views.escape import esc_html, esc_plot
from workbench.views.forest import forest_figure
from workbench.views.store import store_at_step, store_slider
from workbench.views.styled import per_cell_table, per_model_table, rate_styler
from workbench.views.timeline import step_timeline
from workbench.views.transcript import transcript_html, transcripts_html

__all__ = [
    "attrition_figure", "e1_interaction_figure", "esc_html", "esc_plot",
    "exposure_then_read_figure", "forest_figure", "per_cell_table", "per_model_table", "rate_styler", "step_timeline",
    "store_at_step", "store_slider", "transcript_html", "transcripts_html",
]
