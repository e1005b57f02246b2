"""The parts every world kind's explorer is built from: views as outputs that are
replaced whole (never captured with ``with output:``), a busy line, the note an
explorer shows in place of a run directory that does not exist yet, and the picker
of recorded worlds (factor filters, outcome columns).

Why outputs are assigned, never captured: under papermill, output captured into
an ``Output`` widget makes nbclient send a message on the kernel socket it is
waiting on, which can lose the cell's reply until the execution timeout
(nbclient issue #312); an explorer notebook stalled 300 s now and then.

Every piece of HTML here comes from a template (:mod:`workbench.views.markup`,
autoescaped), and every HTML view is wrapped in an element JupyterLab's MathJax
skips: a recorded ``$240,000 | $240,000`` must read as written, not as italics."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.views.markup import Markup, render

#: an outcome column of recorded worlds: its name and the world's value (bool, number or None)
Outcome = tuple[str, Callable[[dict[str, Any]], Any]]


def display_output(obj: Any) -> dict[str, Any]:
    """One ``display_data`` output of ``obj`` (a string is HTML, shown inside an element
    MathJax skips): a plotly figure gives the bundle of the active renderers, anything
    else is formatted as the notebook would format it. Never displays anything itself."""
    from IPython import get_ipython
    from IPython.core.formatters import DisplayFormatter
    from IPython.display import HTML

    if isinstance(obj, str):  # HTML made by a template or a kind's view: already escaped
        obj = HTML(render("panel_block.html", body=Markup(obj)))
    if hasattr(obj, "to_plotly_json"):
        import plotly.io as pio

        # what display(fig) gives (pio.show's bundle). Not fig._repr_mimebundle_(): it re-activates
        # every renderer, and the notebook renderer then emits plotly.js (4.8 MB) again each time.
        data: dict[str, Any] = dict(pio.renderers._build_mime_bundle(obj.to_dict()) or {})
        metadata: dict[str, Any] = {}
    else:
        shell = get_ipython()
        formatter = shell.display_formatter if shell is not None else DisplayFormatter()
        data, metadata = formatter.format(obj)
    data.setdefault("text/plain", f"<{type(obj).__name__}>")
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def note_html(text: str, colour: str = "#555") -> Markup:
    return render("panel_note.html", text=text, colour=colour)


def error_html(what: str, exc: BaseException) -> Markup:
    return render("panel_error.html", what=what, error_type=type(exc).__name__, error=str(exc))


def refusal_html(what: str, problems: Sequence[str]) -> Markup:
    """What preflight refused (one line per problem), said where the world would have been."""
    return render("panel_refusal.html", what=what, problems=list(problems))


def outcome_text(value: Any) -> str:
    """An outcome as a table cell: yes/no, a number to two places, or a dash when not recorded."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "–" if value != value else f"{value:.2f}"
    return str(value)


class Panel:
    """The explorer's views, one ``Output`` each, and a busy line. ``show`` replaces a
    view's outputs whole; ``clear`` empties every view (optionally leaving a note in
    the first), so a view never shows anything but the current world."""

    def __init__(self, names: Iterable[str]) -> None:
        import ipywidgets as W

        self.views: dict[str, Any] = {name: W.Output(layout={"border": "0"}) for name in names}
        self.status = W.HTML(value="")
        self.status.add_class("wb-explorer-status")  # the busy line: set last, after every view is drawn

    def show(self, name: str, *objs: Any) -> None:
        self.views[name].outputs = tuple(display_output(o) for o in objs)

    def clear(self, note: str | None = None) -> None:
        for i, out in enumerate(self.views.values()):
            out.outputs = (display_output(note),) if note and i == 0 else ()

    def busy(self, text: str) -> None:
        self.status.value = render("panel_status.html", busy=True, text=text)

    def idle(self, text: str = "") -> None:
        self.status.value = render("panel_status.html", busy=False, text=text) if text else ""

    def text(self) -> str:
        """Everything the views show now, as one JSON string (for tests and checks)."""
        return json.dumps([list(out.outputs) for out in self.views.values()], ensure_ascii=False)


@dataclass
class Missing:
    """What an explorer is when its run directory is not there: a note naming the command."""

    widget: Any
    text: str = ""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/plain"] = self.text
        return bundle


def missing_run(run_dir: str | Path, command: str) -> Missing | None:
    """None when ``run_dir`` holds a run; else a note that names the command making one."""
    from workbench.records import MANIFEST, WORLDS, is_batch_dir

    d = Path(run_dir)
    if (d / WORLDS).exists() or (d / MANIFEST).exists() or is_batch_dir(d):
        return None
    import ipywidgets as W

    text = f"No run in {run_dir}. Make it with {command}, then run this notebook again."
    return Missing(W.HTML(render("panel_missing.html", run_dir=str(run_dir), lead="Make it with ", command=command,
                                 tail=", then run this notebook again.")), text)


class CellWorldPicker:
    """Cell and world dropdowns over a run set's records, for an explorer that opens
    recorded worlds, with a filter for every factor that varies across the run set
    (its design), each world's outcomes (``outcome_columns``, read from its records)
    in a table and in the dropdowns, and where the world on show opens in
    ``workbench view`` (``_jump``). A filter or a new cell refills the lists
    (quietly, so the world is opened once, not once per refill step) and opens the
    first world they offer: the dropdowns always name the world on show."""

    controls: dict[str, Any]
    verify_button: Any
    records: Any
    design: Any  # workbench.metrics.design.Design of the records
    filters: dict[str, Any]  # factor -> its dropdown (value -1: any level)
    levels: dict[str, list[str]]  # factor -> its levels, in the order the filter offers them
    outcomes_view: Any  # ipywidgets HTML: the outcome table of the cell's worlds
    jump: Any  # ipywidgets HTML: the world on show in `workbench view`
    outcome_columns: tuple[Outcome, ...] = ()  # the first is the headline, counted per cell in the cell dropdown
    max_rows = 200  # rows of the outcome table at most (the world on show always among them)
    _quiet: bool = False
    _what: str = "world"

    def verify(self) -> list[str]:
        raise NotImplementedError

    def _pick_controls(self, records: Any, cell: str = "", world: str = "", world_label: str = "world",
                       what: str = "world") -> dict[str, Any]:
        """The cell and world dropdowns, the factor filters (and a Verify button), starting
        at ``world`` if it is recorded, else at ``cell`` (an id or a label), else the first
        cell; the observers are wired, so a change opens the chosen world."""
        import ipywidgets as W

        from workbench.metrics.design import design_of_records

        self.records, self._what = records, what
        worlds = records.worlds
        self.design = design_of_records(records)
        self._by_cell: dict[str, list[dict[str, Any]]] = {}
        for w in worlds:
            self._by_cell.setdefault(w["cell_id"], []).append(w)
        self._cells = [c for c in self.design.cells if c in self._by_cell]
        self._cells += [c for c in self._by_cell if c not in self._cells]
        first = next((w for w in worlds if w["world_id"] == world), None)
        cell_id = first["cell_id"] if first else (cell if cell in self._by_cell else next(
            (c for c in self._cells if self._label(c) == cell), self._cells[0]))
        self.levels = {f: list(dict.fromkeys(str(v) for v in self.design.frame[f])) for f in self.design.varying}
        self.filters = {f: W.Dropdown(options=[("any", -1), *((lv, i) for i, lv in enumerate(levels))], value=-1,
                                      description=f, style={"description_width": "initial"})
                        for f, levels in self.levels.items()}
        self.controls = {
            "cell": W.Dropdown(options=self._cell_options(self._cells), value=cell_id, description="cell",
                               layout={"width": "60%"}),
            "world": W.Dropdown(options=self._world_choices(cell_id), description=world_label,
                                layout={"width": "40%"}),
        }
        if first:
            self.controls["world"].value = first["world_id"]
        self.outcomes_view = W.HTML(value="")
        self.jump = W.HTML(value="")
        self.verify_button = W.Button(description="Verify", icon="check",
                                      tooltip=f"replay this {what} through the engine from its records (no model call)")
        self.verify_button.on_click(lambda _b: self.verify())
        self.controls["cell"].observe(self._cell_changed, names="value")
        self.controls["world"].observe(lambda _c: self._open(), names="value")
        for dropdown in self.filters.values():
            dropdown.observe(self._filter_changed, names="value")
        return self.controls

    def filter_box(self) -> Any:
        """The factor filters in one wrapping row (an empty box when no factor varies)."""
        import ipywidgets as W

        return W.HBox(list(self.filters.values()), layout={"flex_flow": "row wrap"})

    # -- what the lists offer ----------------------------------------------------------------
    def _label(self, cell_id: str) -> str:
        first = self._by_cell[cell_id][0]
        return str(first.get("cell_label") or self.design.label(cell_id))

    def _allowed_cells(self) -> list[str]:
        """The cells whose level of every filtered factor is the one chosen."""
        chosen = {f: self.levels[f][d.value] for f, d in self.filters.items() if d.value != -1}
        return [c for c in self._cells
                if all(c in self.design.frame.index and str(self.design.frame.at[c, f]) == lv for f, lv in chosen.items())]

    def _headline(self, worlds: list[dict[str, Any]]) -> str:
        """The first outcome over a cell's valid worlds: k/n for yes/no, else the mean."""
        if not self.outcome_columns:
            return ""
        name = self.outcome_columns[0][0]
        vals = [v for v in (self._outcome(w, 0) for w in worlds if w.get("valid")) if v is not None and v == v]
        if not vals:
            return f"{name} – (no valid {self._what})"
        if all(isinstance(v, bool) for v in vals):
            return f"{name} {sum(vals)}/{len(vals)}"
        return f"{name} {sum(vals) / len(vals):.2f} (mean of {len(vals)})"

    def _outcome(self, world: dict[str, Any], column: int) -> Any:
        """A world's value in an outcome column, worked out once (a kind may re-score records to get it)."""
        cache: dict[tuple[str, int], Any] = self.__dict__.setdefault("_outcomes", {})
        key = (world["world_id"], column)
        if key not in cache:
            cache[key] = self.outcome_columns[column][1](world)
        return cache[key]

    def _cell_options(self, cells: list[str]) -> list[tuple[str, str]]:
        return [(" · ".join(p for p in (f"{self._label(c)} ({c})", self._headline(self._by_cell[c])) if p), c)
                for c in cells]

    def _world_options(self, cell_id: str) -> list[tuple[str, str]]:
        raise NotImplementedError

    def _world_choices(self, cell_id: str | None) -> list[tuple[str, str]]:
        """The kind's world options, each with the world's headline outcome."""
        if not cell_id:
            return []
        worlds = {w["world_id"]: w for w in self._by_cell.get(cell_id, [])}
        if not self.outcome_columns:
            return self._world_options(cell_id)
        name = self.outcome_columns[0][0]
        return [(f"{label} · {name} {outcome_text(self._outcome(worlds[wid], 0))}" if wid in worlds else label, wid)
                for label, wid in self._world_options(cell_id)]

    # -- changes ---------------------------------------------------------------------------
    def _open(self) -> None:
        raise NotImplementedError

    def _refill(self, cells: list[str], cell_id: str | None, world_id: str | None = None) -> None:
        """The lists set to ``cells`` with ``cell_id`` chosen and its worlds offered
        (``world_id`` kept when it is one of them, else the first), without opening any."""
        self._quiet = True
        try:
            self.controls["cell"].options = self._cell_options(cells)
            self.controls["cell"].value = cell_id
            options = self._world_choices(cell_id)
            self.controls["world"].options = options
            ids = [wid for _, wid in options]
            self.controls["world"].value = world_id if world_id in ids else (ids[0] if ids else None)
        finally:
            self._quiet = False

    def _cell_changed(self, _change: Any = None) -> None:
        if self._quiet:
            return
        self._refill(self._allowed_cells(), self.controls["cell"].value)
        self._open()

    def _filter_changed(self, _change: Any = None) -> None:
        allowed = self._allowed_cells()
        cell_id = self.controls["cell"].value
        keep = cell_id in allowed
        self._refill(allowed, cell_id if keep else (allowed[0] if allowed else None),
                     self.controls["world"].value if keep else None)
        self._open()

    def _empty_note(self) -> str:
        """Why no world is on show."""
        return ("No cell matches these filters: set one to 'any'." if not self.controls["cell"].options
                else f"No {self._what} in this cell.")

    # -- what the world on show adds -------------------------------------------------------------
    def _jump(self, world_id: str) -> tuple[str, str] | None:
        """(the command that serves the viewer, the world's address in it), or None."""
        return None

    def _picked(self) -> None:
        """The outcome table and the viewer link, for the world now on show."""
        wid = self.controls["world"].value
        cell_id = self.controls["cell"].value
        worlds = self._by_cell.get(cell_id, []) if cell_id else []
        shown = worlds[:self.max_rows]
        if wid and wid not in [w["world_id"] for w in shown]:
            shown = [*shown, *(w for w in worlds if w["world_id"] == wid)]
        jump = self._jump(wid) if wid else None
        rows = [{"world_id": w["world_id"], "current": w["world_id"] == wid,
                 "cells": [outcome_text(self._outcome(w, i)) for i in range(len(self.outcome_columns))],
                 "url": (self._jump(w["world_id"]) or ("", ""))[1] if jump else ""} for w in shown]
        note = (f"Outcomes of the {len(worlds)} {self._what}s of this cell, from their records"
                + (f" (the first {self.max_rows} shown)" if len(worlds) > self.max_rows else "")
                + "; the cell list counts the first outcome over each cell's valid ones." if worlds
                else self._empty_note())
        self.outcomes_view.value = render("panel_worlds.html", what=self._what, note=note, rows=rows,
                                          columns=[name for name, _ in self.outcome_columns], jump=bool(jump))
        self.jump.value = render("panel_jump.html", command=jump[0], url=jump[1]) if jump else ""


class ShownAsWidget:
    """An explorer in a notebook: its widget, with a text form saying what it showed
    when the cell ran (what a viewer without a kernel or widget manager shows)."""

    widget: Any

    def describe(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/plain"] = self.describe()
        return bundle


class SliderWorld(ShownAsWidget):
    """An explorer that shows one world through a panel and a slider over its steps or turns
    (``slider``): what every kind's explorer does when a world is set or dropped."""

    panel: Panel
    slider: Any  # an ipywidgets IntSlider
    world: dict[str, Any]
    steps: list[dict[str, Any]]
    source: str  # one line: where the world on show came from

    def _draw(self) -> None:
        raise NotImplementedError

    def _show_world(self, world: dict[str, Any], steps: list[dict[str, Any]], last: int) -> None:
        """Show ``world`` from its first step, the slider reaching ``last``."""
        self.world, self.steps = world, steps
        self._reset_slider(last)
        self._draw()

    def _forget(self, note: str | None = None) -> None:
        """The settings no longer describe the world on show: drop it, say why."""
        self.world, self.steps = {}, []
        self._reset_slider(0)
        self.panel.clear(note_html(note, "#b35900") if note else None)

    def _set_world(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _fail(self, what: str, exc: BaseException) -> None:
        """A setting or a run that failed: the world on show is dropped and the error shown, not raised
        into the widget loop."""
        self._forget()
        self.panel.show("summary", error_html(what, exc))
        self.panel.idle()

    def _refuse(self, what: str, problems: Sequence[str]) -> None:
        """Preflight refused the settings: no world is on show, and the refusal says why."""
        self._forget()
        self.panel.show("summary", refusal_html(what, problems))
        self.panel.idle(f"refused: {len(problems)} problem{'' if len(problems) == 1 else 's'}, no call made")

    def _run_and_show(self, what: str, run: Callable[[], Any], source: str, unit: str) -> None:
        """Run one world (``run()`` returns its outcome) with the Run button held, then show it."""
        button = getattr(self, "run_button", None)
        self.panel.busy(f"running {what} ...")
        if button is not None:
            button.disabled = True
        self.panel.clear(note_html(f"running {what} ...", "#b35900"))
        try:
            outcome = run()
        except Exception as exc:  # noqa: BLE001 - shown in the panel, as a bad setting is
            self._fail(f"{what} could not run", exc)
            return
        finally:
            if button is not None:
                button.disabled = False
        self.source = source
        self._set_world(outcome.world, outcome.steps)
        self.panel.idle(f"world {outcome.world['world_id']} ({len(self.steps)} {unit})")

    def _reset_slider(self, last: int) -> None:
        with self.slider.hold_trait_notifications():
            self.slider.max = max(0, last)
            self.slider.min = 0
            self.slider.value = 0
