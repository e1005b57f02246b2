"""The store as it stood after any step, rebuilt from the step effects and the
environment's prepopulated entries (never from a live store)."""
from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from workbench.views.escape import esc_plot
from workbench.worlds.stigmergy.views.steps import effect_summary, op_kind, ordered

COLUMNS = ["namespace", "key", "value", "author", "version", "store_seq", "step"]
HEADERS = ["namespace", "key", "value", "hidden author", "version", "store seq", "written at step"]
VALUE_CHARS = 120


def store_at_step(world: dict[str, Any], steps: list[dict[str, Any]], k: int | None) -> pd.DataFrame:
    """Current version of every key after step ``seq`` k (k = -1: before any step;
    None: at the end), one row per (namespace, key) in that order. ``author`` is
    the hidden author; ``store_seq`` the store's counter when the version was
    written; ``step`` the step that wrote it (None for the environment)."""
    current: dict[tuple[str, str], dict[str, Any]] = {}
    for e in world.get("prepopulated") or []:
        current[(e["namespace"], e["key"])] = {"namespace": e["namespace"], "key": e["key"], "value": e["value"],
                                               "author": e["author"], "version": e["version"],
                                               "store_seq": e["seq"], "step": None}
    for s in ordered(steps):
        if k is not None and s["seq"] > k:
            break
        if op_kind(s) != "write":
            continue
        eff = s["effect"]
        current[(eff["namespace"], eff["key"])] = {
            "namespace": eff["namespace"], "key": eff["key"], "value": eff["value"], "author": s["agent"],
            "version": eff["version"], "store_seq": eff["seq"], "step": s["seq"]}
    rows = [current[key] for key in sorted(current)]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["step"] = frame["step"].astype("object")
    return frame


def _cells(frame: pd.DataFrame, changed: tuple[str, str] | None) -> tuple[list[list[str]], list[str]]:
    cols = [[esc_plot(v, VALUE_CHARS) if c in ("namespace", "key", "value", "author") else
             ("—" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)) for v in frame[c]]
            for c in COLUMNS]
    fill = ["#fff3b0" if changed is not None and (r.namespace, r.key) == changed else "white"
            for r in frame.itertuples()]
    return cols, fill


def _table(frame: pd.DataFrame, changed: tuple[str, str] | None) -> go.Table:
    cols, fill = _cells(frame, changed)
    return go.Table(header={"values": HEADERS, "fill": {"color": "#e8e8e8"}, "align": "left"},
                    cells={"values": cols, "fill": {"color": [fill] * len(COLUMNS)}, "align": "left"},
                    columnwidth=[1.2, 1.5, 3, 1.2, 0.8, 0.9, 1.1])


def store_slider(world: dict[str, Any], steps: list[dict[str, Any]]) -> go.Figure:
    """A table of the store with a slider over steps (plus the start, before any
    step). Each slider step carries its table and title and applies them with
    plotly's own ``update`` method: no frames (so nothing auto-plays on load) and
    no kernel, so it works in static HTML. The table starts at the last step;
    the row a write changed is highlighted."""
    steps = ordered(steps)
    points: list[tuple[str, int, str, tuple[str, str] | None]] = [
        ("start", -1, "before any step (environment's entries only)", None)]
    for s in steps:
        changed = (s["effect"]["namespace"], s["effect"]["key"]) if op_kind(s) == "write" else None
        what = esc_plot(effect_summary(world, s, 60), newlines=False)
        desc = f"after step {s['seq']}: {esc_plot(s['agent'])} · {what}"
        points.append((str(s["seq"]), s["seq"], desc, changed))
    wid = esc_plot(world.get("world_id"))
    slider_steps: list[dict[str, Any]] = []
    for label, k, desc, changed in points:
        cols, fill = _cells(store_at_step(world, steps, k), changed)
        slider_steps.append({
            "label": label, "method": "update",
            "args": [{"cells.values": [cols], "cells.fill.color": [[fill] * len(COLUMNS)]},
                     {"title.text": f"store of {wid} · {desc}"}]})
    final = store_at_step(world, steps, None)
    last_changed = points[-1][3]
    fig = go.Figure(_table(final, last_changed))
    fig.update_layout(
        title={"text": slider_steps[-1]["args"][1]["title.text"]},
        sliders=[{"active": len(slider_steps) - 1, "currentvalue": {"prefix": "step: "}, "pad": {"t": 30},
                  "steps": slider_steps}],
        height=260 + 28 * max(len(final), 3), margin={"l": 20, "r": 20, "t": 60, "b": 20})
    return fig
