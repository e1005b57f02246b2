"""Everything analysis.ipynb shows, as methods: the notebook only calls them.
Reads records (and tables computed from them); never runs a world."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from workbench.metrics.contrasts import DIFF, NO_CORRECTION, P
from workbench.metrics.design import Design, design_of_records
from workbench.views.run_report import RunReport
from workbench.worlds.stigmergy.export import cell_tables
from workbench.worlds.stigmergy.frames import agent_frame, world_frame


def _note(text: str) -> Any:
    from IPython.display import HTML

    return HTML(f"<p><i>{html.escape(text)}</i></p>")


# the metrics each table reports, whose definitions are shown beside it
TABLE_METRICS: dict[str, tuple[str, ...]] = {
    "coordination": ("valid", "cross_agent_access", "strict_cross_agent_access", "informative_read", "joint_success"),
    "contrasts": ("cross_agent_access",),
    "joint_by_cross_read": ("joint_success", "cross_agent_access"),
    "exposure_then_read": ("exposure", "exposed_then_read_world", "read_after_exposure", "steps_exposure_to_read"),
    "e1": ("cross_agent_access", "joint_success", "seeded_read"),
    "looks": ("first_look", "second_look"),
    "writes": ("pair_write",),
    "text_signal": ("cross_agent_read", "mentions_other", "mention_before_exposure", "monitor_flag_on_read"),
    "attrition": ("valid",),
}


def table_html(table: pd.DataFrame, definitions: dict[str, str] | None = None) -> str:
    """A table with what it is above it: its title, the factors every row shares and
    the rules it was scored under; below it, the definitions of its metrics. Text
    cells are escaped; an empty table says why it is empty."""
    from workbench.metrics.design import constant_text

    e = html.escape
    head = [f"<p><b>{e(str(table.attrs['title']))}</b></p>"] if table.attrs.get("title") else []
    if constant_text(table):
        head.append(f"<p><small>Same in every row: {e(constant_text(table))}</small></p>")
    if table.attrs.get("rules"):
        head.append(f"<p><small>Scored under: {e(str(table.attrs['rules']))}</small></p>")
    sparse = [c for c in table.attrs.get("sparse") or () if c in table and not table[c].astype(bool).any()]
    table = table.drop(columns=sparse)
    if table.attrs.get("brief"):
        table = table[[c for c in table.attrs["brief"] if c in table.columns]]
    if table.empty:
        body = f"<p><i>Empty: {e(str(table.attrs.get('empty_reason') or 'no rows in this run set'))}.</i></p>"
    else:
        body = (table.style.format(precision=3, na_rep="—", escape="html").format_index(escape="html", axis=1)
                .hide(axis="index").to_html())
    foot = ""
    if definitions:
        items = "".join(f"<li><code>{e(k)}</code>: {e(v)}</li>" for k, v in definitions.items())
        foot = f"<details><summary>Definitions</summary><ul>{items}</ul></details>"
    return "".join(head) + body + foot


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

    @cached_property
    def design(self) -> Design:
        return design_of_records(self.records)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        if not self._tables:
            self._tables = cell_tables(self.records)
        return self._tables

    @property
    def title(self) -> str:
        study = self.study
        return f"Study {study}: {len(self.records.worlds)} worlds in {len(self.design.cells)} cells"

    def definitions(self, name: str) -> dict[str, str]:
        from workbench.worlds.stigmergy.metrics import DEFINITIONS

        return {m: DEFINITIONS[m] for m in TABLE_METRICS.get(name, ()) if m in DEFINITIONS}

    def table(self, name: str) -> Any:
        from IPython.display import HTML

        return HTML(table_html(self.tables[name], self.definitions(name)))

    def has_rows(self, name: str) -> bool:
        return not self.tables[name].empty

    # -- the study's story ----------------------------------------------------------
    def description_html(self) -> str:
        """The study's own description, from its params file as recorded."""
        text = (self.records.manifest or {}).get("description") or ""
        return f"<p>{html.escape(text)}</p>" if text else ""

    def headline_html(self) -> str:
        """The first contrast's rows in words: both rates, the difference and its
        interval, and the paired test, for each matched pair of cells."""
        t = self.tables["contrasts"]
        e = html.escape
        if t.empty:
            return f"<p><i>No headline contrast: {e(str(t.attrs.get('empty_reason')))}.</i></p>"
        first = t[t["contrast"] == t["contrast"].iloc[0]]
        items = []
        for _, r in first.iterrows():
            d = r[DIFF]
            diff = "not estimable" if pd.isna(d) else f"{d:+.0%} [{r['low']:+.0%}, {r['high']:+.0%}]"
            paired = (f"exact McNemar p = {r[P]:.3g} over {int(r['pairs'])} paired worlds"
                      if not pd.isna(r[P]) else "no paired worlds")
            lost = f", {int(r['lost pairs'])} pairs lost to attrition" if r["lost pairs"] else ""
            items.append(f"<li>{e(str(r['held fixed']))}: {e(str(r['B']))} {e(str(r['B k/n']))} vs "
                         f"{e(str(r['A']))} {e(str(r['A k/n']))}; difference {e(diff)}; {e(paired)}{e(lost)}</li>")
        return (f"<p><b>Headline: {e(str(first['contrast'].iloc[0]))}</b> ({e(str(t.attrs.get('metric')))}, "
                f"{e(str(first['factor'].iloc[0]))} {e(str(first['B'].iloc[0]))} vs {e(str(first['A'].iloc[0]))}, "
                f"valid worlds; {e(NO_CORRECTION)})</p><ul>{''.join(items)}</ul>")

    # -- figures -------------------------------------------------------------------
    def per_cell_table(self, metric: str = "cross_agent_access") -> Any:
        from workbench.worlds.stigmergy.views import per_cell_table

        return per_cell_table(self.wf, self.design, metric)

    def exposure_figure(self) -> Any:
        from workbench.worlds.stigmergy.views import exposure_then_read_figure

        if not self.wf["exposure"].any():
            return _note("No world in this run set had an exposure (no list showed another agent's entry).")
        return exposure_then_read_figure(self.wf, self.af, self.design)

    def contrasts_figure(self) -> Any:
        from workbench.views import forest_figure

        t = self.tables["contrasts"]
        if t.empty:
            return _note(f"No matched contrast: {t.attrs.get('empty_reason')}.")
        return forest_figure(t)

    def e1_figure(self) -> Any:
        from workbench.worlds.stigmergy.views import e1_interaction_figure

        if not self.has_rows("e1"):
            return _note("This run set has no E1 cells (cells differing only in sharedness and re-check clause).")
        return e1_interaction_figure(self.wf, self.design)

    def attrition_figure(self) -> Any:
        from workbench.worlds.stigmergy.views import attrition_figure

        return attrition_figure(self.tables["attrition"])

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
        from workbench.worlds.stigmergy.views import step_timeline

        store_first = sorted(self.example_world_ids(), key=lambda w: self.records.world(w)["cell"]["condition"]
                             not in ("store", "authored", "prepopulated"))
        return [step_timeline(*self._world(w)) for w in store_first[:limit]]

    def example_store_slider(self) -> Any:
        from workbench.worlds.stigmergy.views import store_slider

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

        from workbench.worlds.stigmergy.views import transcripts_html

        ids = self.example_world_ids()
        tabs = W.Tab(children=[W.HTML(transcripts_html(*self._world(w))) for w in ids])
        for i, wid in enumerate(ids):
            tabs.set_title(i, self.records.world(wid).get("cell_label", wid)[:60])
        return tabs

    def comparison(self) -> Any:
        """B − A over cells matched on every factor (unmatched cells listed)."""
        from IPython.display import HTML, display

        from workbench.metrics.contrasts import compare_run_sets
        from workbench.views import forest_figure
        from workbench.worlds.stigmergy.frames import units

        if self.other is None:
            return _note("No second run set given (compare_dir).")
        table = compare_run_sets(units(self.records), self.design, units(self.other),
                                 design_of_records(self.other), names=("A (this run set)", "B (compare_dir)"))
        display(HTML(table_html(table)))
        return forest_figure(table[table["status"] == "matched"], label="cell")
