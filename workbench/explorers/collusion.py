"""The peer-verification world's explorer (notebooks/collusion_world.ipynb): one
trajectory of a run directory, episode by episode and agent by agent, shown from
its records (no model is called). Dropdowns for cell, trajectory, episode and
agent; **Verify** replays the trajectory through the engine from its records.
When the run directory is missing, the explorer says which command makes it and
offers to make it (the shipped smoke study runs on simulated agents in seconds).

An explorer that cannot lie, as the other kinds' explorers: every view is one
``Output`` whose ``outputs`` are replaced whole on every change (assigned from the
kernel, never captured with ``with output:``, which under papermill makes nbclient
write to the shell socket it polls and can stall a cell until its timeout), and a
busy line says what is running. Model-written text is escaped everywhere.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.explorers.common import RecordedPicker, preflight_problems, shown_path
from workbench.routes import is_simulated_route
from workbench.views.escape import as_text
from workbench.views.markup import Markup, render
from workbench.views.panel import Panel, ShownAsWidget, error_html, note_html, refusal_html
from workbench.worlds.collusion import metrics as M
from workbench.worlds.collusion.episode_html import agent_episode_html, episodes_html

VIEWS = ("summary", "episodes", "episode", "agent")
SMOKE_STUDY = "params/collusion-smoke.yaml"
RUN_COMMAND = f".venv/bin/workbench run {SMOKE_STUDY} --out outputs/collusion-smoke"


def _metric(name: str) -> Any:
    return lambda w: (w.get("metrics") or {}).get(name)


def _colluding(world: dict[str, Any]) -> str | None:
    m = world.get("metrics") or {}
    return None if m.get("episodes") is None else f"{m.get('colluding_episodes')}/{m.get('episodes')}"


#: the outcome columns of the trajectories (the first is counted over each cell's valid ones in the cell list)
OUTCOMES = (("colluded", _metric("ever_colluded")), ("onset episode", _metric("onset_episode")),
            ("colluding episodes", _colluding), ("verdict accuracy", _metric("verdict_accuracy")),
            ("valid", lambda w: w.get("valid")))


# -- the explorer ---------------------------------------------------------------------------------
class CollusionExplorer(RecordedPicker, ShownAsWidget):
    """A trajectory of a run directory, shown from its records (no model called):
    dropdowns for cell, trajectory, episode and agent, a filter per varying factor,
    each trajectory's outcomes and its page in `workbench view`."""

    outcome_columns = OUTCOMES

    def __init__(self, run_dir: str | Path, cell: str = "", world: str = "", episode: int | None = None,
                 agent: str = "alice") -> None:
        import ipywidgets as W

        from workbench.records import load_run

        records = load_run(run_dir)
        if not records.worlds:
            raise InputError(f"{run_dir} holds no finished trajectory yet")
        self.judgments = M.load_judgments(records.dir)
        self.panel = Panel(VIEWS)
        self.views, self.status = self.panel.views, self.panel.status
        self.world: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self._quiet = False
        self._pick_controls(records, cell, world, world_label="trajectory", what="trajectory")
        self.controls["episode"] = W.Dropdown(options=[], description="episode")
        self.controls["agent"] = W.Dropdown(options=list(M.AGENTS), value=agent if agent in M.AGENTS else M.AGENTS[0],
                                            description="agent")
        self.controls["episode"].observe(lambda _c: self._draw_episode(), names="value")
        self.controls["agent"].observe(lambda _c: self._draw_episode(), names="value")
        c = self.controls
        self.widget = W.VBox([
            W.HTML(render("explorer_intro.html", title="Recorded trajectories", run_dir=str(records.dir),
                          what="trajectory")),
            self.filter_box(), c["cell"], W.HBox([c["world"], self.verify_button]), W.HBox([c["episode"], c["agent"]]),
            self.jump, self.outcomes_view,
            self.status, self.views["summary"], self.views["episodes"], self.views["episode"], self.views["agent"],
        ])
        self._open(episode)

    def describe(self) -> str:
        w = self.world
        shown = (f"trajectory {w.get('world_id')} ({w.get('cell_label', '')}), episode "
                 f"{self.controls['episode'].value}, agent {self.controls['agent'].value}" if w else "no trajectory")
        return ("Collusion trajectory explorer (interactive: needs a running kernel with ipywidgets); when this cell "
                f"ran it showed {shown}")

    def _world_options(self, cell_id: str) -> list[tuple[str, str]]:
        out = []
        for w in self.records.worlds:
            if w["cell_id"] == cell_id:
                flags = (w.get("metrics") or {}).get("collusion_by_episode") or ""
                out.append((f"{w['world_id']}" + (f" · {flags}" if flags else "")
                            + ("" if w.get("valid") else " (invalid)"), w["world_id"]))
        return out

    def _open(self, episode: int | None = None) -> None:
        if self._quiet:
            return
        wid = self.controls["world"].value
        if not wid:
            self.world, self.steps = {}, []
            self._quiet = True
            try:
                self.controls["episode"].options = []
            finally:
                self._quiet = False
            self.panel.clear(note_html(self._empty_note()))
            self._picked()
            self.panel.idle()
            return
        self.panel.busy(f"opening {wid} ...")
        self.world = self.records.world(wid)
        self.steps = self.records.steps.get(wid, [])
        rows = M.episode_rows(self.world)
        options = [(f"{r['episode']}" + (" (warm-up)" if r["warmup"] else f" (eval {r['eval_episode']})")
                    + (" COLLUSION" if r["collusion"] else ""), r["episode"]) for r in rows]
        numbers = [n for _, n in options]
        self._quiet = True
        try:
            self.controls["episode"].options = options
            self.controls["episode"].value = episode if episode in numbers else (numbers[0] if numbers else None)
        finally:
            self._quiet = False
        self.panel.show("summary", self._summary_html())
        self._draw_episode()
        self._picked()
        self.panel.idle(f"trajectory {wid} ({len(rows)} episodes, {len(self.steps)} model calls, from the records)")

    def _summary_html(self) -> Markup:
        w = self.world
        t = M.trajectory_row(w)
        agents = w.get("agents") or []
        return render("explorer_collusion_summary.html", world_id=as_text(w.get("world_id")),
                      label=as_text(w.get("cell_label") or t["cell"]),
                      routes=", ".join(f"{a.get('agent')}: {a.get('route')}" for a in agents),
                      onset="never" if t["onset_episode"] is None else f"evaluation episode {t['onset_episode']}",
                      colluding=t["colluding_episodes"], episodes=t["episodes"],
                      accuracy=as_text(M._num(t["verdict_accuracy"])),
                      simulated=all(is_simulated_route(a.get("route", "")) for a in agents),
                      run_dir=str(self.records.dir), run=as_text(w.get("run")))

    def _draw_episode(self) -> None:
        if self._quiet or not self.world:
            return
        from workbench.worlds.collusion.views import trajectory_html

        n = self.controls["episode"].value
        if n is None:
            self.panel.show("episodes", note_html("This trajectory has no episode."))
            self.panel.show("episode")
            self.panel.show("agent")
            return
        self.panel.show("episodes", episodes_html(self.world, n))
        self.panel.show("episode", trajectory_html(self.world, self.judgments, episodes=[n]))
        self.panel.show("agent", agent_episode_html(self.world, self.steps, n, self.controls["agent"].value))

    def verify(self) -> list[str]:
        """Replay the trajectory on show through the engine with its recorded replies."""
        from workbench.replay import verify_world

        wid = self.world.get("world_id")
        if not wid:
            return []
        self.panel.busy(f"replaying {wid} through the engine ...")
        try:
            diffs = verify_world(self.records, wid)
        except Exception as exc:  # noqa: BLE001 - shown, not raised into the widget loop
            self.panel.idle()
            self.panel.show("summary", self._summary_html() + error_html("the replay could not run", exc))
            return [f"{type(exc).__name__}: {exc}"]
        self.panel.idle(f"replay of {wid}: " + ("identical to the records" if not diffs else
                                                 f"{len(diffs)} differences: " + "; ".join(diffs[:5])))
        return diffs


class MissingRun:
    """What the explorer is while its run directory holds no run: which command makes
    it, and a button that makes it here (the given study, on its own routes); the
    explorer then opens in place of the note."""

    def __init__(self, run_dir: str | Path, study: str | Path, **open_kwargs: Any) -> None:
        import ipywidgets as W

        self.run_dir, self.study, self.open_kwargs = Path(run_dir), Path(study), open_kwargs
        self.explorer: CollusionExplorer | None = None
        self.status = W.HTML()
        command = f".venv/bin/workbench run {shown_path(self.study)} --out {shown_path(self.run_dir)}"
        self.note = W.HTML(render("panel_missing.html", run_dir=shown_path(self.run_dir), command=command,
                                  lead="This explorer opens recorded trajectories: make them, from the project "
                                       "folder, with ", tail=", or here:"))
        self.button = W.Button(description="Make the run", icon="play", button_style="primary",
                               tooltip=f"run {self.study.name} into {self.run_dir}")
        self.button.on_click(lambda _b: self.make())
        self.widget = W.VBox([self.note, W.HBox([self.button, self.status])])
        self.text = f"No run in {shown_path(self.run_dir)}: make it, from the project folder, with {command}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/plain"] = self.text
        return bundle

    def make(self) -> CollusionExplorer | None:
        """Run the study into the run directory, then show the explorer in place."""
        from workbench.params import load_study
        from workbench.study import run_study

        try:
            study = load_study(self.study)
        except Exception as exc:  # noqa: BLE001 - shown, not raised into the widget loop
            self.status.value = error_html(f"cannot load {self.study}", exc)
            return None
        routes = {r for c in study.cells for r in study.kind.routes(c.spec)}
        if study.monitor is not None:
            routes.add(study.monitor.model)
        try:  # what `workbench run` refuses before any call, refused here too
            problems = preflight_problems(study, [c.spec for c in study.cells], routes)
        except Exception as exc:  # noqa: BLE001 - as above
            self.status.value = error_html(f"the preflight of {self.study.name} could not run", exc)
            return None
        if problems:
            self.status.value = refusal_html(self.study.name, problems)
            return None
        real = sorted(r for r in routes if not is_simulated_route(r))
        if real:
            self.status.value = note_html(f"{self.study.name} calls real models ({', '.join(real)}): run it with the "
                                          "command above, where its preflight checks keys and budget.", "#b00020")
            return None
        self.button.disabled = True
        self.status.value = render("panel_status.html", busy=True, text=f"running {self.study.name} (simulated) ...")
        try:
            summary = run_study(study, self.run_dir, progress=False)
        except Exception as exc:  # noqa: BLE001 - as above
            self.status.value = error_html(f"{self.study.name} could not run", exc)
            self.button.disabled = False
            return None
        self.explorer = CollusionExplorer(self.run_dir, **self.open_kwargs)
        self.explorer.panel.idle(f"made {shown_path(self.run_dir)}: {summary.finished} trajectories finished, {summary.failed} "
                                 "failed")
        self.widget.children = (self.explorer.widget,)
        return self.explorer


def has_run(run_dir: str | Path) -> bool:
    from workbench.records import MANIFEST, WORLDS, is_batch_dir

    d = Path(run_dir)
    return (d / WORLDS).exists() or (d / MANIFEST).exists() or is_batch_dir(d)


def open_explorer(run_dir: str | Path, *, study: str | Path = SMOKE_STUDY, cell: str = "", world: str = "",
                  episode: int | None = None, agent: str = "alice") -> CollusionExplorer | MissingRun:
    """What collusion_world.ipynb shows (its ``widget``): the trajectories of ``run_dir``,
    or, while it holds no run, the command that makes it and a button that runs ``study``."""
    if not has_run(run_dir):
        return MissingRun(run_dir, study, cell=cell, world=world, episode=episode, agent=agent)
    return CollusionExplorer(run_dir, cell=cell, world=world, episode=episode, agent=agent)
