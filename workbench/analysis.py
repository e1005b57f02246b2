"""Everything analysis.ipynb shows, as methods: the notebook only calls them.
Reads records (and tables computed from them); never runs a world."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from workbench.metrics.export import cell_tables
from workbench.metrics.frames import agent_frame, world_frame
from workbench.views.run_report import RunReport


def _note(text: str) -> Any:
    from IPython.display import HTML

    return HTML(f"<p><i>{html.escape(text)}</i></p>")


@dataclass
class Analysis(RunReport):
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    # -- frames and tables ----------------------------------------------------------
    @cached_property
    def wf(self) -> pd.DataFrame:
        return world_frame(self.records)

    @cached_property
    def af(self) -> pd.DataFrame:
        return agent_frame(self.records)

    @property
    def title(self) -> str:
        study = self.study
        return f"Study {study}: {len(self.records.worlds)} worlds in {self.wf['cell_id'].nunique()} cells"

    def table(self, name: str) -> Any:
        if not self._tables:
            self._tables = cell_tables(self.records)
        t = self._tables[name]
        if t.empty:
            return _note(f"No rows for {name} in this run set.")
        return t.style.format(precision=3, na_rep="—").hide(axis="index")

    # -- figures -------------------------------------------------------------------
    def per_model_table(self, metric: str = "cross_agent_access") -> Any:
        from workbench.views import per_model_table

        return per_model_table(self.wf, metric)

    def exposure_figure(self) -> Any:
        from workbench.views import exposure_then_read_figure

        if not self.wf["exposure"].any():
            return _note("No world in this run set had an exposure.")
        return exposure_then_read_figure(self.wf, self.af)

    def forest_store_vs_no_store(self) -> Any:
        from workbench.views import cell_differences, forest_figure

        conds = set(self.wf["condition"])
        if not {"store", "no-store"} <= conds:
            return _note("This run set has no store / no-store pair of cells.")
        return forest_figure(cell_differences(self.wf, "cross_agent_access", base_condition="no-store",
                                              other_condition="store"))

    def e1_figure(self) -> Any:
        from workbench.views import e1_interaction_figure

        e1 = self.wf[self.wf["condition"].isin(["store", "private"])]
        if e1["clauses"].nunique() < 2:
            return _note("This run set does not vary the re-check clause (no E1 cells).")
        return e1_interaction_figure(self.wf)

    def attrition_figure(self) -> Any:
        from workbench.views import attrition_figure

        if not self._tables:
            self._tables = cell_tables(self.records)
        return attrition_figure(self._tables["attrition"])

    # -- example worlds ---------------------------------------------------------------
    def example_world_ids(self) -> list[str]:
        """Per cell, the first valid world with a cross-agent read, else its first world."""
        out = []
        for _, g in self.wf.sort_values("world_id").groupby("cell_id", sort=True):
            hit = g[g["valid"] & g["cross_agent_access"]]
            out.append(str((hit if len(hit) else g).iloc[0]["world_id"]))
        return out

    def _world(self, wid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.records.world(wid), self.records.steps.get(wid, [])

    def example_timelines(self, limit: int = 4) -> list[Any]:
        from workbench.views import step_timeline

        store_first = sorted(self.example_world_ids(), key=lambda w: self.records.world(w)["cell"]["condition"]
                             not in ("store", "authored", "prepopulated"))
        return [step_timeline(*self._world(w)) for w in store_first[:limit]]

    def example_store_slider(self) -> Any:
        from workbench.views import store_slider

        ids = self.example_world_ids()
        for wid in ids:
            world, steps = self._world(wid)
            if world["metrics"]["cross_agent_access"]:
                return store_slider(world, steps)
        return store_slider(*self._world(ids[0])) if ids else _note("No worlds.")

    def example_worlds_widget(self) -> Any:
        """A tab per cell with an example world's transcripts: saved widget state, so
        it also works in the offline HTML report."""
        import ipywidgets as W

        from workbench.views import transcripts_html

        ids = self.example_world_ids()
        tabs = W.Tab(children=[W.HTML(transcripts_html(*self._world(w))) for w in ids])
        for i, wid in enumerate(ids):
            tabs.set_title(i, self.records.world(wid).get("cell_label", wid)[:40])
        return tabs

    def comparison(self) -> Any:
        from IPython.display import display

        from workbench.metrics.tables import compare_run_sets
        from workbench.views import forest_figure

        if self.other is None:
            return _note("No second run set given (compare_dir).")
        table = compare_run_sets(self.wf, world_frame(self.other), names=("A", "B"))
        display(table.style.format(precision=3, na_rep="—").hide(axis="index"))
        return forest_figure(table)
