"""The parts every world kind's explorer is built from: views as outputs that are
replaced whole (never captured with ``with output:``), a busy line, and the note
an explorer shows in place of a run directory that does not exist yet.

Why outputs are assigned, never captured: under papermill, output captured into
an ``Output`` widget makes nbclient send a message on the kernel socket it is
waiting on, which can lose the cell's reply until the execution timeout
(nbclient issue #312); an explorer notebook stalled 300 s now and then."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.views.escape import esc_html


def display_output(obj: Any) -> dict[str, Any]:
    """One ``display_data`` output of ``obj`` (a string is HTML): a plotly figure gives
    the bundle of the active renderers, anything else is formatted as the notebook
    would format it. Never displays anything itself."""
    from IPython import get_ipython
    from IPython.core.formatters import DisplayFormatter
    from IPython.display import HTML

    if isinstance(obj, str):
        obj = HTML(obj)
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


def note_html(text: str, colour: str = "#555") -> str:
    return f'<div style="color:{colour};font-style:italic;margin:4px 0">{esc_html(text)}</div>'


def error_html(what: str, exc: BaseException) -> str:
    return (f'<div style="color:#b00020;margin:4px 0"><b>{esc_html(what)}</b>: '
            f"{esc_html(type(exc).__name__)}: {esc_html(exc)}</div>")


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
        self.status.value = f'<span style="color:#b35900">&#9203; {esc_html(text)}</span>'

    def idle(self, text: str = "") -> None:
        self.status.value = f'<span style="color:#2a7a2a">{esc_html(text)}</span>' if text else ""

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
    return Missing(W.HTML(f'<div style="color:#b00020">No run in <code>{esc_html(run_dir)}</code>. Make it with '
                          f"<code>{esc_html(command)}</code>, then run this notebook again.</div>"), text)


class CellWorldPicker:
    """Cell and world dropdowns over a run set's records, for an explorer that opens
    recorded worlds: a new cell refills the world list (quietly, so the world is
    opened once, not once per refill step) and opens its first world."""

    controls: dict[str, Any]
    verify_button: Any
    _quiet: bool = False

    def verify(self) -> list[str]:
        raise NotImplementedError

    def _pick_controls(self, worlds: list[dict[str, Any]], cell: str = "", world: str = "",
                       world_label: str = "world", what: str = "world") -> dict[str, Any]:
        """The cell and world dropdowns (and a Verify button), starting at ``world`` if
        it is recorded, else at ``cell`` (an id or a label), else the first cell; the
        observers are wired, so a change opens the chosen world."""
        import ipywidgets as W

        labels: dict[str, str] = {}
        for w in worlds:
            labels.setdefault(w["cell_id"], str(w.get("cell_label") or w["cell_id"]))
        first = next((w for w in worlds if w["world_id"] == world), None)
        cell_id = first["cell_id"] if first else (cell if cell in labels else next(
            (k for k, v in labels.items() if v == cell), worlds[0]["cell_id"]))
        self.controls = {
            "cell": W.Dropdown(options=[(f"{label} ({cid})", cid) for cid, label in labels.items()], value=cell_id,
                               description="cell", layout={"width": "60%"}),
            "world": W.Dropdown(options=self._world_options(cell_id), description=world_label,
                                layout={"width": "40%"}),
        }
        if first:
            self.controls["world"].value = first["world_id"]
        self.verify_button = W.Button(description="Verify", icon="check",
                                      tooltip=f"replay this {what} through the engine from its records (no model call)")
        self.verify_button.on_click(lambda _b: self.verify())
        self.controls["cell"].observe(self._cell_changed, names="value")
        self.controls["world"].observe(lambda _c: self._open(), names="value")
        return self.controls

    def _world_options(self, cell_id: str) -> list[tuple[str, str]]:
        raise NotImplementedError

    def _open(self) -> None:
        raise NotImplementedError

    def _cell_changed(self, _change: Any = None) -> None:
        self._quiet = True
        try:
            options = self._world_options(self.controls["cell"].value)
            self.controls["world"].options = options
            self.controls["world"].value = options[0][1] if options else None
        finally:
            self._quiet = False
        self._open()


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
