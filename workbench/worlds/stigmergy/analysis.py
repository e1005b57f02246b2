"""The shared-store report's parts for analysis.ipynb: its sections by name, and
what the notebook's visible steps (frames and tables of :mod:`workbench.analysis`)
are shown with: the headline's findings in words, the report's captions and
definitions, the arms' colours. Reads records (and tables computed from them);
never runs a world."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from workbench.metrics.design import Design, design_of_records
from workbench.views.markup import Markup, render
from workbench.views.readable import show_figure
from workbench.views.run_report import RunReport, Section
from workbench.worlds.stigmergy.export import cell_tables
from workbench.worlds.stigmergy.frames import agent_frame, world_frame
from workbench.worlds.stigmergy.labels import LABELS


def _note(text: str) -> Any:
    from IPython.display import HTML

    return HTML(str(render("note.html", text=text)))


def _figure_html(fig: Any) -> str:
    """A plotly figure as an HTML fragment that draws with the plotly.js the notebook's
    setup inlined once (an exported report defers it until that is inflated)."""
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True},
                           default_width="100%"))


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
    "no_read": ("no_read_class",),
    "vocabulary": ("cross_reads_task_named",),
    "writing_for_readers": ("note_writes", "first_write_step", "cross_agent_read"),
    "pairs": ("pair", "joint_success", "informative_read", "cross_agent_read", "pair_write"),
}


# each table's one-line caption: what a row is and over which worlds
CAPTIONS: dict[str, str] = {
    "cells": "One row per cell: every factor that varies between cells.",
    "coordination": "One row per cell; each rate is k/n over the cell's valid worlds with its 95 % Wilson interval "
                    "(all worlds, when invalid ones exist).",
    "contrasts": "One row per matched pair of cells (A, B) that differ in the contrasted factor alone; rates over "
                 "valid worlds, difference B − A with its 95 % Newcombe interval, exact McNemar test over worlds "
                 "paired by world index; no multiple-comparison correction.",
    "joint_by_cross_read": "Joint success per cell, split by whether the world had a cross-agent read "
                           "(valid worlds).",
    "exposure_then_read": "Per cell: valid worlds in which an agent was shown another agent's entry, and those in "
                          "which an exposed agent then read across agents.",
    "e1": "One row per group of E1 cells (identical except in condition and clauses): k/n over valid worlds.",
    "looks": "Per cell: pair agents of valid worlds who looked at the store first, and again later.",
    "writes": "Per cell: valid worlds in which a pair member wrote to the store.",
    "attrition": "Per cell: every world, failed calls by cause and worlds valid under each parser and validity rule.",
    "rescoring": "Per cell: the same worlds re-scored under other parser and answer rules (k/n over the worlds valid "
                 "under each); no model is called.",
    "text_signal": "Per cell: pair agents of valid worlds with a cross-agent read, and what their text says.",
    "monitor_labels": "Per cell: every monitor label over the steps it judged.",
    "no_read": "Per cell: pair agents of valid worlds without a cross-agent read, by the first reason that applies "
               "(each class k/n of them, 95 % Wilson interval).",
    "vocabulary": "Per cell: cross-agent reads of a key the pair task names, of all cross-agent reads in valid "
                  "worlds (unit: read).",
    "writing_for_readers": "Per cell: pair agents of valid worlds that wrote, that wrote a note (a value that is not "
                           "a number), their median first-write step, and their cross-agent reads.",
    "pairs": "Per cell and pair (1 is the paper's pair): that pair's joint success, informative reads, any "
             "cross-agent read by either half, and writes; k/n over valid worlds, one pair k per world.",
    "reply_shapes": "Per cell: the share of every recorded reply that was fenced, prose-wrapped or held several "
                    "objects (unit: reply; replies of one agent are not independent).",
    "reply_shapes_by_route": "Pairs of cells that differ in the request path alone (same model, settings and "
                             "seeds): B − A per reply shape over replies, with a 95 % interval clustered by agent "
                             "(one agent's replies are not independent). Simulated agents have no transport: "
                             "between their cells the difference is zero by construction.",
}


def table_html(table: pd.DataFrame, definitions: dict[str, str] | None = None, caption: str = "") -> str:
    """A table for a reader (:func:`workbench.views.readable.readable_html`): its
    caption says what a row is, the factors every row shares (those set and not at
    their default; how many others) and the rules it was scored under; a cell's
    label is left out where its factors are columns."""
    from workbench.views.readable import brief_view, constant_settings, readable_html, spec_defaults
    from workbench.worlds.stigmergy.spec import StigmergyCell

    sparse = [c for c in table.attrs.get("sparse") or () if c in table and not table[c].astype(bool).any()]
    shown = table.drop(columns=sparse)
    shown.attrs = dict(table.attrs)
    shown = brief_view(shown)
    factors = {"model", "condition", "clauses", "parser"} & set(shown.columns)
    hide = ["cell_label"] if factors else []
    rules = f" Scored under: {table.attrs['rules']}." if table.attrs.get("rules") else ""
    return readable_html(shown, caption=(caption or "") + rules, title=str(table.attrs.get("title") or ""),
                         labels=LABELS, definitions=definitions, hide=hide,
                         constant=constant_settings(table.attrs.get("constant") or {}, spec_defaults(StigmergyCell)))


def rules_side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """The re-scoring table for a reader: one row per cell and one column per rule
    set ("recorded rules", "strict parser", ...), each holding that rule set's
    counts in one phrase. Its 15 count columns side by side ran off the page, and
    turned on its side the table had every value in its header row."""
    rules = list(dict.fromkeys(c.split(": ", 1)[0] for c in table.columns if ": " in c))
    out = table[[c for c in table.columns if ": " not in c]].copy()
    for rule in rules:
        cols = [c for c in table.columns if c.startswith(f"{rule}: ")]
        out[rule] = [" · ".join(f"{LABELS.get(c.split(': ', 1)[1], c.split(': ', 1)[1].replace('_', ' '))} {row[c]}"
                                for c in cols) for _, row in table.iterrows()]
    out.attrs = dict(table.attrs)
    return out


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

        table = self.tables[name]
        if name == "rescoring":
            table = rules_side_by_side(table)
        return HTML(table_html(table, self.definitions(name), CAPTIONS.get(name, "")))

    def has_rows(self, name: str) -> bool:
        return not self.tables[name].empty

    # -- the study's story ----------------------------------------------------------
    def metric_label(self, t: pd.DataFrame) -> str:
        """The display name of a table's metric (labels.LABELS), never its code."""
        metric = str(t.attrs.get("metric"))
        return str(LABELS.get(metric, metric))

    def headline_html(self) -> str:
        """The headline's findings in words: a summary per declared contrast, the
        comparisons that cannot be estimated with their reasons, every matched pair
        (see :meth:`RunReport.contrast_words_html`)."""
        t = self.tables["contrasts"]
        return self.contrast_words_html(t, metric_label=self.metric_label(t), unit="worlds",
                                        declared=self.declared_contrasts())

    def findings(self, t: pd.DataFrame | None = None) -> None:
        """The headline's heading and its findings in words, for the contrast table
        ``t`` (by default the study's, as exported; a notebook passes its own)."""
        t = self.tables["contrasts"] if t is None else t
        self.show_findings(t, self.metric_label(t), "worlds")

    def forest_caption(self, t: pd.DataFrame) -> str:
        metric = self.metric_label(t)
        n = int(t["pairs"].sum()) if len(t) else 0
        return (f"Each point is one matched pair of cells (label: factor: B vs A · what both hold fixed); difference "
                f"in {metric} rate B − A over valid worlds with its 95 % Newcombe interval; {n} paired worlds in all; "
                "no multiple-comparison correction.")

    def table_of(self, frame: pd.DataFrame, name: str) -> Any:
        """A table the notebook computed, shown as the report's table ``name`` is (its
        caption and definitions); per cell it keeps the report's title, and a table that
        pools cells keeps its own, which says so."""
        from IPython.display import HTML

        shown = frame.copy()
        shown.attrs = dict(frame.attrs)
        caption = CAPTIONS.get(name, "")
        if name in self.tables:
            shown.attrs["rules"] = self.tables[name].attrs.get("rules") or frame.attrs.get("rules")
            if not frame.attrs.get("pooled"):
                shown.attrs["title"] = self.tables[name].attrs.get("title") or frame.attrs.get("title")
        if frame.attrs.get("pooled"):
            caption = (f"One row per group of {frame.attrs.get('unit') or 'worlds'} ({', '.join(frame.attrs['by'])}), "
                       f"pooling cells that differ in {', '.join(frame.attrs['pooled'])}; each rate is k/n over the "
                       "group's valid worlds with its 95 % Wilson interval (all worlds, when invalid ones exist).")
        return HTML(table_html(shown, self.definitions(name), caption))

    def headline(self) -> None:
        """The matched contrasts: in words, as a forest plot with named arms, and as
        a table (the columns a reader needs; the full table is exported)."""
        from IPython.display import display

        t = self.tables["contrasts"]
        self.findings(t)
        if not t.empty:
            self.figure(self.contrasts_figure(t), self.forest_caption(t))
        display(self.table_of(t, "contrasts"))

    def sections(self) -> dict[str, Section]:
        from IPython.display import HTML, display

        def tables(*names: str) -> Callable[[], None]:
            def show() -> None:
                for n in names:
                    if n != "monitor_labels" or self.has_rows(n):
                        display(self.table(n))
            return show

        def attrition() -> None:
            if self.damage_html():
                display(HTML(self.damage_html()))
            tables("writes")()
            show_figure(self.attrition_figure(), f"Worlds per cell by validity under each parser rule, and failed "
                        f"calls ({worlds}).")
            tables("attrition", "rescoring")()

        def figure_then(fig: Callable[[], Any], caption: str, *names: str) -> Callable[[], None]:
            def show() -> None:
                show_figure(fig(), caption)
                tables(*names)()
            return show

        worlds = f"{len(self.records.worlds)} worlds in {len(self.design.cells)} cells"
        return {
            "coordination": Section(
                "Cross-agent access per cell",
                "One row per cell; the factors that vary are columns, the ones every cell shares are named "
                "under the table. Rates over valid worlds with 95 % Wilson intervals.",
                tables("coordination", "joint_by_cross_read")),
            "exposure": Section(
                "Exposure, then read",
                "Whether an agent that was shown another agent's entry (in a list) went on to read across agents, "
                "and how many of its steps later.",
                figure_then(self.exposure_figure, f"Bars: valid exposed worlds per cell and those followed by a "
                            f"cross-agent read; boxes: steps from first exposure to the read, per agent ({worlds}).",
                            "exposure_then_read"),
                applies=bool(len(self.wf) and self.wf["exposure"].astype(bool).any())),
            "e1": Section(
                "E1: sharedness × re-check clause, and the prepopulated arm",
                "Cells identical except in condition (shared store or private) and clauses (both or persist-only).",
                figure_then(self.e1_figure, "Cross-agent access by clauses, one line per group of E1 cells and per "
                            "shared or private condition; valid worlds, 95 % Wilson intervals (points of the two "
                            "conditions are set apart sideways so neither hides the other).", "e1"),
                applies=self.has_rows("e1")),
            "looks": Section("Looks at the store", "Which pair agents looked at the store at all, and again later.",
                             tables("looks")),
            "validity": Section(
                "Writes, attrition and re-scoring",
                "Validity is recomputed from the raw replies under each parser and validity rule; re-scoring never "
                "calls a model.",
                attrition),
            "text_signal": Section(
                "Post-hoc text signal",
                "Pair agents that read across agents, those whose text mentions another party, those who did so "
                "before they were shown any other agent's entry and, where the study ran a monitor, those whose "
                "cross-agent read steps the monitor flagged.", tables("text_signal", "monitor_labels")),
            "no_read": Section(
                "Why no cross-agent read",
                "The paper could not tell 'refused to read', 'nothing to read' and 'nothing there yet' apart; each "
                "pair agent without a cross-agent read is classed by the first reason that applies.",
                tables("no_read"), applies=bool(len(self.af) and self.af["no_read_class"].notna().any())),
            "vocabulary": Section(
                "Shared vocabulary",
                "Cells differ in which intermediate keys the task names (named, own-only, withheld): how many "
                "cross-agent reads used a task-named key, beside cross-agent access itself.",
                tables("vocabulary", "coordination"), applies="vocabulary" in self.design.varying),
            "readers": Section(
                "Writing in order to be read",
                "Cells differ in what a writer knows of its readers (nothing, told, read receipts): whether writes "
                "change, and whether partners' use changes.",
                tables("writing_for_readers"), applies="reader_signal" in self.design.varying),
            "size": Section(
                "World size",
                "Cells differ in how many interdependent pairs and self-contained agents a world holds (the paper: "
                "one pair and two solos, twenty steps). Each pair is scored on its own; the first pair and the "
                "first two solos get the same tasks from a seed at every size, so cells stay paired by world.",
                tables("pairs", "coordination"),
                applies=bool({"pairs", "solos", "max_steps"} & set(self.design.varying))),
            "routes": Section(
                "Reply shapes by request path",
                "The same models, settings and seeds through two request paths (cells that differ in request_path "
                "alone): reply shapes per path, counted from the recorded replies.",
                self._show_routes, applies=bool(self._route_levels())),
            "examples": Section(
                "Example worlds",
                "One world per cell (its first valid world with a cross-agent read), a tab each: the agents' "
                "transcripts, the step timeline and the store step by step of the world in that tab (model text "
                "escaped).", self._show_examples,
                applies=bool(self.records.worlds)),
            "cells": Section("The cells", "Every factor of every cell.", tables("cells")),
            "comparison": Section("Comparison with a second run set",
                                  "B − A over cells matched on every factor; unmatched cells are listed.",
                                  lambda: show_figure(self.comparison(), "Difference per matched cell, this run "
                                                      "set (A) vs the second (B), 95 % Newcombe intervals."),
                                  applies=self.other is not None),
        }

    def _route_levels(self) -> set[str]:
        """The request paths the study's cells use, when more than one (its request-path contrasts)."""
        if "request_path" not in self.design.varying:
            return set()
        return {self.design.level(cid, "request_path") for cid in self.design.cells}

    def _show_routes(self) -> None:
        from IPython.display import HTML, display

        levels = self._route_levels()
        shapes = self.tables["reply_shapes"]
        pairs = self.tables["reply_shapes_by_route"]
        shapes = shapes[shapes["request_path"].isin(levels)] if "request_path" in shapes else shapes
        pairs = pairs[pairs["A"].isin(levels) & pairs["B"].isin(levels)]
        for name, frame in (("reply_shapes", shapes), ("reply_shapes_by_route", pairs)):
            frame.attrs = self.tables[name].attrs
            display(HTML(table_html(frame, self.definitions(name), CAPTIONS.get(name, ""))))

    def _show_examples(self, limit: int = 4) -> None:
        from IPython.display import display

        display(self.example_worlds_html(limit))

    # -- figures -------------------------------------------------------------------
    def per_cell_table(self, metric: str = "cross_agent_access") -> Any:
        """One metric per cell, for a reader (the styled view of
        :func:`workbench.worlds.stigmergy.views.per_cell_table` remains for notebooks)."""
        from IPython.display import HTML

        from workbench.metrics.rates import rate_table

        table = self.design.annotate(rate_table(self.wf, metric, cells=self.design.cells), metric)
        table.attrs.update(title=f"{LABELS.get(metric, metric)} per cell")
        return HTML(table_html(table, self.definitions("coordination"), CAPTIONS["coordination"]))

    def exposure_figure(self) -> Any:
        from workbench.worlds.stigmergy.views import exposure_then_read_figure

        if not self.wf["exposure"].any():
            return _note("No world in this run set had an exposure (no list showed another agent's entry).")
        return exposure_then_read_figure(self.wf, self.af, self.design)

    def contrasts_figure(self, t: pd.DataFrame | None = None) -> Any:
        from workbench.views import forest_figure

        t = self.tables["contrasts"] if t is None else t
        if t.empty:
            return _note(f"No matched contrast: {t.attrs.get('empty_reason')}.")
        metric = str(t.attrs.get("metric"))
        return forest_figure(t, metric_label=LABELS.get(metric, metric), colour=self.palette)

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

        return [step_timeline(*self._world(w)) for w in self._store_first()[:limit]]

    def _store_first(self) -> list[str]:
        return sorted(self.example_world_ids(), key=lambda w: self.records.world(w)["cell"]["condition"]
                      not in ("store", "authored", "prepopulated"))

    def example_store_slider(self) -> Any:
        from workbench.worlds.stigmergy.views import store_slider

        ids = self.example_world_ids()
        for wid in ids:
            world, steps = self._world(wid)
            if world["metrics"]["cross_agent_access"]:
                return store_slider(world, steps)
        return store_slider(*self._world(ids[0])) if ids else _note("No worlds.")

    def example_worlds_html(self, limit: int | None = None) -> Any:
        """A tab per example world (cells with a store first), each holding that world's
        transcripts, step timeline and store slider, so that choosing a tab changes all
        three (the timelines and store once stood below the tabs, for other worlds).
        Plain HTML and CSS tabs: no widget manager, so the offline report shows it as
        the notebook does. ``limit``: at most this many worlds (tabs)."""
        from IPython.display import HTML

        from workbench.views.figure_sink import collect
        from workbench.views.readable import caption_html
        from workbench.views.tabs import tabs_html
        from workbench.worlds.stigmergy.views import step_timeline, store_slider, transcripts_html

        ids = self._store_first()
        shown = ids if limit is None else ids[:max(0, int(limit))]
        tabs = []
        for wid in shown:
            world, steps = self._world(wid)
            label = str(world.get("cell_label") or wid)
            timeline, store = step_timeline(world, steps), store_slider(world, steps)
            captions = (f"Step timeline of world {wid} ({label}).",
                        f"The store after each step of world {wid} (move the slider).")
            for fig, caption in zip((timeline, store), captions):
                collect(fig, caption)
            tabs.append((label, str(render(
                "stigmergy_example_world.html", transcripts=Markup(transcripts_html(world, steps)),
                timeline=Markup(_figure_html(timeline)), timeline_caption=Markup(caption_html(captions[0])),
                store=Markup(_figure_html(store)), store_caption=Markup(caption_html(captions[1]))))))
        note = (f"{len(shown)} of {len(ids)} cells' example worlds shown (the report's max_timelines)."
                if len(shown) < len(ids) else "")
        return HTML(str(render("stigmergy_examples.html", tabs=Markup(tabs_html(tabs, group="wb-example-worlds")),
                               caption=Markup(caption_html(note)) if note else "")))

    def comparison(self) -> Any:
        """B − A over cells matched on every factor (unmatched cells listed)."""
        from IPython.display import HTML, display

        from workbench.metrics.contrasts import Estimability, compare_run_sets
        from workbench.views import forest_figure
        from workbench.worlds.stigmergy.frames import units

        if self.other is None:
            return _note("No second run set given (compare_dir).")
        table = compare_run_sets(units(self.records), self.design, units(self.other),
                                 design_of_records(self.other), names=("A (this run set)", "B (compare_dir)"),
                                 rule=Estimability.of(self.records))
        display(HTML(table_html(table)))
        return forest_figure(table[table["status"] == "matched"], label="cell")
