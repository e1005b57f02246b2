"""The viewer's HTML: the index page (worlds, cells, comparison) and one page per world,
from templates (``viewer_*.html``) that escape every text a model, a store or a params
file wrote; the world index's values reach the page through ``textContent`` only (see
assets)."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import pandas as pd

from workbench.metrics.design import flatten
from workbench.routes import is_simulated_world
from workbench.viewer.assets import CSS, INDEX_JS, SLIDER_JS
from workbench.viewer.data import Index, RunSet, call_rows, world_usage
from workbench.views.escape import as_text, short
from workbench.views.markup import Markup, render, render_string


def page_name(world_id: str) -> str:
    """A world's page file name (a world id as a safe file name)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", world_id) + ".html"


def world_href(key: str, world_id: str) -> str:
    return f"worlds/{key}/{page_name(world_id)}"


def _doc(title: str, body: Markup, head: Markup | str = "") -> str:
    return str(render("viewer_doc.html", title=title, css=Markup(CSS), head=Markup(head), body=body))


def table_html(frame: pd.DataFrame, numeric: Sequence[str] = (), links: Sequence[str | None] | None = None,
               link_column: str = "") -> str:
    """A frame as a plain table, every header and value escaped; ``links`` (one per row, or None) make
    ``link_column``'s cells links."""
    rows = []
    for i, row in enumerate(frame.itertuples(index=False)):
        rows.append([(_cell(v), links[i] if links is not None and c == link_column and links[i] else None,
                      c in numeric or (isinstance(v, int | float) and not isinstance(v, bool)))
                     for c, v in zip(frame.columns, row)])
    return str(render("viewer_table.html", columns=[as_text(c) for c in frame.columns], rows=rows))


def cell_links(usage: pd.DataFrame) -> list[str | None]:
    """Per row of the cells table, the index filtered to that cell (and run set): a #fragment the index reads."""
    out: list[str | None] = []
    for _, r in usage.iterrows():
        parts = [f"x.cell={quote(str(r['cell']))}"]
        if "run set" in usage.columns:
            parts.append(f"x.{quote('run set')}={quote(str(r['run set']))}")
        out.append("#" + "&".join(parts))
    return out


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return short(v, 400)


# -- the index ---------------------------------------------------------------------------------
def index_data(index: Index, pages: Mapping[tuple[str, str], str], search_file: str) -> str:
    """``data/index.js``: the world index as a script (a script, not JSON to fetch, so it loads from file://)."""
    data = {"columns": index.columns, "rows": index.rows,
            "pages": [pages.get(w) for w in index.worlds],
            "serverPages": [world_href(k, wid) for k, wid in index.worlds],
            "searchFile": search_file}
    return "window.WB_INDEX = " + json.dumps(data, ensure_ascii=True, default=str, separators=(",", ":")) + ";\n"


def search_data(texts: Sequence[str]) -> str:
    return "window.WB_SEARCH = " + json.dumps(list(texts), ensure_ascii=True, separators=(",", ":")) + ";\n"


def index_page(run_sets: Sequence[RunSet], index: Index, usage: pd.DataFrame,
               comparisons: Sequence[tuple[str, pd.DataFrame | str]], bundle_note: str, search_chars: int = 0) -> str:
    names = ", ".join(rs.name for rs in run_sets)
    studies = ", ".join(sorted({rs.study for rs in run_sets if rs.study}))
    n_worlds = sum(len(rs.records.worlds) for rs in run_sets)
    sims = [is_simulated_world(w) for rs in run_sets for w in rs.records.worlds]
    banner = render("viewer_simulated.html", what="every world here ran on" if sims and all(sims) else
                    f"{sum(sims)} of {len(sims)} worlds here ran on") if any(sims) else ""
    constant = "; ".join(f"{k}={v}" for k, v in index.constant.items())
    runs = [{"name": rs.name, "dir": str(rs.records.dir), "kind": rs.kind.name, "study": rs.study or "?",
             "cells": len(rs.design.cells), "worlds": len(rs.records.worlds), "problems": len(rs.records.problems)}
            for rs in run_sets]
    shown: list[tuple[str, str, Markup | None]] = []
    for title, table in comparisons:
        if isinstance(table, str):
            shown.append((title, table, None))
        else:
            from workbench.views.readable import readable_html

            shown.append((title, "", Markup(readable_html(table, caption=str(table.attrs.get("title", "")),
                                                          searchable=False))))
    from workbench.views.readable import STYLE

    body = render("viewer_index.html", names=names, studies=studies or "?", n_worlds=n_worlds, banner=banner,
                  runs=runs, comparisons=shown, style=Markup(STYLE), search_chars=f"{search_chars:,}" if search_chars else "",
                  constant=constant, bundle_note=bundle_note,
                  usage=Markup(table_html(usage, links=cell_links(usage) if len(usage) else None, link_column="cell")),
                  script=Markup(INDEX_JS))
    return _doc(f"workbench view: {names}", body)


# -- one world ---------------------------------------------------------------------------------
def _scalars(d: Mapping[str, Any]) -> pd.DataFrame:
    rows = [{"name": k, "value": v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v, default=str)}
            for k, v in d.items()]
    return pd.DataFrame(rows, columns=["name", "value"])


def _figure_html(fig: Any) -> str:
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True}))


def world_page(rs: RunSet, world_id: str, *, root: str = "../../") -> str:
    """One world's page: what it is (cell, factors, metrics, usage, each call), then its kind's views."""
    world = rs.records.world(world_id)
    steps = rs.records.steps.get(world_id, [])
    sim = is_simulated_world(world)
    usage = world_usage(steps)
    calls = pd.DataFrame([{"seq": s.get("seq"), "agent": s.get("agent"), "route": (s.get("reply") or {}).get("route"),
                           **c} for s, c in zip([s for s in steps if isinstance(s.get("reply"), dict)], call_rows(steps))])
    failed = world.get("failed")
    try:
        drawn = rs.kind.world_page(rs.records, world, steps)
    except Exception as exc:  # noqa: BLE001 - a view that cannot draw this world is said on the page
        drawn = [("Views", render("viewer_views_error.html", kind=rs.kind.name, error_type=type(exc).__name__,
                                  error=str(exc)))]
    if not drawn:
        drawn = [("Replies", render("viewer_replies.html", steps=[
            {"seq": as_text(s.get("seq")), "agent": as_text(s.get("agent")),
             "text": as_text((s.get("reply") or {}).get("text"))} for s in steps]))]
    # a kind's view is HTML its own templates rendered (or a plotly figure): taken as it is
    sections = [{"title": title, "slug": re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-"),
                 "html": Markup(view) if isinstance(view, str) else Markup(_figure_html(view))} for title, view in drawn]
    body = render(
        "viewer_world.html", root=root, world_id=world_id, run_set=rs.name, run_dir=str(rs.records.dir),
        kind=rs.kind.name, cell=rs.design.label(str(world["cell_id"])), world_index=as_text(world.get("world_index")),
        run=as_text(world.get("run")), valid=as_text(world.get("valid")),
        failed=as_text((failed or {}).get("cause") or failed) if failed else "",
        banner=render("viewer_simulated.html", what="this world ran on") if sim else "", sections=sections,
        calls=Markup(table_html(calls)), factors=Markup(table_html(_scalars(flatten(world.get("cell") or {})))),
        metrics=Markup(table_html(_scalars(world.get("metrics") or {}))), usage=Markup(table_html(_scalars(usage))),
        script=Markup(SLIDER_JS))
    return _doc(f"{world_id} · workbench view", body,
                head=render_string('<script src="{{ root }}assets/plotly.min.js"></script>', root=root))
