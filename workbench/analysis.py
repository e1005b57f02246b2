"""Everything analysis.ipynb shows, as methods: the notebook only calls them.
Reads records (and tables computed from them); never runs a world."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.metrics.export import cell_tables
from workbench.metrics.frames import agent_frame, world_frame
from workbench.records import RunRecords, load_run


def _note(text: str) -> Any:
    from IPython.display import HTML

    return HTML(f"<p><i>{html.escape(text)}</i></p>")


@dataclass
class Analysis:
    records: RunRecords
    other: RunRecords | None = None
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: str | Path, compare_dir: str | Path | None = None) -> "Analysis":
        return cls(load_run(run_dir), load_run(compare_dir) if compare_dir else None)

    # -- frames and tables ----------------------------------------------------------
    @cached_property
    def wf(self) -> pd.DataFrame:
        return world_frame(self.records)

    @cached_property
    def af(self) -> pd.DataFrame:
        return agent_frame(self.records)

    @property
    def simulated(self) -> bool:
        return bool(len(self.wf)) and bool(self.wf["simulated"].all())

    @property
    def title(self) -> str:
        study = self.records.manifest.get("study") or Path(self.records.dir).name
        return f"Study {study}: {len(self.records.worlds)} worlds in {self.wf['cell_id'].nunique()} cells"

    def table(self, name: str) -> Any:
        if not self._tables:
            self._tables = cell_tables(self.records)
        t = self._tables[name]
        if t.empty:
            return _note(f"No rows for {name} in this run set.")
        return t.style.format(precision=3, na_rep="—").hide(axis="index")

    def provenance_html(self) -> str:
        """Study, params hash, git revision per invocation, package versions: escaped."""
        m = self.records.manifest
        rows = [("records", str(self.records.dir)), ("study", str(m.get("study"))),
                ("params", f"{(m.get('params') or {}).get('path')} sha256 {(m.get('params') or {}).get('sha256')}")]
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        for r in runs:
            env = r.get("environment") or {}
            git = env.get("git") or {}
            rows.append((f"run {r.get('run')}", f"{r.get('started')} → {r.get('finished')}; git {git.get('revision')}"
                         f"{' (dirty)' if git.get('dirty') else ''}; workbench code sha256 "
                         f"{str(env.get('package_sha256'))[:16]}…; {r.get('finished_worlds')} worlds"))
        if runs:
            pk = (runs[-1].get("environment") or {}).get("packages") or {}
            rows.append(("packages", ", ".join(f"{k} {v}" for k, v in pk.items() if v)))
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def lock_runs(self) -> list[dict[str, Any]]:
        m = self.records.manifest
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        return [r for r in runs if r.get("lock")]

    def locks_html(self) -> str:
        """The lock chain each run ran under, whether it matched, every deviation with
        its reason, and (when the lock folder is here) a fresh verification,
        including whether these records are exactly those of a data lock."""
        from workbench import locks as L

        runs = self.lock_runs()
        if not runs:
            return "<p><i>This run set was not run under a preregistration lock.</i></p>"
        e = html.escape
        out = ["<table><tr><th>run</th><th>lock</th><th>matched at run time</th><th>deviation</th></tr>"]
        for r in runs:
            lk = r["lock"]
            dev = e(lk.get("deviation") or "")
            if lk.get("changes_at_run"):
                dev += "<br><small>" + "<br>".join(e(c) for c in lk["changes_at_run"]) + "</small>"
            out.append(f"<tr><td>{r.get('run')}</td><td>{e(str(lk.get('lock')))} <code>{e(str(lk.get('lock_sha256'))[:12])}"
                       f"</code></td><td>{'yes' if lk.get('matched') else '<b>no</b>'}</td><td>{dev}</td></tr>")
        out.append("</table>")
        chain = runs[-1]["lock"].get("chain") or []
        out.append("<p><b>Lock chain</b> (as of the last run)</p><table><tr><th>#</th><th>name</th><th>kind</th>"
                   "<th>created</th><th>covers</th><th>sha256</th><th>reason</th></tr>")
        for c in chain:
            out.append("<tr>" + "".join(f"<td>{e(str(v if v is not None else ''))}</td>" for v in (
                c["sequence"], c["name"], c["kind"], c["created"], c["params"], c["sha256"][:12], c.get("reason"))) +
                "</tr>")
        out.append("</table>")
        lock_dir = Path(runs[-1]["lock"]["lock_dir"]) if runs[-1]["lock"].get("lock_dir") else None
        if lock_dir is not None and lock_dir.is_dir():
            ok, lines = L.verify(lock_dir)
            out.append(f"<p><b>Verification now</b> ({'all locks verified' if ok else 'FAILED'})</p><pre>"
                       + e("\n".join(lines)) + "</pre>")
            here = Path(self.records.dir).resolve()
            for lk in L.load_chain(lock_dir).locks:
                if lk.get("kind") == "data" and L._resolve(lk["run_dir"]).resolve() == here:
                    found = L.data_changes(lk)
                    verdict = ("this analysis ran on exactly the locked data" if not found
                               else "the records changed since the data lock: " + "; ".join(found))
                    out.append(f"<p>Data lock {e(lk['name'])}: {e(verdict)}</p>")
        return "".join(out)

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
