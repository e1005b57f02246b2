"""What every world kind's report shows in the same way: which records, which
code and packages produced them, and the preregistration lock each run ran
under. Each kind's report class (``Analysis``, ``RecallReport``,
``CollusionReport``) extends :class:`RunReport` with its own tables and figures."""
from __future__ import annotations

import gc
import html
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from workbench.errors import UnknownNameError
from workbench.records import RunRecords, load_run
from workbench.routes import is_simulated_route
from workbench.views.palette import Palette


@dataclass(frozen=True)
class Section:
    """A part of a report that the design may or may not call for: shown (heading,
    one paragraph on how to read it, then its figures and tables) only when
    ``applies``, so a study without E1 cells gets no E1 section."""
    heading: str
    blurb: str
    show: Callable[..., None]
    applies: bool = True


@dataclass
class RunReport:
    records: RunRecords
    other: RunRecords | None = None

    def __post_init__(self) -> None:
        from workbench.views.notes import set_caption_note

        set_caption_note("UNCALIBRATED REHEARSAL: simulated agents that could not read this study's prompts as "
                         "they were fitted to; see the banner." if self.uncalibrated else "")

    @property
    def uncalibrated(self) -> dict[str, list[str]]:
        """Per cell, what its simulated agents could not read as fitted (``rehearsal: uncalibrated``)."""
        from workbench.records import uncalibrated_cells

        return uncalibrated_cells(self.records.manifest)

    @classmethod
    def load(cls, run_dir: str | Path, compare_dir: str | Path | None = None) -> RunReport:
        report = cls(load_run(run_dir), load_run(compare_dir) if compare_dir else None)
        # the records live as long as the report: the cyclic collector need not walk them again
        gc.freeze()
        return report

    @property
    def study(self) -> str:
        return self.records.manifest.get("study") or Path(self.records.dir).name

    @property
    def routes(self) -> list[str]:
        """Every route an agent of this run set had, in first-seen order."""
        seen: dict[str, None] = {}
        for w in self.records.worlds:
            for a in w.get("agents") or []:
                seen.setdefault(str(a.get("route") or ""), None)
        return [r for r in seen if r]

    @property
    def simulated_routes(self) -> list[str]:
        return [r for r in self.routes if is_simulated_route(r)]

    @property
    def simulated(self) -> bool:
        """Any agent simulated, scripted, replayed or controlled: the report then
        says so in a banner, naming those routes (one controlled peer is enough to
        make a cell's rates describe the workbench rather than a model)."""
        return bool(self.simulated_routes)

    def banner_text(self) -> str:
        return " ".join(filter(None, [self._simulated_text(), self._uncalibrated_text()]))

    def _uncalibrated_text(self) -> str:
        cells = self.uncalibrated
        if not cells:
            return ""
        first = next(iter(cells.values()))[0]
        return (f"UNCALIBRATED REHEARSAL (rehearsal: uncalibrated): in {len(cells)} cell(s) the simulated agents "
                f"cannot read the prompts as they were fitted to, so their numbers describe the simulation's reading "
                f"of this wording, not the wording's effect. First reason: {first}")

    def _simulated_text(self) -> str:
        sim = self.simulated_routes
        if not sim:
            return ""
        if len(sim) == len(self.routes):
            return ("SIMULATED: every agent in this run set is simulated, scripted, replayed or controlled "
                    f"({', '.join(sim)}). These are rates of that behaviour, not measurements of any real model.")
        real = [r for r in self.routes if r not in sim]
        return (f"SIMULATED routes present: {', '.join(sim)} act without a real model (beside {', '.join(real)}). "
                "Rows and cells with them describe simulated behaviour, not a model.")

    def usage(self) -> dict[str, float]:
        """Tokens and dollars over every recorded model call (a reply's usage and
        cost as the client reported them; simulated calls count tokens, cost 0)."""
        prompt = completion = 0
        cost = 0.0
        priced = calls = 0
        for steps in self.records.steps.values():
            for st in steps:
                reply = st.get("reply") if isinstance(st.get("reply"), dict) else None
                if reply is None:
                    continue
                calls += 1
                u = reply.get("usage") or {}
                prompt += int(u.get("prompt_tokens") or 0)
                completion += int(u.get("completion_tokens") or 0)
                if isinstance(reply.get("cost_usd"), (int, float)):
                    cost += float(reply["cost_usd"])
                    priced += 1
        return {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": cost,
                "priced_calls": priced}

    def damage(self) -> list[str]:
        """What is wrong with the records (see :func:`workbench.records.damage`), once per report."""
        from workbench.records import damage

        if not hasattr(self, "_damage"):
            self._damage = damage(self.records)
        return self._damage

    def damage_html(self) -> str:
        """The damaged records, for the attrition section: "" when there are none."""
        found = self.damage()
        if not found:
            return ""
        items = "".join(f"<li>{html.escape(line)}</li>" for line in found[:50])
        more = f"<li>and {len(found) - 50} more</li>" if len(found) > 50 else ""
        return (f"<div class='wb-note' style='color:#b00020'><b>{len(found)} damaged record(s)</b>, left out of every "
                f"table (`workbench run` again reruns a world whose steps are damaged):<ul>{items}{more}</ul></div>")

    def attrition(self) -> dict[str, int]:
        """Worlds lost, by whose doing: an infrastructure failure (retried on resume)
        or the models' own invalid output (an outcome)."""
        worlds = self.records.worlds
        failed = sum(1 for w in worlds if w.get("failed"))
        invalid = sum(1 for w in worlds if not w.get("failed") and w.get("valid") is False)
        return {"worlds": len(worlds), "failed": failed, "invalid": invalid}

    def what_was_run_html(self) -> str:
        """One paragraph: the cells and worlds, who the agents were, what it cost
        and what was lost."""
        e = html.escape
        worlds = self.records.worlds
        per_cell: dict[str, int] = {}
        for w in worlds:
            per_cell[str(w.get("cell_id"))] = per_cell.get(str(w.get("cell_id")), 0) + 1
        sizes = sorted(set(per_cell.values()))
        size = (str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}") if sizes else "0"
        routes = [f"{r} (simulated)" if is_simulated_route(r) else r for r in self.routes]
        u = self.usage()
        a = self.attrition()
        spent = (f"${u['cost_usd']:.2f} over {int(u['priced_calls'])} priced calls" if u["priced_calls"]
                 else "no priced call")
        lost = (f"{a['failed']} worlds failed for infrastructure reasons (retried on resume) and "
                f"{a['invalid']} were invalid by the models' own output" if a["failed"] or a["invalid"]
                else "no world failed or was invalid")
        damaged = self.damage()
        if damaged:
            lost += (f"; {len(damaged)} damaged record(s) (torn or corrupt lines, worlds missing steps) are left out "
                     "of every number here: see the attrition section and the provenance")
        kind = self.records.manifest.get("world_kind") or (worlds[0].get("world_kind") if worlds else "")
        text = (f"What was run: {len(per_cell)} cells × {size} worlds = {len(worlds)} {kind} worlds; agents: "
                f"{', '.join(routes) or 'none'}; {int(u['calls'])} model calls, "
                f"{int(u['prompt_tokens'] + u['completion_tokens']):,} tokens "
                f"({int(u['prompt_tokens']):,} prompt, {int(u['completion_tokens']):,} completion), {spent}; {lost}.")
        return f"<p class=\"wb-what\">{e(text)}</p>"

    def intro(self, title: str) -> None:
        """The top of every report: the title, the study's own description, what was
        run, and the SIMULATED banner when any route is not a real model."""
        from IPython.display import HTML, display

        from workbench.views.blocks import banner, heading

        display(heading(title, 1))
        description = str(self.records.manifest.get("description") or "").strip()
        if description:
            display(HTML(f"<p class=\"wb-description\">{html.escape(description)}</p>"))
        display(HTML(self.what_was_run_html()))
        if self.simulated or self.uncalibrated:
            display(banner(self.banner_text()))

    @cached_property
    def palette(self) -> Palette:
        """The report's arm colours: the declared contrasts' levels first, then every
        factor level of the cells, then the routes."""
        m = self.records.manifest
        declared = [lv for c in m.get("contrasts") or [] for lv in (c.get("levels") or [])]
        cell_levels = [v for w in self.records.worlds for k, v in sorted((w.get("cell") or {}).items())
                       if isinstance(v, str) and k not in ("label", "prompts")]
        return Palette.of(declared, cell_levels, self.routes)

    def sections(self) -> dict[str, Section]:
        """The kind's report sections by key (none at this level)."""
        return {}

    def section(self, key: str, **options: Any) -> None:
        """Show one section if the design calls for it (``options`` go to its view,
        e.g. how many example worlds); a key the kind does not know is a mistake in
        the notebook and raises."""
        from IPython.display import HTML, display

        from workbench.views.blocks import heading

        sections = self.sections()
        if key not in sections:
            raise UnknownNameError(f"report section {key!r}: this report has {', '.join(sections) or 'none'}")
        s = sections[key]
        if not s.applies:
            return
        display(heading(s.heading, 2))
        if s.blurb:
            display(HTML(f"<p>{html.escape(s.blurb)}</p>"))
        s.show(**options)

    def show_headline(self, what: str, table: str, figure: Any | None = None, figure_caption: str = "",
                      words: str = "") -> None:
        """The headline: the study's declared (or derived) matched comparisons in
        one sentence each, their readable table, and one figure that names the
        metric and which arm is which."""
        from IPython.display import HTML, display

        from workbench.views.readable import show_figure

        display(HTML(f"<h2 id=\"headline\" class=\"wb-headline\">Headline: {html.escape(what)}</h2>{words}"))
        if figure is not None:
            show_figure(figure, figure_caption)
        display(HTML(table))

    def contrast_words_html(self, t: Any) -> str:
        """The first contrast of a matched-contrast table (:func:`workbench.metrics.
        contrasts.contrast_table`) in words, one line per matched pair of cells: both
        rates, the difference and its interval, and the paired test over the table's
        unit (worlds, recalls, trajectories)."""
        import pandas as pd

        from workbench.metrics.contrasts import DIFF, NO_CORRECTION, P

        e = html.escape
        unit = str(t.attrs.get("unit") or "units")
        if t.empty:
            return f"<p><i>No headline contrast: {e(str(t.attrs.get('empty_reason')))}.</i></p>"
        first = t[t["contrast"] == t["contrast"].iloc[0]]
        items = []
        for _, r in first.iterrows():
            d = r[DIFF]
            diff = "not estimable" if pd.isna(d) else f"{d:+.0%} [{r['low']:+.0%}, {r['high']:+.0%}]"
            paired = (f"exact McNemar p = {r[P]:.3g} over {int(r['pairs'])} paired {unit}"
                      if not pd.isna(r[P]) else f"no paired {unit}")
            lost = f", {int(r['lost pairs'])} pairs lost to attrition" if r["lost pairs"] else ""
            items.append(f"<li>{e(str(r['held fixed']))}: {e(str(r['B']))} {e(str(r['B k/n']))} vs "
                         f"{e(str(r['A']))} {e(str(r['A k/n']))}; difference {e(diff)}; {e(paired)}{e(lost)}</li>")
        return (f"<p><b>{e(str(first['contrast'].iloc[0]))}</b> ({e(str(t.attrs.get('metric_label') or t.attrs.get('metric')))}, "
                f"{e(str(first['factor'].iloc[0]))} {e(str(first['B'].iloc[0]))} vs {e(str(first['A'].iloc[0]))}, "
                f"valid {e(unit)}; {e(NO_CORRECTION)})</p><ul>{''.join(items)}</ul>")

    def provenance(self, verification: str = "") -> None:
        """The end of every report: where the records came from, and the
        preregistration each run ran under (``verification``: a fresh check of the
        lock, computed by the notebook through :mod:`workbench.locks`)."""
        from IPython.display import HTML, display

        from workbench.views.blocks import heading

        display(heading("Provenance and preregistration", 2))
        display(HTML("<p>Records, code and package versions behind every number above; then the lock each run "
                     "ran under, whether it matched, and every deviation with its reason.</p>"))
        display(HTML(self.provenance_html()))
        display(HTML(self.locks_html() + verification))

    def provenance_html(self) -> str:
        """Study, params hash, git revision per invocation, package versions, and what each
        run used: its params and seed, each cell's design fingerprint, any deviation it
        recorded with its reason and changes (an append-only manifest keeps them all). Escaped."""
        m = self.records.manifest
        rows = [("records", str(self.records.dir)), ("study", str(m.get("study"))),
                ("params", f"{(m.get('params') or {}).get('path')} sha256 {(m.get('params') or {}).get('sha256')}")]
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        for r in runs:
            env = r.get("environment") or {}
            git = env.get("git") or {}
            params = r.get("params") or {}
            rows.append((f"run {r.get('run')}", f"{r.get('started')} → {r.get('finished')}; git {git.get('revision')}"
                         f"{' (dirty)' if git.get('dirty') else ''}; workbench code sha256 "
                         f"{str(env.get('package_sha256'))[:16]}…; {r.get('finished_worlds')} worlds"
                         + (f"; params {params.get('path')} sha256 {str(params.get('sha256'))[:16]}…; seed {r.get('seed')}"
                            if params else "")))
            designs = r.get("designs") or {}
            if designs:
                rows.append((f"run {r.get('run')} designs", "; ".join(
                    f"{self._cell_name(cid)}: {fp[:12]}" for cid, fp in sorted(designs.items()))))
            deviation = r.get("deviation")
            if deviation:
                rows.append((f"run {r.get('run')} deviation", f"{deviation.get('reason')}: "
                             + "; ".join(deviation.get("changes") or [])))
        if runs:
            pk = (runs[-1].get("environment") or {}).get("packages") or {}
            rows.append(("packages", ", ".join(f"{k} {v}" for k, v in pk.items() if v)))
        found = self.damage()
        rows.append(("damaged records", "; ".join(found[:20]) + (f"; and {len(found) - 20} more" if len(found) > 20 else "")
                     if found else "none: every line readable, every world's steps complete"))
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def _cell_name(self, cell_id: str) -> str:
        label = ((self.records.manifest.get("cells") or {}).get(cell_id) or {}).get("label")
        return f"{label} ({cell_id})" if label else cell_id

    def lock_runs(self) -> list[dict[str, Any]]:
        m = self.records.manifest
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        return [r for r in runs if r.get("lock")]

    def locks_html(self) -> str:
        """The lock chain each run ran under, whether it matched, every deviation with its
        reason: as recorded (a fresh verification is :func:`workbench.locks.verification_html`)."""
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
        return "".join(out)

