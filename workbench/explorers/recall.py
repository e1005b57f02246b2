"""The recall world's explorer (notebooks/recall_world.ipynb): one world turn by
turn, either re-run from a study (cell, script, condition, route, repetition) or
opened from a run directory (dropdowns for cell and world; shown from its records,
no model called). The one recall module that drives the engine (the import
contracts exempt a kind's explorer by name).

An explorer that cannot lie, as the shared store's (:mod:`workbench.explorers.stigmergy`):
every view is one ``Output`` whose ``outputs`` are replaced whole on every change
(assigned from the kernel, never captured with ``with output:``, which under
papermill makes nbclient write to the shell socket it polls and can stall a cell
until its timeout); a busy line; a simulated route re-runs on every change, any
other route only when Run is pressed; the turn slider moves the timeline's
highlight and the memory view together. Script and model text is escaped.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.errors import InputError, UnknownNameError
from workbench.explorers.common import RecordedPicker, StudyCellDropdown
from workbench.routes import is_simulated_route
from workbench.views.escape import as_text
from workbench.views.markup import Markup, render
from workbench.views.panel import Missing, Panel, SliderWorld, error_html, missing_run
from workbench.worlds.recall.outcomes import rescore
from workbench.worlds.recall.views import context_html, memory_at_turn, retrieval_ranks, statements_html, turn_timeline

VIEWS = ("summary", "timeline", "turn", "retrieval", "context", "calls")
RUN_COMMAND = ".venv/bin/workbench run params/recall-smoke.yaml --out outputs/recall-smoke"


def recalls_right(world: dict[str, Any]) -> tuple[int, int]:
    """(recalls right, recalls) of a world, re-scored by today's rules as every table and
    the summary count them (a world recorded under older rules reads the same everywhere)."""
    recalls = world.get("recalls") or []
    return sum(1 for r in recalls if rescore(world, r).correct), len(recalls)


def _accuracy(world: dict[str, Any]) -> float | None:
    right, n = recalls_right(world)
    return right / n if n else None


def _right_text(world: dict[str, Any]) -> str:
    right, n = recalls_right(world)
    return f"{right}/{n}"


#: recorded mode's outcome columns (the first is averaged over each cell's valid worlds in the cell list)
OUTCOMES = (("accuracy", _accuracy), ("recalls right", _right_text), ("valid", lambda w: w.get("valid")))


# -- views as outputs --------------------------------------------------------------------
def route_options(extra: Iterable[str] = ()) -> list[str]:
    """The recall profiles, the given routes, the catalogue's models and the local ones."""
    from workbench.models.catalogue import route_choices
    from workbench.worlds.recall.simulated import PREFIX, PROFILES

    return route_choices([f"{PREFIX}/{p}" for p in sorted(PROFILES)], extra)


# -- one world, drawn -----------------------------------------------------------------------
def highlight_turn(fig: Any, turn: int) -> Any:
    """Mark ``turn`` on a :func:`turn_timeline` figure with a vertical band."""
    fig.add_vrect(x0=turn - 0.4, x1=turn + 0.4, fillcolor="#f2b600", opacity=0.25, line_width=0,
                  annotation_text=f"turn {turn}", annotation_position="top left")
    return fig


class _WorldViews(SliderWorld):
    """Draws one recall world into the panel; the turn slider redraws the timeline's
    highlight and the memory view together."""

    world: dict[str, Any]
    steps: list[dict[str, Any]]
    source: str

    widget: Any
    title = "Recall world explorer"

    def describe(self) -> str:
        w = self.world
        shown = (f"world {w.get('world_id')}: script {(w.get('script') or {}).get('script_id')}, repetition "
                 f"{w.get('repetition')} ({w.get('cell_label', '')})" if w else "no world")
        return f"{self.title} (interactive: needs a running kernel with ipywidgets); when this cell ran it showed {shown}"

    def _init_views(self) -> None:
        import ipywidgets as W

        self.panel = Panel(VIEWS)
        self.views = self.panel.views
        self.status = self.panel.status
        self.world, self.steps, self.source = {}, [], ""
        self.turn = W.IntSlider(value=0, min=0, max=0, description="turn", continuous_update=False,
                                layout={"width": "60%"})
        self.turn.observe(lambda _change: self._draw_turn(), names="value")
        self.slider = self.turn

    def _set_world(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        turns = [t["turn"] for t in world.get("turns") or []]
        self._show_world(world, sorted(steps, key=lambda s: s["seq"]), max(turns, default=0))

    def _draw(self) -> None:
        self.panel.show("summary", self._summary_html())
        self.panel.show("retrieval", retrieval_ranks(self.world))
        wid = as_text(self.world.get("world_id"))
        # the kind's views escape the script and model text they hold
        self.panel.show("context", render("explorer_recall_titled.html", title="what each recalling agent had in "
                                          "context", world_id=wid, body=Markup(context_html(self.world))))
        self.panel.show("calls", render("explorer_recall_titled.html", title="every model call", world_id=wid,
                                        body=Markup(statements_html(self.world, self.steps))))
        self._draw_turn()

    def _summary_html(self) -> Markup:
        w = self.world
        right, n = recalls_right(w)
        script = w.get("script") or {}
        return render("explorer_recall_summary.html", world_id=as_text(w.get("world_id")),
                      label=as_text(w.get("cell_label", "")), script_id=as_text(script.get("script_id")),
                      domain=as_text(script.get("domain")), repetition=as_text(w.get("repetition")), right=right,
                      recalls=n, valid=str(w.get("valid")),
                      failed=as_text((w.get("failed") or {}).get("cause")) if w.get("failed") else "",
                      simulated=any(is_simulated_route(a.get("route", "")) for a in w.get("agents") or []),
                      source=self.source)

    def _verdict(self, recall: dict[str, Any]) -> str:
        scored = rescore(self.world, recall)
        return "hedged" if scored.hedged else "right" if scored.correct else "wrong"

    def _draw_turn(self) -> None:
        if not self.world:
            return
        t = int(self.turn.value)
        self.panel.show("timeline", highlight_turn(turn_timeline(self.world), t))
        self.panel.show("turn", self._turn_html(t))

    def _turn_html(self, t: int) -> Markup:
        w = self.world
        turn = next((x for x in w.get("turns") or [] if x["turn"] == t), None)
        recall = (next((r for r in w.get("recalls") or [] if r["turn"] == t), None) if turn is not None else None)
        written = [{"refused": bool(r.get("refused")), "text": as_text(r.get("text")),
                    "removed": [{"entry_id": as_text(g.get("entry_id")), "text": as_text(g.get("text"))}
                                for g in r.get("removed") or []]}
                   for r in w.get("memory_log") or [] if r.get("turn") == t]
        rows = [[as_text(v) for v in (m.get("entry_id"), m.get("author_role"), m.get("authority"), m.get("turn"),
                                      m.get("namespace") or "", m.get("text"))] for m in memory_at_turn(w, t)]
        retrieval = w.get("retrieval") or {}
        memory = ("shared memory" if retrieval.get("memory", True) else
                  f"shared memory (none in condition {as_text((w.get('cell') or {}).get('condition'))})")
        return render("explorer_recall_turn.html", turn=t, world_id=as_text(w.get("world_id")),
                      role=None if turn is None else as_text(turn["role"]),
                      recall=None if recall is None else {
                          "failure_mode": as_text(recall.get("failure_mode")), "query": as_text(recall.get("query")),
                          "answer": as_text(recall.get("answer")), "verdict": self._verdict(recall)},
                      reply=None if turn is None or turn.get("reply") is None else as_text(turn.get("reply")),
                      written=written, rows=rows, memory=memory)


# -- re-run from a study -------------------------------------------------------------------
def explore_world(study: str | Path, *, script_id: str, condition: str, model: str | None = None,
                  repetition: int = 0, **cell_overrides: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one world of a recall study for one script, as the study would run it: the
    study's defaults, then the given condition/model/overrides; world index =
    script position + repetition × number of scripts (so the seed is the study's)."""
    from workbench.aio import run_sync
    from workbench.params import Cell, cell_hash, load_study
    from workbench.study import run_one_world
    from workbench.worlds.recall.world import cell_scripts

    s = load_study(study)
    base = dict(s.raw.get("defaults") or {})
    base.update({"condition": condition, **({"model": model} if model else {}), **cell_overrides})
    spec = s.kind.cell_spec.model_validate(base)
    scripts = cell_scripts(spec, s.base_dir)
    ids = [x.script_id for x in scripts]
    if script_id not in ids:
        raise UnknownNameError(f"no script {script_id!r} in {spec.scripts}; scripts: {', '.join(ids)}")
    index = ids.index(script_id) + repetition * len(ids)
    cell = Cell(cell_hash(spec), 0, spec, "explorer", s.kind.describe_cell(spec))
    outcome = run_sync(run_one_world(s, cell, index))
    return outcome.world, outcome.steps


class RecallExplorer(_WorldViews, StudyCellDropdown):
    """One world of a recall study, re-run for the settings the widgets hold: the
    cell (its spec), then the script, condition, route and repetition set here; the
    cell dropdown names the cell the settings make (:class:`StudyCellDropdown`)."""

    def __init__(self, study: str | Path, *, cell: int | None = None, script_id: str = "", condition: str = "",
                 model: str = "", repetition: int = 0) -> None:
        import ipywidgets as W

        from workbench.params import load_study
        from workbench.worlds.recall.spec import CONDITIONS

        self.study = load_study(study)
        if cell is None:  # the first cell with this condition and route (exact scoring first), else the first
            fits = [c for c in self.study.cells if (not condition or c.spec.condition == condition)
                    and (not model or c.spec.model == model)]
            fits.sort(key=lambda c: c.spec.scoring != "exact")
            cell = fits[0].index if fits else 0
        self.cell = self.study.cells[cell]
        self._quiet = False
        self._init_views()
        spec = self.cell.spec
        ids = self._script_ids(spec)
        self.controls: dict[str, Any] = {
            "cell": W.Dropdown(options=self._cell_options(), value=self.cell.index, description="cell",
                               layout={"width": "60%"}),
            "script": W.Dropdown(options=ids, value=script_id if script_id in ids else ids[0], description="script"),
            "condition": W.Dropdown(options=list(CONDITIONS), value=condition or spec.condition,
                                    description="condition"),
            "model": W.Combobox(value=model or spec.model, options=route_options(c.spec.model for c in self.study.cells),
                                ensure_option=False, continuous_update=False, description="model",
                                placeholder="sim-recall/NAME, a catalogue name, local/NAME or provider/model"),
            "repetition": W.BoundedIntText(value=repetition, min=0, max=999, description="repetition"),
        }
        self.run_button = W.Button(description="Run", button_style="primary", icon="play",
                                   tooltip="run this world (a real model is only called when you press Run, after "
                                           "the preflight `workbench run` makes)")
        self.run_button.on_click(lambda _b: self.rerun())
        self.controls["cell"].observe(self._cell_changed, names="value")
        for name in ("script", "condition", "model", "repetition"):
            self.controls[name].observe(self._changed, names="value")
        c = self.controls
        self.widget = W.VBox([
            W.HTML(render("explorer_intro.html", title="Recall world explorer", prefix="sim-recall")),
            c["cell"], W.HBox([c["script"], c["condition"]]), W.HBox([c["model"], c["repetition"], self.run_button]),
            self.status, self.views["summary"], self.views["timeline"], self.turn, self.views["turn"],
            self.views["retrieval"], self.views["context"], self.views["calls"],
        ])
        self._changed()

    def _script_ids(self, spec: Any) -> list[str]:
        from workbench.worlds.recall.world import cell_scripts

        return [x.script_id for x in cell_scripts(spec, self.study.base_dir)]

    def current_cell(self) -> Any:
        """The cell this condition and route make (validated): the study's own cell when
        they are one, else the chosen cell changed, its label dropped so that the derived
        one names the settings."""
        update = {"condition": self.controls["condition"].value, "model": str(self.controls["model"].value).strip()}
        data = self.cell.spec.model_dump(mode="json", exclude_unset=True)
        if any(getattr(self.cell.spec, k) != v for k, v in update.items()):
            data.pop("label", None)
        return self._as_cell(self.study.kind.cell_spec.model_validate({**data, **update}))

    def routes(self) -> set[str]:
        routes = set(self.study.kind.routes(self.current_cell().spec))
        if self.study.monitor is not None:
            routes.add(self.study.monitor.model)
        return routes

    def simulated(self) -> bool:
        return all(is_simulated_route(r) for r in self.routes())

    def world_index(self) -> int:
        ids = list(self.controls["script"].options)
        return ids.index(self.controls["script"].value) + int(self.controls["repetition"].value) * len(ids)

    def _cell_changed(self, _change: Any = None) -> None:
        if not self._picked_study_cell():
            return
        self.cell = self.study.cells[int(self.controls["cell"].value)]
        self._quiet = True
        try:
            ids = self._script_ids(self.cell.spec)
            keep = self.controls["script"].value
            self.controls["script"].options = ids
            self.controls["script"].value = keep if keep in ids else ids[0]
            self.controls["condition"].value = self.cell.spec.condition
            self.controls["model"].value = self.cell.spec.model
        finally:
            self._quiet = False
        self._changed()

    def _changed(self, _change: Any = None) -> None:
        if self._quiet:
            return
        if not str(self.controls["model"].value).strip():
            self._sync_cell(None, "(no route chosen)")
            self._forget("Choose or type a route for the model.")
            return
        try:
            self._sync_cell(self.current_cell())
            simulated = self.simulated()
        except Exception as exc:  # noqa: BLE001 - a bad setting is shown, not raised into the widget loop
            self._sync_cell(None)
            self._forget()
            self.panel.show("summary", error_html("these settings do not make a cell", exc))
            return
        if simulated:
            self.rerun()
            return
        real = ", ".join(sorted(r for r in self.routes() if not is_simulated_route(r)))
        self._forget(f"Settings changed; {real} is a real model: press Run to run this world (each turn is a model "
                     "call, paid for on a hosted model).")
        self.panel.idle("waiting for Run")

    RUN_UNIT = "model calls"

    def run_index(self) -> int:
        return self.world_index()

    def run_what(self, cell: Any, index: int) -> str:
        return f"script {self.controls['script'].value}, repetition {self.controls['repetition'].value} of {cell.label}"


# -- open a recorded world -----------------------------------------------------------------
class RecordedRecallExplorer(_WorldViews, RecordedPicker):
    """A recall world of a run directory, shown from its records (no model called):
    dropdowns for cell and world, a filter per varying factor, each world's accuracy
    and its page in `workbench view`; ``verify`` replays it through the engine."""

    title = "Recorded recall-world explorer"
    outcome_columns = OUTCOMES

    def __init__(self, run_dir: str | Path, cell: str = "", world: str = "") -> None:
        import ipywidgets as W

        from workbench.records import load_run

        records = load_run(run_dir)
        if not records.worlds:
            raise InputError(f"{run_dir} holds no finished world yet")
        self._quiet = False
        self._init_views()
        self._pick_controls(records, cell, world)
        self.widget = W.VBox([
            W.HTML(render("explorer_intro.html", title="Recorded recall worlds", run_dir=str(records.dir),
                          what="world")),
            self.filter_box(), self.controls["cell"], W.HBox([self.controls["world"], self.verify_button]),
            self.jump, self.outcomes_view,
            self.status, self.views["summary"], self.views["timeline"], self.turn, self.views["turn"],
            self.views["retrieval"], self.views["context"], self.views["calls"],
        ])
        self._open()

    def _world_options(self, cell_id: str) -> list[tuple[str, str]]:
        out = []
        for w in self.records.worlds:
            if w["cell_id"] == cell_id:
                script = (w.get("script") or {}).get("script_id", "")
                out.append((f"{w['world_id']} · {script} · rep {w.get('repetition')}"
                            + ("" if w.get("valid") else " (invalid)"), w["world_id"]))
        return out

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
        world = self.records.world(wid)
        self.source = f"recorded in {self.records.dir} (run {world.get('run')}); no model called"
        self._set_world(world, self.records.steps.get(wid, []))
        self._picked()
        self.panel.idle(f"world {wid} ({len(self.steps)} model calls, from the records)")

    def verify(self) -> list[str]:
        """Replay the world on show through the engine with its recorded replies."""
        from workbench.replay import verify_world

        wid = self.world.get("world_id")
        if not wid:
            return []
        self.panel.busy(f"replaying {wid} through the engine ...")
        diffs = verify_world(self.records, wid)
        self.panel.idle(f"replay of {wid}: " + ("identical to the records" if not diffs else
                                                 f"{len(diffs)} differences: " + "; ".join(diffs[:5])))
        return diffs


def open_explorer(study: str | Path = "", run_dir: str | Path = "", *, cell: int | str | None = None, script_id: str = "",
                  condition: str = "", model: str = "", repetition: int = 0,
                  world: str = "") -> RecallExplorer | RecordedRecallExplorer | Missing:
    """What recall_world.ipynb shows (its ``widget``): a recorded world of ``run_dir``
    when given, else a world of ``study`` re-run for the widgets' settings."""
    if run_dir:
        return (missing_run(run_dir, RUN_COMMAND)
                or RecordedRecallExplorer(run_dir, cell if isinstance(cell, str) else "", world))
    return RecallExplorer(study, cell=None if cell is None or cell == "" else int(cell), script_id=script_id,
                          condition=condition, model=model, repetition=repetition)


def explorer_widget(study: str | Path, *, script_id: str, condition: str, model: str | None = None,
                    repetition: int = 0) -> Any:
    """The re-run explorer's widget (kept for callers of the earlier API)."""
    return RecallExplorer(study, script_id=script_id, condition=condition, model=model or "",
                          repetition=repetition).widget
