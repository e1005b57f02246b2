"""Views of the shared-store world: step timelines, the store at a step, transcripts,
per-cell tables and the paper's figures. Pure functions of records and frames."""
from workbench.worlds.stigmergy.views.figures import attrition_figure, e1_interaction_figure, exposure_then_read_figure
from workbench.worlds.stigmergy.views.store import store_at_step, store_slider
from workbench.worlds.stigmergy.views.tables import per_cell_table, per_model_table
from workbench.worlds.stigmergy.views.timeline import step_timeline
from workbench.worlds.stigmergy.views.transcript import transcript_html, transcripts_html

__all__ = [
    "attrition_figure", "e1_interaction_figure", "exposure_then_read_figure", "per_cell_table", "per_model_table",
    "step_timeline", "store_at_step", "store_slider", "transcript_html", "transcripts_html",
]
