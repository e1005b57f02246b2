"""Kind-free views: pure functions from records or metric tables to plotly figures,
pandas Stylers and HTML strings (a kind's own views live in its folder, e.g.
:mod:`workbench.worlds.stigmergy.views`).

They never run worlds or call models; notebooks and reports only call them.
Everything a model or the store wrote is escaped where it enters HTML
(:mod:`workbench.views.escape`)."""
from workbench.views.escape import esc_html, esc_plot
from workbench.views.forest import forest_figure
from workbench.views.styled import rate_styler

__all__ = ["esc_html", "esc_plot", "forest_figure", "rate_styler"]
