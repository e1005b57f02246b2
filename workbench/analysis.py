"""The analysis API the report notebooks are written in: load a run set, turn its
records into tidy frames, and compute the named tables and figures from those frames.

A report that only calls methods cannot be changed without editing package code. Here
every step is a function of a frame that the notebook holds in a variable, so the
notebook shows each step (load → frame → table → figure) and a researcher changes one
in place: a grouping, a filter on the frame, another metric. Every function returns a
pandas DataFrame or a plotly figure and changes nothing it is given::

    from workbench import analysis as wa

    run = wa.load("outputs/demo")
    worlds = wa.frame(run, "world")                 # one row per world, its cell's factors as columns
    t = wa.rates(worlds, "cross_agent_access", by=["model", "condition"])
    wa.rates_figure(t, "cross_agent_access", colour="condition")
    c = wa.contrasts(run, frame=worlds[worlds["model"] != "sim/non-writer"])
    wa.forest(c)
    wa.findings(c)                                  # each matched pair of cells in words

Frames are tidy: one row per unit (a world, an agent, a recall, a trajectory, a step),
one column per cell factor (all of the design's, constant ones included) and one per
outcome. :func:`frames` names those a run set offers; every kind has ``unit`` (what its
contrasts count) and ``step`` (one row per recorded step), and the shipped kinds add
their own (shared store: ``world``, ``agent``, ``reply``; recall: ``recall``, ``world``;
collusion: ``trajectory``, ``episode``). Rates are k/n over valid units with 95 % Wilson
intervals; differences are Newcombe intervals with exact McNemar tests over paired units
(:mod:`workbench.metrics.contrasts`); nothing here corrects for multiple comparisons.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import UnknownNameError

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from workbench.kinds.base import WorldKind
    from workbench.metrics.design import Design
    from workbench.records import RunRecords

__all__ = ["RunSet", "contrasts", "describe", "findings", "forest", "frame", "frames", "label", "load", "rates",
           "rates_figure", "show", "table", "tables"]


@dataclass(eq=False)
class RunSet:
    """A loaded run set: its records, its world kind (from the registry) and its design
    (one row per cell, every factor). Frames are built once and kept here."""

    records: RunRecords
    kind: WorldKind
    design: Design
    _frames: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def factors(self) -> list[str]:
        """The factors that vary between cells: grouping by them gives one row per cell
        (the cell's label where no factor varies)."""
        return list(self.design.varying) or ["cell_label"]

    @property
    def study(self) -> str:
        return str(self.records.manifest.get("study") or Path(self.records.dir).name)

    def __repr__(self) -> str:
        return (f"<run set {self.study}: {len(self.records.worlds)} {self.kind.name} worlds in "
                f"{len(self.design.cells)} cells; frames {', '.join(frames(self))}>")


def load(source: str | Path | RunRecords) -> RunSet:
    """A run set from its folder (or from records already loaded, e.g. a report's)."""
    from workbench.kinds import kind_of_records
    from workbench.metrics.design import design_of_records
    from workbench.records import load_run

    records = load_run(source) if isinstance(source, (str, Path)) else source
    return RunSet(records, kind_of_records(records), design_of_records(records))


# -- frames -------------------------------------------------------------------------------
Builder = Callable[["RunRecords"], "pd.DataFrame"]


def _kind_frames(run: RunSet) -> dict[str, tuple[str, Builder]]:
    """The shipped kinds' own frames: name → (what a row is, builder). A kind from
    elsewhere has the kind-free ``unit`` and ``step`` frames."""
    name = run.kind.name
    if name == "stigmergy":
        from workbench.worlds.stigmergy import frames as stigmergy

        return {"world": ("worlds", stigmergy.world_frame), "agent": ("agents", stigmergy.agent_frame),
                "reply": ("replies", stigmergy.reply_frame)}
    if name == "recall":
        from workbench.worlds.recall import metrics as recall

        return {"recall": ("recalls", lambda r: recall.recall_frame(r.worlds)),
                "world": ("worlds", lambda r: recall.world_frame(r.worlds))}
    if name == "collusion":
        from workbench.worlds.collusion import metrics as collusion

        return {"trajectory": ("trajectories", collusion.trajectory_frame),
                "episode": ("episodes", collusion.episode_frame)}
    return {}


def _unit_frame(run: RunSet) -> tuple[str, Builder]:
    units = run.kind.contrast_units(run.records)
    if units is None:
        return "worlds", _world_envelopes
    return str(units.unit), lambda _records: units.frame


def _world_envelopes(records: RunRecords) -> pd.DataFrame:
    """One row per world of any kind: its ids, validity and recorded metrics."""
    import pandas as pd

    rows = []
    for w in records.worlds:
        metrics = {k: v for k, v in (w.get("metrics") or {}).items() if not isinstance(v, (dict, list))}
        rows.append({**metrics, "world_id": w["world_id"], "cell_id": w["cell_id"],
                     "cell_label": w.get("cell_label") or w["cell_id"], "world_index": w.get("world_index"),
                     "valid": bool(w.get("valid")), "failed": bool(w.get("failed"))})
    return pd.DataFrame(rows)


STEP_FIELDS = ("seq", "agent", "role", "agent_step", "turn", "purpose", "episode", "phase", "t_issue", "t_done",
               "valid")


def _step_frame(records: RunRecords) -> pd.DataFrame:
    """One row per recorded step of any kind: who acted, when, the operation (where the
    kind parses one), validity, the route, latency, tokens and cost."""
    import pandas as pd

    rows = []
    for w in records.worlds:
        for st in records.steps.get(w["world_id"], []):
            reply: dict[str, Any] = st["reply"] if isinstance(st.get("reply"), dict) else {}
            usage = reply.get("usage") or {}
            op = st.get("op")
            rows.append({"world_id": w["world_id"], "cell_id": w["cell_id"],
                         "cell_label": w.get("cell_label") or w["cell_id"], "world_index": w.get("world_index"),
                         "world_valid": bool(w.get("valid")),
                         **{k: st.get(k) for k in STEP_FIELDS if k in st},
                         "op": op.get("op") if isinstance(op, dict) else None,
                         "route": (st.get("request") or {}).get("route"), "latency_s": reply.get("latency_s"),
                         "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
                         "cost_usd": reply.get("cost_usd"), "error": (reply.get("error") or {}).get("kind")
                         if isinstance(reply.get("error"), dict) else reply.get("error")})
    return pd.DataFrame(rows)


def _builders(run: RunSet) -> dict[str, tuple[str, Builder]]:
    out = {"unit": _unit_frame(run), **_kind_frames(run), "step": ("steps", _step_frame)}
    out.setdefault("world", ("worlds", _world_envelopes))
    return out


def frames(run: RunSet) -> dict[str, str]:
    """The frames a run set offers: name → what one row is."""
    return {name: row for name, (row, _) in _builders(run).items()}


def frame(run: RunSet, name: str = "unit") -> pd.DataFrame:
    """A tidy frame of the run set (see :func:`frames`): one row per unit, rows in the
    study's cell order, every factor of the design a column (``attrs``: ``unit``,
    ``factors``, ``varying``, and ``labels``: the report's name of each yes/no outcome). A copy:
    filter or add columns freely."""
    builders = _builders(run)
    if name not in builders:
        raise UnknownNameError(f"frame {name!r}: this {run.kind.name} run set has {', '.join(builders)}")
    if name not in run._frames:
        unit, build = builders[name]
        tidy = _tidy(build(run.records), run.design, unit)
        tidy.attrs["labels"] = {c: label(run, c) for c in tidy.columns if tidy[c].dtype == bool}
        run._frames[name] = tidy
    out = run._frames[name].copy()
    out.attrs = dict(run._frames[name].attrs)
    return out


def _tidy(df: pd.DataFrame, design: Design, unit: str) -> pd.DataFrame:
    """Rows in cell order (stable within a cell) and the design's factors as columns."""
    factors = [f for f in design.factors]
    out = df.copy()
    if "cell_id" in out.columns and len(design.cells):
        missing = [c for c in ["cell_label", *factors] if c not in out.columns]
        if missing:
            extra = design.frame[missing].rename_axis("cell_id").reset_index()
            out = out.merge(extra, on="cell_id", how="left")
        order = {c: i for i, c in enumerate(design.cells)}
        out = out.iloc[out["cell_id"].map(order).fillna(len(order)).argsort(kind="stable")].reset_index(drop=True)
    out.attrs = {"unit": unit, "factors": [f for f in factors if f in out.columns],
                 "varying": [f for f in design.varying if f in out.columns]}
    return out


def describe(**named: pd.DataFrame) -> pd.DataFrame:
    """What each frame holds, one row per frame (``describe(worlds=worlds, agents=agents)``):
    its rows, the factors that vary (what ``by=`` can group on besides them) and its
    yes/no outcomes (what ``rates`` counts)."""
    import pandas as pd

    rows = []
    for name, df in named.items():
        outcomes = [c for c in df.columns if df[c].dtype == bool and c not in ("valid", "failed", "simulated", "rescored")]
        rows.append({"frame": name, "one row per": str(df.attrs.get("unit", "row")).rstrip("s") or "row",
                     "rows": len(df), "factors that vary": ", ".join(df.attrs.get("varying") or []) or "none",
                     "yes/no outcomes": ", ".join(outcomes) or "none"})
    return pd.DataFrame(rows)


# -- tables ---------------------------------------------------------------------------------
def rates(frame: pd.DataFrame, metrics: str | Sequence[str], by: str | Sequence[str] = ("cell_label",),
          valid_only: bool = True) -> pd.DataFrame:
    """k/n of yes/no ``metrics`` per group of ``by`` (columns of ``frame``), over valid
    units with a 95 % Wilson interval, and the same over all units (``X:all``): one row
    per group, in first-seen order, with the group's units and valid units. A grouping
    that puts cells that differ in a factor into one row pools them: ``attrs["pooled"]``
    names those factors and the title says MARGINAL."""
    import pandas as pd

    from workbench.metrics.rates import rate_table

    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    by = [by] if isinstance(by, str) else list(by)
    absent = [c for c in [*by, *metrics] if c not in frame.columns]
    if absent:
        raise UnknownNameError(f"rates: no column {', '.join(map(repr, absent))} in this frame; it has "
                               f"{', '.join(map(str, frame.columns))}")
    unit = str(frame.attrs.get("unit") or "rows")
    parts = {m: rate_table(frame, m, by=by, valid_only=valid_only) for m in metrics}
    first = parts[metrics[0]]
    out = first[by].copy()
    if len(out):
        sizes = frame.groupby(by, sort=False, dropna=False).size()
        out[unit] = [int(v) for v in sizes.tolist()]
        out["valid"] = first["n"].astype(int).tolist()
    else:
        out[unit], out["valid"] = pd.Series(dtype=int), pd.Series(dtype=int)
    for m, t in parts.items():
        for col in ("k", "n", "k/n", "rate", "low", "high", "all"):
            out[f"{m}:{col}"] = t[col].tolist()
    pooled = _pooled(frame, by)
    names = ", ".join((frame.attrs.get("labels") or {}).get(m) or m.replace("_", " ") for m in metrics)
    title = f"{names} by {', '.join(by)}: k/n over valid {unit} (and over all {unit})"
    if pooled:
        title = f"MARGINAL over {', '.join(pooled)}: {title} (pools cells that differ in those factors)"
    others = [f for f in frame.attrs.get("factors") or [] if f not in by and f in frame.columns]
    constant = {f: str(frame[f].iloc[0]) for f in others if len(frame) and frame[f].astype(str).nunique() == 1}
    out.attrs = {"title": title, "by": by, "metrics": metrics, "unit": unit, "pooled": pooled, "constant": constant,
                 "empty_reason": f"no {unit} in this frame"}
    return out


def _pooled(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    """The factors that take more than one value inside some group of ``by``."""
    factors = [f for f in frame.attrs.get("varying") or [] if f not in by and f in frame.columns]
    if not len(frame) or not factors:
        return []
    spread = frame.groupby(list(by), sort=False, dropna=False)[factors].nunique(dropna=False).max()
    return [f for f in factors if int(spread[f]) > 1]


def contrasts(run: RunSet, metric: str | None = None, *, frame: pd.DataFrame | None = None,
              specs: Iterable[Any] | None = None, holm: bool = False) -> pd.DataFrame:
    """The study's matched contrasts (declared, else one per varying factor): one row per
    pair of cells that differ in the contrasted factor alone, both rates over valid units,
    the Newcombe difference B − A and the exact McNemar test over paired units, under the
    study's estimability rule. ``frame``: the kind's unit frame (:func:`frame` ``"unit"``)
    filtered or changed; ``specs``: contrasts of your own (mappings as in a study file:
    name, factor, levels, metric)."""
    from workbench.metrics.contrasts import ContrastSpec, Estimability, contrast_table, contrasts_for

    units = run.kind.contrast_units(run.records)
    if units is None:
        raise UnknownNameError(f"the {run.kind.name} world kind defines no contrast units (WorldKind.contrast_units)")
    if frame is not None:
        units = dataclasses.replace(units, frame=frame)
    chosen = contrasts_for(run.records, run.design) if specs is None else [
        s if isinstance(s, ContrastSpec) else ContrastSpec.from_mapping(s) for s in specs]
    rule = Estimability.of(run.records)
    t = contrast_table(units, run.design, chosen, metric=metric, holm=holm, rule=rule)
    t.attrs.update(metric_label=label(run, str(t.attrs.get("metric"))), unit=units.unit,
                   declared=[{"name": s.name, "factor": s.factor, "levels": list(s.levels or [])} for s in chosen],
                   estimability={"min_valid": rule.min_valid, "min_valid_share": rule.min_valid_share})
    return t


def findings(contrasts: pd.DataFrame, metric_label: str | None = None) -> pd.DataFrame:
    """A contrast table read (what the report's headline writes): one row per matched pair
    of cells with its direction (B higher, lower, not clearly different from A: the 95 %
    interval leaves out 0 or not; or not estimable, with the reason) and the pair in words."""
    import pandas as pd

    from workbench.metrics.contrasts import Estimability
    from workbench.views.run_report import contrast_findings, finding_line

    unit = str(contrasts.attrs.get("unit") or "units")
    body = contrasts.attrs.get("estimability")
    rule = Estimability(**body) if isinstance(body, Mapping) and "estimable" in contrasts.columns else None
    rows = [{"contrast": f.contrast, "held fixed": f.held_fixed, "A": f.a, "B": f.b, "direction": f.direction,
             "difference": f.difference, "p": f.p, "pairs": f.pairs, "reason": f.reason, "words": finding_line(f, unit)}
            for f in contrast_findings(contrasts, unit, rule, str(contrasts.attrs.get("metric") or ""))]
    out = pd.DataFrame(rows, columns=["contrast", "held fixed", "A", "B", "direction", "difference", "p", "pairs",
                                      "reason", "words"])
    out.attrs = {"metric_label": metric_label or contrasts.attrs.get("metric_label"), "unit": unit}
    return out


def tables(run: RunSet) -> dict[str, pd.DataFrame]:
    """The kind's named per-cell tables (what ``workbench metrics`` prints and exports)."""
    return dict(run.kind.metric_tables(run.records))


def table(run: RunSet, name: str) -> pd.DataFrame:
    """One of :func:`tables` by name."""
    named = tables(run)
    if name not in named:
        raise UnknownNameError(f"table {name!r}: this {run.kind.name} run set has {', '.join(named)}")
    return named[name]


def label(run: RunSet, metric: str) -> str:
    """A metric's display name, the one the report and the terminal use for it."""
    if run.kind.name == "stigmergy":
        from workbench.worlds.stigmergy.labels import label as stigmergy_label

        return stigmergy_label(metric)
    return OTHER_LABELS.get((run.kind.name, metric), metric.replace("_", " "))


# the recall and collusion reports' names for their headline metrics (the shared store's are in its labels module)
OTHER_LABELS = {("recall", "correct"): "recall accuracy", ("collusion", "ever_colluded"): "ever colluded",
                ("collusion", "ever_colluded_strict"): "ever colluded (strict)"}


# -- figures -------------------------------------------------------------------------------
def forest(contrasts: pd.DataFrame, metric_label: str | None = None,
           colour: Callable[[object], str] | None = None) -> go.Figure:
    """The forest plot of a contrast table: one point per matched pair of cells, B − A
    with its 95 % interval; pairs that could not be estimated are named under the title.
    ``colour``: a report's palette (each point in its B arm's colour)."""
    from workbench.views.forest import forest_figure

    return forest_figure(contrasts, metric_label=metric_label or contrasts.attrs.get("metric_label"), colour=colour)


def rates_figure(table: pd.DataFrame, metric: str, colour: str | None = None, metric_label: str | None = None,
                 palette: Callable[[object], str] | None = None) -> go.Figure:
    """A :func:`rates` table as a dot plot: one row per group, the rate of ``metric`` with
    its 95 % Wilson interval; ``colour`` names one of the grouping columns, drawn as one
    series per level (in ``palette``'s colours where given), the others label the rows."""
    import plotly.graph_objects as go

    from workbench.views.escape import esc_plot

    by = list(table.attrs.get("by") or [])
    if f"{metric}:rate" not in table.columns:
        raise UnknownNameError(f"rates_figure: {metric!r} is not a metric of this table; it has "
                               f"{', '.join(table.attrs.get('metrics') or [])}")
    if colour is not None and colour not in by:
        raise UnknownNameError(f"rates_figure: colour={colour!r} is not one of the table's groupings {by}")
    rows = [c for c in by if c != colour] or by
    name = metric_label or metric.replace("_", " ")
    unit = str(table.attrs.get("unit") or "units")
    ok = table[table[f"{metric}:n"] > 0] if len(table) else table
    labels = ["; ".join(str(r[c]) if c == "cell_label" else f"{c}={r[c]}" for c in rows) for _, r in ok.iterrows()]
    fig = go.Figure()
    series = list(dict.fromkeys(ok[colour])) if colour else [None]
    for level in series:
        part = ok[ok[colour] == level] if colour else ok
        ys = [lab for lab, keep in zip(labels, (ok[colour] == level) if colour else [True] * len(ok)) if keep]
        rate = part[f"{metric}:rate"].astype(float)
        fig.add_trace(go.Scatter(
            x=rate.tolist(), y=[esc_plot(y, 80) for y in ys], mode="markers",
            name=esc_plot(f"{colour} = {level}" if colour else name, 60),
            marker={"size": 10, **({"color": palette(level)} if palette and colour else {})},
            error_x={"type": "data", "symmetric": False,
                     "array": (part[f"{metric}:high"].astype(float) - rate).tolist(),
                     "arrayminus": (rate - part[f"{metric}:low"].astype(float)).tolist()},
            customdata=part[f"{metric}:k/n"].tolist(),
            hovertemplate="%{y}<br>%{x:.0%} (%{customdata})<extra></extra>"))
    empty = len(table) - len(ok)
    note = f"<br><sup>{empty} group(s) with no valid {esc_plot(unit)} left out</sup>" if empty else ""
    longest = max((len(x) for x in labels), default=10)
    fig.update_layout(
        title={"text": esc_plot(f"{name} by {', '.join(by)}: share of valid {unit}, 95% Wilson") + note},
        template="plotly_white", height=180 + 28 * max(len(set(labels)), 1), showlegend=colour is not None,
        xaxis={"title": {"text": esc_plot(f"{name} (share of valid {unit})")}, "tickformat": ".0%",
               "range": [-0.02, 1.02]},
        yaxis={"autorange": "reversed", "type": "category", "automargin": True},
        margin={"l": min(40 + 6 * longest, 420), "t": 80 if note else 60})
    return fig


# -- showing a table ---------------------------------------------------------------------------
def show(table: pd.DataFrame, title: str = "", caption: str = "", labels: Mapping[str, str] | None = None,
         **options: Any) -> Any:
    """A table as a reader sees it in the report (rates as one phrase, metric names for
    codes, constant columns lifted into the caption): an HTML display object.
    ``options`` go to :func:`workbench.views.readable.readable_html` (``keep``, ``hide``,
    ``definitions``, ``constant``)."""
    from IPython.display import HTML

    from workbench.metrics.design import constant_text
    from workbench.views.readable import readable_html

    options.setdefault("constant", constant_text(table))
    return HTML(readable_html(table, caption=caption, title=title or str(table.attrs.get("title") or ""),
                              labels=labels, **options))
