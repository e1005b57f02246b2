"""The world explorer behind notebooks/world.ipynb: one world of the shared-store
kind, step by step, either re-run from a study (widgets set the cell's factors,
the route and the world number) or opened from a run directory (dropdowns for
cell and world; shown from its records, no model called).

An explorer that cannot lie:

- every view (summary, timeline, the step with the store after it, transcripts)
  is one ``Output`` whose ``outputs`` are *replaced whole* on every change,
  never appended to, so nothing of the previous world can remain; when the
  settings change and the world is not re-run (a real model waits for Run), the
  views are emptied and say so;
- a busy line says what is running;
- a simulated route (:func:`workbench.routes.is_simulated_route`) re-runs on
  every change; any other route (a catalogue name, ``local/...``, a raw litellm
  route, typed or picked) runs only when Run is pressed;
- the step slider drives the timeline's highlight and the store view together.

Views are drawn by assigning ``Output.outputs`` from the kernel, not by capturing
``with output:``: captured output makes nbclient (papermill) send widget-state
messages on the shell socket it is polling for the cell's reply, which can lose
the wake-up and stall the cell until its timeout (nbclient issue 312).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.explorers.common import RecordedPicker, StudyCellDropdown
from workbench.params import Cell, Study, load_study
from workbench.routes import is_simulated_route
from workbench.views.escape import as_text
from workbench.views.markup import Markup, render
from workbench.views.panel import Missing, Panel, SliderWorld, missing_run, note_html
from workbench.worlds.stigmergy.labels import label
from workbench.worlds.stigmergy.simulated import PROFILES
from workbench.worlds.stigmergy.spec import CONDITIONS

FACTORS: dict[str, tuple[Any, ...]] = {
    "condition": CONDITIONS,
    "clauses": ("both", "persist-only", "recheck-only", "none"),
    "scheduler": ("async", "lockstep"),
    "parser": ("strict", "lenient"),
    # the paper's open questions (issue 22): vocabulary, what writers know of readers, world size
    "vocabulary": ("named", "own-only", "withheld"),
    "reader_signal": ("none", "told", "receipts"),
    "pairs": (1, 2, 3, 4),
    "solos": (0, 1, 2, 3, 4, 6),
}
VIEWS = ("summary", "timeline", "step", "transcripts")


def _with(options: tuple[Any, ...], value: Any) -> list[Any]:
    """A dropdown's options with a cell's own value among them (a study may use any size)."""
    return list(options) if value in options else sorted([*options, value]) if isinstance(value, int) \
        else [*options, value]
SUMMARY_METRICS = ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write", "exposure",
                   "valid")
RUN_COMMAND = ".venv/bin/workbench run params/smoke.yaml --out outputs/smoke"  # a run set to open (or outputs/demo)


def _metric(name: str) -> Any:
    return lambda w: (w.get("metrics") or {}).get(name)


#: recorded mode's outcome columns (the first is counted per cell in the cell list), named as every surface names them
OUTCOMES = (*((label(m), _metric(m)) for m in ("cross_agent_access", "joint_success", "pair_write")),
            ("valid", lambda w: w.get("valid")))


# -- views as outputs ------------------------------------------------------------------
def route_options(extra: Iterable[str] = ()) -> list[str]:
    """The shared-store profiles, the given routes, the catalogue's models and the local ones."""
    from workbench.models.catalogue import route_choices

    return route_choices([f"sim/{p}" for p in sorted(PROFILES)], extra)


# -- one world, drawn -----------------------------------------------------------------
class _WorldViews(SliderWorld):
    """Draws one world (``self.world``, ``self.steps``) into the panel; the step slider
    redraws the timeline's highlight and the step/store view together."""

    world: dict[str, Any]
    steps: list[dict[str, Any]]
    source: str  # one line: where the world came from

    widget: Any
    title = "World explorer"

    def describe(self) -> str:
        shown = (f"world {self.world.get('world_id')} ({self.world.get('cell_label', '')})" if self.world
                 else "no world")
        return f"{self.title} (interactive: needs a running kernel with ipywidgets); when this cell ran it showed {shown}"

    def _init_views(self) -> None:
        import ipywidgets as W

        self.panel = Panel(VIEWS)
        self.views = self.panel.views
        self.status = self.panel.status
        self.world = {}
        self.steps = []
        self.source = ""
        self.step = W.IntSlider(value=0, min=0, max=0, description="step", continuous_update=False,
                                layout={"width": "60%"})
        self.step.observe(lambda _change: self._draw_step(), names="value")
        self.slider = self.step

    def _set_world(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        from workbench.worlds.stigmergy.views.steps import ordered

        self._show_world(world, ordered(steps), len(steps) - 1)

    def _draw(self) -> None:
        from workbench.worlds.stigmergy.views import transcripts_html

        self.panel.show("summary", self._summary_html())
        self.panel.show("transcripts", transcripts_html(self.world, self.steps))
        self._draw_step()

    def _summary_html(self) -> Markup:
        w = self.world
        m = w.get("metrics") or {}
        return render("explorer_stigmergy_summary.html", world_id=as_text(w.get("world_id")),
                      label=as_text(w.get("cell_label", "")), metrics=[(k, str(m.get(k))) for k in SUMMARY_METRICS],
                      failed=as_text((w.get("failed") or {}).get("cause")) if w.get("failed") else "",
                      simulated=any(is_simulated_route(a.get("route", "")) for a in w.get("agents") or []),
                      source=self.source)

    def current_step(self) -> dict[str, Any] | None:
        if not self.steps:
            return None
        return self.steps[min(self.step.value, len(self.steps) - 1)]

    def _draw_step(self) -> None:
        from workbench.worlds.stigmergy.views import step_timeline

        if not self.world:
            return
        s = self.current_step()
        fig = step_timeline(self.world, self.steps)
        if s is not None:
            highlight_step(fig, self.world, self.steps, s)
        self.panel.show("timeline", fig)
        self.panel.show("step", self._step_html(s))

    def _step_html(self, s: dict[str, Any] | None) -> Markup:
        from workbench.worlds.stigmergy.views import store_at_step
        from workbench.worlds.stigmergy.views.steps import effect_summary, op_kind

        if s is None:
            return note_html("This world has no steps.")
        store = store_at_step(self.world, self.steps, s["seq"])
        reply = s.get("reply") or {}
        lines = [f"{s['agent']} ({s.get('role', '')}) · own step {s.get('agent_step')} · t={s.get('t_done')}",
                 f"operation: {op_kind(s)} · {effect_summary(self.world, s)}",
                 f"reply: {(reply.get('text') or reply.get('error') or '')[:400]}",
                 f"result shown: {s.get('result')}"]
        # the store table is pandas' HTML with every value escaped (escape=True)
        return render("explorer_stigmergy_step.html", seq=as_text(s["seq"]), n_steps=len(self.steps),
                      world_id=as_text(self.world.get("world_id")), lines=lines,
                      store=Markup(store.to_html(index=False, escape=True)))


def highlight_step(fig: Any, world: dict[str, Any], steps: list[dict[str, Any]], step: dict[str, Any]) -> Any:
    """Mark ``step`` on a :func:`step_timeline` figure: a vertical line at its time and a
    ring on its agent's lane (a trace named ``current step``)."""
    import plotly.graph_objects as go

    from workbench.worlds.stigmergy.views.steps import agent_lanes

    lanes = [agent for agent, _ in agent_lanes(world, steps)]
    y = lanes.index(step["agent"]) if step["agent"] in lanes else 0
    fig.add_vline(x=step["t_done"], line={"color": "#f2b600", "width": 2, "dash": "dot"})
    fig.add_trace(go.Scatter(x=[step["t_done"]], y=[y], mode="markers", name=f"current step ({step['seq']})",
                             meta="current step", hoverinfo="skip",
                             marker={"symbol": "circle-open", "size": 30, "color": "#f2b600", "line": {"width": 3}}))
    return fig


# -- re-run from a study -----------------------------------------------------------------
class WorldExplorer(_WorldViews, StudyCellDropdown):
    """One world of a study, re-run for the settings the widgets hold. ``widget`` is what
    a notebook displays; ``world``/``steps`` are the records of the world on show; the
    cell dropdown names the cell the settings make (:class:`StudyCellDropdown`)."""

    def __init__(self, study: Study, cell_index: int = 0, world_index: int = 0, model: str | None = None) -> None:
        import ipywidgets as W

        self.study = study
        self.cell = study.cells[cell_index]
        self._quiet = False
        self._init_views()
        spec = self.cell.spec
        self.controls: dict[str, Any] = {
            "cell": W.Dropdown(options=self._cell_options(), value=self.cell.index, description="cell",
                               layout={"width": "60%"}),
        }
        for name, opts in FACTORS.items():
            self.controls[name] = W.Dropdown(options=_with(opts, getattr(spec, name)), value=getattr(spec, name),
                                             description=name)
        extra = [c.spec.model for c in study.cells] + [f"sim/{p}" for p in study.profiles]
        self.controls["model"] = W.Combobox(
            value=model or spec.model, options=route_options(extra), ensure_option=False, continuous_update=False,
            description="model", placeholder="sim/NAME, a catalogue name, local/NAME or provider/model")
        self.controls["world"] = W.BoundedIntText(value=world_index, min=0, max=10**6, description="world #")
        self.run_button = W.Button(description="Run", button_style="primary", icon="play",
                                   tooltip="run this world (a real model is only called when you press Run, after "
                                           "the preflight `workbench run` makes)")
        self.run_button.on_click(lambda _b: self.rerun())
        self.controls["cell"].observe(self._cell_changed, names="value")
        for name in (*FACTORS, "model", "world"):
            self.controls[name].observe(self._changed, names="value")
        c = self.controls
        self.widget = W.VBox([
            W.HTML(render("explorer_intro.html", title="World explorer", prefix="sim")),
            W.HBox([c["cell"], c["world"]]),
            W.HBox([c["condition"], c["clauses"], c["scheduler"]]),
            W.HBox([c["vocabulary"], c["reader_signal"], c["pairs"], c["solos"]]),
            W.HBox([c["parser"], c["model"], self.run_button]),
            self.status, self.views["summary"], self.views["timeline"], self.step, self.views["step"],
            self.views["transcripts"],
        ])
        self._changed()

    @classmethod
    def from_study(cls, path: str | Path, cell: int = 0, world_index: int = 0,
                   model: str | None = None) -> WorldExplorer:
        return cls(load_study(path), cell, world_index, model or None)

    def current_cell(self) -> Cell:
        """The cell the widgets' factors and route make (validated): the study's own cell
        when they are one, else the chosen cell changed, its label dropped so that the
        derived one names the settings."""
        update: dict[str, Any] = {k: self.controls[k].value for k in FACTORS}
        update["model"] = str(self.controls["model"].value).strip()
        data = self.cell.spec.model_dump(mode="json", exclude_unset=True)
        if any(getattr(self.cell.spec, k) != v for k, v in update.items()):
            data.pop("label", None)
        return self._as_cell(self.study.kind.cell_spec.model_validate({**data, **update}))

    def routes(self) -> set[str]:
        """Every route the current settings would call (agents, and the study's monitor)."""
        routes = set(self.study.kind.routes(self.current_cell().spec))
        if self.study.monitor is not None:
            routes.add(self.study.monitor.model)
        return routes

    def simulated(self) -> bool:
        return all(is_simulated_route(r) for r in self.routes())

    def _cell_changed(self, _change: Any = None) -> None:
        if not self._picked_study_cell():
            return
        self.cell = self.study.cells[int(self.controls["cell"].value)]
        self._quiet = True
        try:
            for name in (*FACTORS, "model"):
                value = getattr(self.cell.spec, name)
                if name in FACTORS and value not in self.controls[name].options:  # e.g. a cell of 5 solos
                    self.controls[name].options = _with(FACTORS[name], value)
                self.controls[name].value = value
        finally:
            self._quiet = False
        self._changed()

    def _changed(self, _change: Any = None) -> None:
        """Any setting changed: the cell dropdown names the cell they make; re-run at once
        when every route is simulated, else empty the views and wait for Run."""
        if self._quiet:
            return
        if not str(self.controls["model"].value).strip():
            self._sync_cell(None, "(no route chosen)")
            self._forget("Choose or type a route for the model.")
            return
        try:
            cell = self.current_cell()
        except Exception as exc:  # noqa: BLE001 - a bad setting is shown, not raised into the widget loop
            self._sync_cell(None)
            self._fail("these settings do not make a cell", exc)
            return
        self._sync_cell(cell)
        if self.simulated():
            self.rerun()
            return
        real = ", ".join(sorted(r for r in self.routes() if not is_simulated_route(r)))
        self._forget(f"Settings changed; {real} is a real model: press Run to run this world (each step is a "
                     f"model call, paid for on a hosted model).")
        self.panel.idle("waiting for Run")

    def run_index(self) -> int:
        return int(self.controls["world"].value)

    def run_what(self, cell: Any, index: int) -> str:
        return f"world {index} of {cell.label}"


# -- open a recorded world -----------------------------------------------------------------
class RecordedWorldExplorer(_WorldViews, RecordedPicker):
    """A world of a run directory, shown from its records (no model is called):
    dropdowns for cell and world, a filter per varying factor, each world's outcomes
    and its page in `workbench view`. ``verify`` replays it through the engine with
    its recorded replies (``workbench replay --verify``)."""

    title = "Recorded-world explorer"
    outcome_columns = OUTCOMES

    def __init__(self, run_dir: str | Path, cell: str = "", world: str = "") -> None:
        import ipywidgets as W

        from workbench.records import load_run

        self._quiet = False
        self._init_views()
        self._pick_controls(load_run(run_dir), cell, world)
        self.widget = W.VBox([
            W.HTML(render("explorer_intro.html", title="Recorded worlds", run_dir=str(self.records.dir), what="world")),
            self.filter_box(), W.HBox([self.controls["cell"], self.controls["world"], self.verify_button]),
            self.jump, self.outcomes_view,
            self.status, self.views["summary"], self.views["timeline"], self.step, self.views["step"],
            self.views["transcripts"],
        ])
        self._open()

    @classmethod
    def from_run(cls, run_dir: str | Path, cell: str = "", world: str = "") -> RecordedWorldExplorer:
        return cls(run_dir, cell, world)

    def _world_options(self, cell_id: str) -> list[tuple[str, str]]:
        return [(f"{w['world_id']}" + ("" if w.get("valid") else " (invalid)"), w["world_id"])
                for w in self.records.worlds if w["cell_id"] == cell_id]

    def _open(self) -> None:
        if self._quiet:
            return
        wid = self.controls["world"].value
        if not wid:
            self._forget(self._empty_note())
            self._picked()
            self.panel.idle()
            return
        self.panel.busy(f"opening {wid} ...")
        self.source = f"recorded in {self.records.dir} (run {self.records.world(wid).get('run')}); no model called"
        self._set_world(self.records.world(wid), self.records.steps.get(wid, []))
        self._picked()
        self.panel.idle(f"world {wid} ({len(self.steps)} steps, from the records)")

    def verify(self) -> list[str]:
        """Replay the world on show through the engine with its recorded replies; the
        differences (none: identical to the records) are shown in the busy line."""
        from workbench.replay import verify_world

        wid = self.world.get("world_id")
        if not wid:
            return []
        self.panel.busy(f"replaying {wid} through the engine ...")
        diffs = verify_world(self.records, wid)
        self.panel.idle(f"replay of {wid}: " + ("identical to the records" if not diffs else
                                                 f"{len(diffs)} differences: " + "; ".join(diffs[:5])))
        return diffs


def open_explorer(study: str | Path = "", run_dir: str | Path = "", *, cell: int | str = 0, world_index: int = 0,
                  world: str = "", model: str | None = None) -> WorldExplorer | RecordedWorldExplorer | Missing:
    """What world.ipynb shows (its ``widget``): a recorded world of ``run_dir`` when
    given, else a world of ``study`` re-run for the widgets' settings. A missing run
    directory is a note naming the command that makes one, not a traceback."""
    if run_dir:
        return (missing_run(run_dir, RUN_COMMAND)
                or RecordedWorldExplorer.from_run(run_dir, cell if isinstance(cell, str) else "", world))
    return WorldExplorer.from_study(study, int(cell), world_index, model or None)
