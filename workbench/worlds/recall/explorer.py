"""The recall world's explorer (notebooks/recall_world.ipynb): pick a script, a
condition and a model, re-run that one world with the study's runner and show it
through :mod:`workbench.worlds.recall.views`. The one recall module that drives
the engine (the import contracts exempt it by name)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.worlds.recall.views import context_html, retrieval_ranks, turn_timeline


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
        raise KeyError(f"no script {script_id!r} in {spec.scripts}; scripts: {', '.join(ids)}")
    index = ids.index(script_id) + repetition * len(ids)
    cell = Cell(cell_hash(spec), 0, spec, "explorer", s.kind.describe_cell(spec))
    outcome = run_sync(run_one_world(s, cell, index))
    return outcome.world, outcome.steps




def explorer_widget(study: str | Path, *, script_id: str, condition: str, model: str | None = None,
                    repetition: int = 0) -> Any:
    """Dropdowns for script, condition, model and repetition; the world re-runs in place
    and shows its turn timeline, retrieval ranks and what was in context."""
    import ipywidgets as W
    from IPython.display import HTML, display

    from workbench.params import load_study
    from workbench.worlds.recall.simulated import PREFIX, PROFILES
    from workbench.worlds.recall.spec import CONDITIONS
    from workbench.worlds.recall.world import cell_scripts

    s = load_study(study)
    ids = [x.script_id for x in cell_scripts(s.cells[0].spec, s.base_dir)]
    models = sorted({f"{PREFIX}/{p}" for p in PROFILES} | {c.spec.model for c in s.cells} | ({model} if model else set()))
    w_script = W.Dropdown(options=ids, value=script_id, description="script")
    w_cond = W.Dropdown(options=list(CONDITIONS), value=condition, description="condition")
    w_model = W.Dropdown(options=models, value=model or s.cells[0].spec.model, description="model")
    w_rep = W.BoundedIntText(value=repetition, min=0, max=999, description="repetition")
    out = W.Output()

    def show(*_: Any) -> None:
        out.clear_output(wait=True)
        with out:
            world, steps = explore_world(study, script_id=w_script.value, condition=w_cond.value,
                                         model=w_model.value, repetition=int(w_rep.value))
            display(turn_timeline(world), retrieval_ranks(world), HTML(context_html(world)))

    for w in (w_script, w_cond, w_model, w_rep):
        w.observe(show, names="value")
    show()
    return W.VBox([W.HBox([w_script, w_cond]), W.HBox([w_model, w_rep]), out])
