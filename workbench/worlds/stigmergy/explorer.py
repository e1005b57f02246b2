"""The world explorer behind notebooks/world.ipynb: widgets that set a cell's
factors and a seed, re-run that one world in place, and show it through the
views (which read only its records)."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from workbench.aio import run_sync
from workbench.params import Cell, Study, load_study
from workbench.study import run_one_world
from workbench.worlds.stigmergy.simulated import PROFILES
from workbench.worlds.stigmergy.spec import CONDITIONS

FACTORS: dict[str, tuple[str, ...]] = {
    "condition": CONDITIONS,
    "clauses": ("both", "persist-only", "recheck-only", "none"),
    "scheduler": ("async", "lockstep"),
    "parser": ("strict", "lenient"),
}


class WorldExplorer:
    """Holds the current world's records; ``widget`` is what a notebook displays."""

    def __init__(self, study: Study, cell_index: int = 0, world_index: int = 0) -> None:
        import ipywidgets as W

        self.study = study
        self.cell = study.cells[cell_index]
        models = sorted({f"sim/{p}" for p in PROFILES} | {self.cell.spec.model} |
                        {f"sim/{p}" for p in study.profiles})
        self.controls: dict[str, Any] = {
            name: W.Dropdown(options=list(opts), value=getattr(self.cell.spec, name), description=name)
            for name, opts in FACTORS.items()
        }
        self.controls["model"] = W.Dropdown(options=models, value=self.cell.spec.model, description="model")
        self.controls["world"] = W.BoundedIntText(value=world_index, min=0, max=10**6, description="world #")
        self.step = W.IntSlider(value=0, min=0, max=0, description="step")
        self.summary = W.HTML()
        self.step_view = W.HTML()
        self.figure = W.Output()
        self.world: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        for control in self.controls.values():
            control.observe(lambda _change: self.rerun(), names="value")
        self.step.observe(lambda _change: self._show_step(), names="value")
        self.widget = W.VBox([
            W.HTML("<b>World explorer</b> (simulated agents unless a real model is chosen)"),
            W.HBox([self.controls["condition"], self.controls["clauses"], self.controls["scheduler"]]),
            W.HBox([self.controls["parser"], self.controls["model"], self.controls["world"]]),
            self.summary, self.figure, self.step, self.step_view,
        ])
        self.rerun()

    @classmethod
    def from_study(cls, path: str | Path, cell: int = 0, world_index: int = 0) -> WorldExplorer:
        return cls(load_study(path), cell, world_index)

    def current_cell(self) -> Cell:
        update = {k: self.controls[k].value for k in (*FACTORS, "model")}
        spec = self.cell.spec.model_copy(update=update)
        return self.study.variant(self.cell, spec)

    def rerun(self) -> None:
        """Run the world for the current settings and redraw everything."""
        outcome = run_sync(run_one_world(self.study, self.current_cell(), int(self.controls["world"].value)))
        self.world, self.steps = outcome.world, outcome.steps
        self.step.max = max(0, len(self.steps) - 1)
        self.step.value = 0
        self._draw()

    def _draw(self) -> None:
        from IPython.display import display

        from workbench.worlds.stigmergy.views import step_timeline

        m = self.world["metrics"]
        keys = ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write", "exposure",
                "valid")
        self.summary.value = (f"<code>{html.escape(self.world['world_id'])}</code> · "
                              f"{html.escape(self.world.get('cell_label', ''))} · " +
                              " · ".join(f"{k}: <b>{m[k]}</b>" for k in keys))
        self.figure.clear_output(wait=True)
        with self.figure:
            display(step_timeline(self.world, self.steps))
        self._show_step()

    def _show_step(self) -> None:
        from workbench.worlds.stigmergy.views import store_at_step

        if not self.steps:
            self.step_view.value = "<i>no steps</i>"
            return
        s = self.steps[self.step.value]
        store = store_at_step(self.world, self.steps, s["seq"])
        rows = "".join(f"<li>{html.escape(line)}</li>" for line in (
            f"{s['agent']} ({s['role']}) step {s['agent_step']} at t={s['t_done']}",
            f"reply: {s['reply']['text'][:400]}",
            f"operation: {s['op']}",
            f"result shown: {s['result']}",
        ))
        self.step_view.value = (f"<ul>{rows}</ul><b>store after this step</b>"
                                f"{store.to_html(index=False, escape=True)}")
