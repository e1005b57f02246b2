"""The viewer's HTML: the index page (worlds, cells, comparison) and one page per world.
Every text a model, a store or a params file wrote is escaped (:func:`esc_html`); the
world index's values reach the page through ``textContent`` only (see assets)."""
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
from workbench.views.escape import esc_html, short

SIMULATED = ("<div class='wb-banner'><b>SIMULATED</b>: {what} simulated agents; their numbers are simulated "
             "behaviour, never a measurement of a model.</div>")


def page_name(world_id: str) -> str:
    """A world's page file name (a world id as a safe file name)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", world_id) + ".html"


def world_href(key: str, world_id: str) -> str:
    return f"worlds/{key}/{page_name(world_id)}"


def _doc(title: str, body: str, head: str = "") -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc_html(title)}</title>"
            f"<meta name='viewport' content='width=device-width'><style>{CSS}</style>{head}</head>"
            f"<body>{body}</body></html>")


def table_html(frame: pd.DataFrame, numeric: Sequence[str] = (), links: Sequence[str | None] | None = None,
               link_column: str = "") -> str:
    """A frame as a plain table, every header and value escaped; ``links`` (one per row, or None) make
    ``link_column``'s cells links."""
    if frame.empty:
        return "<p><i>no rows</i></p>"
    head = "".join(f"<th>{esc_html(c)}</th>" for c in frame.columns)
    body = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for c, v in zip(frame.columns, row):
            text = esc_html(_cell(v))
            if links is not None and c == link_column and links[i]:
                text = f"<a href='{esc_html(links[i])}'>{text}</a>"
            right = c in numeric or (isinstance(v, int | float) and not isinstance(v, bool))
            cells.append(f"<td style='text-align:right'>{text}</td>" if right else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='wb-box'><table class='wb-grid'><tr>{head}</tr>{''.join(body)}</table></div>"


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
    banner = SIMULATED.format(what="every world here ran on" if sims and all(sims) else
                              f"{sum(sims)} of {len(sims)} worlds here ran on") if any(sims) else ""
    constant = "; ".join(f"{k}={v}" for k, v in index.constant.items())
    runs = "".join(f"<li><b>{esc_html(rs.name)}</b>: {esc_html(rs.records.dir)} · {esc_html(rs.kind.name)} world · "
                   f"study {esc_html(rs.study or '?')} · {len(rs.design.cells)} cells · {len(rs.records.worlds)} worlds"
                   + (f" · {len(rs.records.problems)} unreadable record lines" if rs.records.problems else "")
                   + "</li>" for rs in run_sets)
    cmp_html = ""
    if comparisons:
        from workbench.views.readable import STYLE, readable_html

        parts = []
        for title, table in comparisons:
            if isinstance(table, str):
                parts.append(f"<h3>{esc_html(title)}</h3><p>{esc_html(table)}</p>")
            else:
                parts.append(f"<h3>{esc_html(title)}</h3>" + readable_html(
                    table, caption=str(table.attrs.get("title", "")), searchable=False))
        cmp_html = (f"{STYLE}<h2 id='compare'>Run sets side by side: matched cells</h2>"
                    "<p class='wb-note'>The table of <code>workbench compare</code>: each later run set against the "
                    "first, cells matched on every factor; unmatched cells listed with the reason.</p>" + "".join(parts))
    body = (
        f"<h1>Worlds of {esc_html(names)}</h1>"
        f"<div class='wb-note'>study {esc_html(studies or '?')} · {n_worlds} worlds · shown by "
        f"<code>workbench view</code>, offline</div>{banner}<ul>{runs}</ul>"
        "<nav class='wb-tabs'><a href='#worlds'>Worlds</a><a href='#cells'>Cells: tokens, cost, latency</a>"
        + ("<a href='#compare'>Comparison</a>" if comparisons else "") + "</nav>"
        "<h2 id='worlds'>Every world</h2><div class='wb-note'>One row per world: its cell's factors (green), "
        "calls, tokens, cost and latency (purple) and the world's metrics (orange). Click a header to sort; "
        "filter any column in the row below it (numbers: <code>&gt;0</code>, <code>&lt;=0.5</code>, "
        "<code>1..5</code>); the search box finds worlds by the words of their replies, stored values and "
        "messages" + (f" (the first {search_chars:,} characters of each world's text)" if search_chars else "")
        + ". Click a world to open it."
        + (f" Same for every world: {esc_html(constant)}." if constant else "") + "</div>"
        f"<div class='wb-banner' id='wb-bundle-note'{'' if bundle_note else ' hidden'}>{esc_html(bundle_note)}</div>"
        "<div class='wb-controls'><input id='wb-search' type='search' placeholder='search replies and store values' "
        "aria-label='search'><span id='wb-count'></span><button id='wb-prev'>◀ previous</button><span id='wb-page'></span>"
        "<button id='wb-next'>next ▶</button><label>rows per page <select id='wb-size'><option>25</option>"
        "<option selected>50</option><option>100</option><option>500</option></select></label></div>"
        "<div class='wb-box'><table id='wb-index' class='wb-grid'><thead></thead><tbody></tbody></table></div>"
        "<h2 id='cells'>Cells: tokens, cost and latency</h2><p class='wb-note'>Per cell, over every model call of its "
        "worlds (click a cell to list its worlds): tokens, cost (USD, as the client reported it), latency per call "
        "(median and 95th percentile, seconds), retries (failed tries before the kept one), calls retried, "
        "and calls that ended in an error.</p>"
        + table_html(usage, links=cell_links(usage) if len(usage) else None, link_column="cell") + cmp_html
        + "<script src='mode.js'></script><script src='data/index.js'></script>"
        f"<script>{INDEX_JS}</script>")
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
    head = (f"<p><a href='{root}index.html'>← every world</a></p>"
            f"<h1>World <code>{esc_html(world_id)}</code></h1>"
            f"<div class='wb-note'>run set {esc_html(rs.name)} ({esc_html(rs.records.dir)}) · {esc_html(rs.kind.name)} "
            f"world · cell <b>{esc_html(rs.design.label(str(world['cell_id'])))}</b> · world {esc_html(world.get('world_index'))}"
            f" of its cell · run {esc_html(world.get('run'))} · valid <b>{esc_html(world.get('valid'))}</b>"
            + (f" · <span style='color:#b00020'>failed: {esc_html((failed or {}).get('cause') or failed)}</span>"
               if failed else "") + " · shown from the records, no model called</div>"
            + (SIMULATED.format(what="this world ran on") if sim else ""))
    summary = ("<section class='wb-section' id='facts'><h2>Cell factors, world metrics, usage</h2>"
               "<div style='display:flex;gap:28px;flex-wrap:wrap'>"
               f"<div><h2>Cell factors</h2>{table_html(_scalars(flatten(world.get('cell') or {})))}</div>"
               f"<div><h2>World metrics</h2>{table_html(_scalars(world.get('metrics') or {}))}</div>"
               f"<div><h2>Usage</h2>{table_html(_scalars(usage))}</div></div></section>")
    sections = []
    try:
        drawn = rs.kind.world_page(rs.records, world, steps)
    except Exception as exc:  # noqa: BLE001 - a view that cannot draw this world is said on the page
        drawn = [("Views", f"<p style='color:#b00020'>the {esc_html(rs.kind.name)} views could not draw this world: "
                           f"{esc_html(type(exc).__name__)}: {esc_html(exc)}</p>")]
    if not drawn:
        drawn = [("Replies", "".join(f"<details><summary>[{esc_html(s.get('seq'))}] {esc_html(s.get('agent'))}"
                                     f"</summary><pre>{esc_html((s.get('reply') or {}).get('text'))}</pre></details>"
                                     for s in steps))]
    for title, view in drawn:
        html = view if isinstance(view, str) else _figure_html(view)
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        sections.append(f"<section class='wb-section' id='{slug}'><h2>{esc_html(title)}</h2>"
                        f"<div class='wb-box'>{html}</div></section>")
    sections.append("<section class='wb-section' id='model-calls'><h2>Every model call: tokens, cost, latency, retries"
                    f"</h2>{table_html(calls)}</section>")
    scripts = f"<script>{SLIDER_JS}</script>"
    return _doc(f"{world_id} · workbench view", head + "".join(sections) + summary + scripts,
                head=f"<script src='{root}assets/plotly.min.js'></script>")
