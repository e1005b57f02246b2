"""What every world kind's report shows in the same way: which records, which
code and packages produced them, and the preregistration lock each run ran
under. Each kind's report class (``Analysis``, ``RecallReport``,
``CollusionReport``) extends :class:`RunReport` with its own tables and figures."""
from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from workbench.errors import UnknownNameError
from workbench.records import RunRecords, load_run
from workbench.routes import is_simulated_route
from workbench.views.markup import Markup, render
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
        return str(render("report_damage.html", count=len(found), lines=found[:50], more=max(0, len(found) - 50)))

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
        return str(render("report_paragraph.html", css="wb-what", text=text))

    def intro(self, title: str) -> None:
        """The top of every report: the title, the study's own description, what was
        run, and the SIMULATED banner when any route is not a real model."""
        from IPython.display import HTML, display

        from workbench.views.blocks import banner, heading

        display(heading(title, 1))
        description = str(self.records.manifest.get("description") or "").strip()
        if description:
            display(HTML(render("report_paragraph.html", css="wb-description", text=description)))
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
            display(HTML(render("report_paragraph.html", css="wb-blurb", text=s.blurb)))
        s.show(**options)

    def show_headline(self, what: str, table: str, figure: Any | None = None, figure_caption: str = "",
                      words: str = "") -> None:
        """The headline in one call: its heading and findings (``words``, HTML), one
        figure that names the metric and which arm is which, then the readable table
        (HTML). A notebook that shows these as steps of its own calls
        :meth:`show_findings`, :meth:`figure` and displays the table itself."""
        from IPython.display import HTML, display

        display(HTML(render("report_headline.html", what=what, words=Markup(words))))
        if figure is not None:
            self.figure(figure, figure_caption)
        display(HTML(table))

    def figure(self, fig: Any, caption: str) -> None:
        """A figure and the caption under it (a report never shows a figure unexplained)."""
        from workbench.views.readable import show_figure

        show_figure(fig, caption)

    def declared_contrasts(self) -> list[dict[str, Any]]:
        """The contrasts the study declared (its manifest), each a mapping with name and factor."""
        return [dict(c) for c in self.records.manifest.get("contrasts") or [] if isinstance(c, Mapping)]

    def headline_title(self, t: Any, metric_label: str, declared: Sequence[Mapping[str, Any]] = ()) -> str:
        """"metric, contrast, contrast, ...": the heading names every contrast, shown or not estimable."""
        names = list(dict.fromkeys([*(str(c) for c in t["contrast"])] if len(t) else []))
        names += [str(c.get("name") or c.get("factor")) for c in declared
                  if str(c.get("name") or c.get("factor")) not in names]
        table_metric = str(t.attrs.get("metric") or "") if len(t) else ""
        own = {str(r["contrast"]): own_metric_label(str(r.get("metric") or ""), table_metric, metric_label)
               for _, r in t.iterrows()} if len(t) and "metric" in t.columns else {}
        shown = [n if own.get(n, metric_label) == metric_label else f"{n} (in {own[n]})" for n in names]
        return f"{metric_label}, {', '.join(shown) or 'no matched contrast'}"

    def show_findings(self, t: Any, metric_label: str | None = None, unit: str | None = None,
                      declared: Sequence[Mapping[str, Any]] | None = None) -> None:
        """The headline's heading and what it found, in words (:meth:`contrast_words_html`):
        the first thing a reader meets after the introduction."""
        from IPython.display import HTML, display

        label = metric_label or str(t.attrs.get("metric_label") or t.attrs.get("metric") or "rate")
        shown = self.declared_contrasts() if declared is None else list(declared)
        words = self.contrast_words_html(t, metric_label=label, unit=unit, declared=shown)
        display(HTML(render("report_headline.html", what=self.headline_title(t, label, shown), words=Markup(words))))

    def contrast_words_html(self, t: Any, metric_label: str | None = None, unit: str | None = None,
                            declared: Sequence[Mapping[str, Any]] = ()) -> str:
        """A matched-contrast table (:func:`workbench.metrics.contrasts.contrast_table`,
        or one in its shape) in words: a summary of what was found per contrast (which
        arm is higher, by how much with its interval, p, over how many paired units),
        then the comparisons that could not be estimated, each with its reason (a
        ``declared`` contrast no two cells of the run set can answer among them), then
        every matched pair of cells in a line of its own with both rates."""
        from workbench.metrics.contrasts import Estimability

        label = metric_label or str(t.attrs.get("metric_label") or t.attrs.get("metric") or "rate")
        unit = unit or str(t.attrs.get("unit") or "units")
        rule = Estimability.of(self.records) if "estimable" in t.columns else None
        return str(render("report_findings.html", **findings_context(t, label, unit, rule, declared)))

    def provenance(self, verification: str = "") -> None:
        """The end of every report: where the records came from, and the
        preregistration each run ran under (``verification``: a fresh check of the
        lock, computed by the notebook through :mod:`workbench.locks`)."""
        from IPython.display import HTML, display

        from workbench.views.blocks import heading

        display(heading("Provenance and preregistration", 2))
        display(HTML(render("report_paragraph.html", css="wb-blurb",
                            text="Records, code and package versions behind every number above; then the lock each "
                                 "run ran under, whether it matched, and every deviation with its reason.")))
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
        return str(render("report_provenance.html", rows=rows))

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
        shown = [{"run": r.get("run"), "lock": str(r["lock"].get("lock")), "sha": str(r["lock"].get("lock_sha256"))[:12],
                  "matched": bool(r["lock"].get("matched")), "deviation": r["lock"].get("deviation") or "",
                  "changes": list(r["lock"].get("changes_at_run") or [])} for r in runs]
        chain = (runs[-1]["lock"].get("chain") or []) if runs else []
        cells = [[str(v if v is not None else "") for v in (c["sequence"], c["name"], c["kind"], c["created"],
                                                            c["params"], c["sha256"][:12], c.get("reason"))]
                 for c in chain]
        return str(render("report_locks.html", runs=shown, chain=cells))



# -- the headline in words --------------------------------------------------------------
HIGHER, LOWER, UNCLEAR, NOT_ESTIMABLE = "higher", "lower", "no clear difference", "not estimable"
ALPHA = 0.05  # a difference is called one where its 95 % interval leaves out 0 and the exact paired test rejects


@dataclass(frozen=True)
class Finding:
    """One matched pair of cells of a contrast, read: both arms, the difference with
    its interval, the paired test, and which way it points. A difference counts as
    one only when its 95 % interval leaves out zero and the exact paired test the
    analysis reports rejects (the two can disagree on small samples: an interval of
    [+10, +78] pp with p = 0.0625 is not called a difference); otherwise it is "no
    clear difference", never "no difference"."""
    contrast: str
    factor: str
    metric: str
    a: str
    b: str
    held_fixed: str
    a_kn: str  # "k/n" over valid units
    b_kn: str
    a_rate: str  # "k/n · r % [low, high]"
    b_rate: str
    diff: float
    low: float
    high: float
    p: float
    pairs: int
    lost: int
    direction: str  # HIGHER, LOWER, UNCLEAR or NOT_ESTIMABLE (B against A)
    reason: str = ""  # why not estimable

    @property
    def estimable(self) -> bool:
        return self.direction != NOT_ESTIMABLE

    @property
    def difference(self) -> str:
        from workbench.views.readable import diff_phrase

        return diff_phrase(self.diff, self.low, self.high)


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return v


def _valid_n(kn: Any) -> int | None:
    try:
        return int(str(kn).split("/")[1])
    except (IndexError, ValueError):
        return None


def _p_text(p: float) -> str:
    return f"{p:.3g}"


def not_estimable_reason(row: Mapping[str, Any], unit: str, rule: Any = None) -> str:
    """Why a matched pair of cells gives no usable difference: an arm without a valid
    unit, else an arm short of the study's estimability rule; and the pairs lost."""
    valid = {row.get(arm): _valid_n(row.get(f"{arm} k/n")) for arm in ("A", "B")}
    parts = [f"{level} has no valid {unit}" for level, n in valid.items() if n == 0]
    if not parts and rule is not None:
        parts = [f"{level} has {n} valid {unit}, fewer than the {rule.min_valid} the study's estimability rule asks "
                 "for" for level, n in valid.items() if n is not None and n < rule.min_valid]
        parts = parts or [f"under {rule.min_valid_share:.0%} of an arm's {unit} are valid (the study's estimability "
                          "rule)"]
    parts = parts or ["no difference could be computed"]
    lost = _num(row.get("lost pairs"))
    if lost > 0:
        parts.append(f"{int(lost)} pair(s) lost to attrition")
    return "; ".join(parts)


def contrast_findings(t: Any, unit: str = "units", rule: Any = None, metric: str = "") -> list[Finding]:
    """Every row of a matched-contrast table as a :class:`Finding`, in the table's order.
    A row is estimable where its difference is a number and (where the table says)
    its ``estimable`` column holds; the rest carry their reason."""
    from workbench.metrics.contrasts import DIFF, P
    from workbench.views.readable import rate_phrase

    out = []
    for _, r in t.iterrows() if len(t) else ():
        d, low, high = _num(r.get(DIFF)), _num(r.get("low")), _num(r.get("high"))
        ok = not math.isnan(d) and bool(r.get("estimable", True))
        p = _num(r.get(P))
        rejects = not math.isnan(p) and p <= ALPHA  # the paired test the analysis reports agrees
        if not ok:
            direction = NOT_ESTIMABLE
        elif not math.isnan(low) and low > 0 and rejects:
            direction = HIGHER
        elif not math.isnan(high) and high < 0 and rejects:
            direction = LOWER
        else:
            direction = UNCLEAR
        pairs, lost = _num(r.get("pairs")), _num(r.get("lost pairs"))
        out.append(Finding(
            contrast=str(r.get("contrast")), factor=str(r.get("factor") or ""), metric=str(r.get("metric") or metric),
            a=str(r.get("A")), b=str(r.get("B")), held_fixed=str(r.get("held fixed") or ""),
            a_kn=str(r.get("A k/n")), b_kn=str(r.get("B k/n")),
            a_rate=rate_phrase(r.get("A k/n"), r.get("A low"), r.get("A high")),
            b_rate=rate_phrase(r.get("B k/n"), r.get("B low"), r.get("B high")),
            diff=d, low=low, high=high, p=p, pairs=0 if math.isnan(pairs) else int(pairs),
            lost=0 if math.isnan(lost) else int(lost), direction=direction,
            reason="" if ok else not_estimable_reason(r, unit, rule)))
    return out


def finding_line(f: Finding, unit: str) -> str:
    """One matched pair of cells in words: what it holds fixed, B against A, the difference and the test."""
    arms = f"{f.b} {f.b_rate} vs {f.a} {f.a_rate}"
    where = f"{f.held_fixed}: " if f.held_fixed else ""
    if not f.estimable:
        return f"{where}{f.b} {f.b_kn} vs {f.a} {f.a_kn} valid {unit}; not estimable: {f.reason}"
    test = (f"exact McNemar p = {_p_text(f.p)} over {f.pairs} paired {unit}" if not math.isnan(f.p)
            else f"no paired {unit}")
    lost = f", {f.lost} pairs lost to attrition" if f.lost else ""
    return f"{where}{arms}; difference {f.difference}; {test}{lost}"


def _spread(group: Sequence[Finding]) -> str:
    """The differences and p of several pairs in a phrase: one value when they agree, else the range."""
    diffs = list(dict.fromkeys(f.difference for f in group))
    ps = [f.p for f in group if not math.isnan(f.p)]
    if len(diffs) == 1:
        size = diffs[0] if len(group) == 1 else f"{diffs[0]} in each"
    else:
        ordered = sorted(group, key=lambda f: f.diff)
        size = f"from {ordered[0].difference} to {ordered[-1].difference}"
    if not ps:
        return size
    if len(set(ps)) == 1:
        return f"{size}, p = {_p_text(ps[0])}" + (" in each" if len(group) > 1 and len(diffs) > 1 else "")
    return f"{size}, p from {_p_text(min(ps))} to {_p_text(max(ps))}"


def contrast_summary(findings: Sequence[Finding], metric_label: str, unit: str) -> str:
    """One contrast's estimable pairs in a sentence: per level of B, in how many
    matched pairs of cells it was higher, lower or not clearly different from A
    (naming the pairs of a minority by what tells them apart), by how much with the
    95 % interval, with which p, over how many paired units."""
    shown = [f for f in findings if f.estimable]
    if not shown:
        return ""
    cells = len(shown)
    paired = sum(f.pairs for f in shown)
    common = set.intersection(*(set(f.held_fixed.split("; ")) for f in shown))

    def which(f: Finding) -> str:
        return "; ".join(part for part in f.held_fixed.split("; ") if part not in common)

    parts = []
    for b in dict.fromkeys(f.b for f in shown):
        of_b = [f for f in shown if f.b == b]
        a = of_b[0].a
        for direction in (HIGHER, LOWER, UNCLEAR):
            group = [f for f in of_b if f.direction == direction]
            if not group:
                continue
            verb = (f"{direction} with {b} than with {a}" if direction != UNCLEAR
                    else f"not clearly different between {b} and {a} (the 95 % interval holds 0, or the exact "
                         f"paired test does not reject at p ≤ {ALPHA})")
            if cells == 1:
                parts.append(f"{verb}, {_spread(group)}")
                continue
            named = " · ".join(filter(None, (which(f) for f in group))) if len(group) < cells and len(group) <= 3 else ""
            parts.append(f"{verb} in {len(group)} of {cells} matched pairs of cells ({named + ': ' if named else ''}"
                         f"{_spread(group)})")
    return f"{metric_label} {'; '.join(parts)}; {paired} paired {unit}" + (" in all." if cells > 1 else ".")


def own_metric_label(metric: str, table_metric: str, table_label: str) -> str:
    """The words for a contrast's metric: the table's label where it is the table's metric,
    else the metric's own name (a declared contrast with ``metric:``)."""
    return table_label if not metric or metric == table_metric else metric.replace("_", " ")


def findings_context(t: Any, metric_label: str, unit: str, rule: Any = None,
                     declared: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What ``report_findings.html`` shows of a matched-contrast table: the summary per
    contrast, the not-estimable comparisons with their reasons (and declared contrasts
    with no matched pair of cells at all), and every pair in words."""
    from workbench.metrics.contrasts import NO_CORRECTION

    table_metric = str(t.attrs.get("metric") or "")
    findings = contrast_findings(t, unit, rule, table_metric)
    names = list(dict.fromkeys(f.contrast for f in findings))
    summary, not_estimable, details = [], [], []
    for name in names:
        group = [f for f in findings if f.contrast == name]
        # a contrast declared with its own metric (``metric:``) is said in that metric's words
        own = own_metric_label(group[0].metric, table_metric, metric_label)
        text = contrast_summary(group, own, unit)
        if text:
            summary.append({"name": name, "text": text})
        for f in group:
            if not f.estimable:
                where = f"{f.held_fixed}: " if f.held_fixed else ""
                not_estimable.append({"name": name, "text": f"{f.reason} ({where}{f.b} {f.b_kn} vs {f.a} {f.a_kn} "
                                                            f"valid {unit})"})
        first = group[0]
        details.append({"name": name, "head": f"{own}, {first.factor} {first.b} vs {first.a}, valid {unit}; "
                                              f"{NO_CORRECTION}",
                        "lines": [finding_line(f, unit) for f in group]})
    for c in declared:
        name = str(c.get("name") or c.get("factor"))
        if name not in names:
            levels = " vs ".join(str(v) for v in reversed(c.get("levels") or [])) or "its levels"
            not_estimable.append({"name": name, "text": f"no two cells of this run set differ in {c.get('factor')} "
                                                         f"({levels}) and nothing else, so there is no pair of cells "
                                                         "to compare"})
    lead = (f"{metric_label} over valid {unit}, B against A in each matched pair of cells (a difference counts "
            f"where its 95 % Newcombe interval leaves out 0 and the exact paired McNemar test rejects at "
            f"p ≤ {ALPHA}; {NO_CORRECTION}):")
    empty = str(t.attrs.get("empty_reason") or "no matched contrast") if not findings and not not_estimable else ""
    return {"summary": summary, "lead": lead, "not_estimable": not_estimable, "details": details,
            "empty_reason": empty}
