"""The viewer's files: what ``workbench view --bundle OUT`` publishes and what ``workbench view`` serves.

Layout: ``index.html``, ``mode.js`` (bundle or server), ``data/index.js`` (the world index),
``data/search.js`` (each world's searchable text, loaded on first search),
``assets/plotly.min.js`` (the plotly package's own bundle, written once) and
``worlds/<run set>/<world>.html``. A bundle holds world pages for at most ``examples`` worlds
per cell (the index lists every world and says how many have a page); a server renders the
others when they are asked for."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.viewer.data import SEARCH_CHARS, Index, RunSet, build_index, cell_usage, comparisons, search_text
from workbench.viewer.pages import index_data, index_page, page_name, search_data, world_href, world_page

DEFAULT_EXAMPLES = 3  # world pages per cell in a bundle unless --examples says otherwise


@dataclass
class Site:
    root: Path
    run_sets: list[RunSet]
    index: Index
    pages: dict[tuple[str, str], str]  # (run set key, world id) -> the page written for it

    files: dict[tuple[str, str], tuple[RunSet, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.files = {(rs.key, page_name(str(w["world_id"]))): (rs, str(w["world_id"]))
                      for rs in self.run_sets for w in rs.records.worlds}

    def world_file(self, key: str, name: str) -> tuple[RunSet, str] | None:
        """The run set and world id a ``worlds/<key>/<name>`` page stands for, or None."""
        return self.files.get((key, name))

    def write_world(self, rs: RunSet, world_id: str) -> Path:
        path = self.root / world_href(rs.key, world_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_text(world_page(rs, world_id), encoding="utf-8")
        tmp.replace(path)
        return path


def example_worlds(rs: RunSet, examples: int) -> list[str]:
    """The first ``examples`` worlds of each cell (by world number), cells in run-set order."""
    by_cell: dict[str, list[dict]] = {}
    for w in sorted(rs.records.worlds, key=lambda w: (int(w.get("world_index") or 0), str(w["world_id"]))):
        by_cell.setdefault(str(w["cell_id"]), []).append(w)
    return [str(w["world_id"]) for c in rs.design.cells for w in by_cell.get(c, [])[:max(0, examples)]]


def build_site(run_sets: Sequence[RunSet], out: str | Path, *, examples: int = DEFAULT_EXAMPLES, server: bool = False,
               ignore: Sequence[str] = ()) -> Site:
    """Write the viewer's files for ``run_sets`` under ``out`` (created)."""
    import plotly.offline

    root = Path(out)
    for sub in ("assets", "data", "worlds"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    site = Site(root, list(run_sets), build_index(run_sets), {})
    plotly_js = root / "assets" / "plotly.min.js"
    if not plotly_js.exists():
        plotly_js.write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
    for rs in run_sets:
        for wid in example_worlds(rs, examples):
            site.write_world(rs, wid)
            site.pages[(rs.key, wid)] = world_href(rs.key, wid)
    total = len(site.index.worlds)
    note = ""
    if not server and len(site.pages) < total:
        note = (f"This bundle holds a page for at most {examples} worlds per cell ({len(site.pages)} of {total} worlds); "
                "the others are listed here without a page. Write more with `workbench view --bundle OUT --examples K`, "
                "or open any world with `workbench view RUN_DIR`.")
    texts = [search_text(w, rs.records.steps.get(str(w["world_id"]), [])) for rs in run_sets for w in rs.records.worlds]
    (root / "data" / "index.js").write_text(index_data(site.index, site.pages, "data/search.js"), encoding="utf-8")
    (root / "data" / "search.js").write_text(search_data(texts), encoding="utf-8")
    (root / "mode.js").write_text(f"window.WB_MODE = {'server' if server else 'bundle'!r};\n", encoding="utf-8")
    page = index_page(run_sets, site.index, cell_usage(run_sets), comparisons(run_sets, ignore), note,
                      search_chars=SEARCH_CHARS)
    (root / "index.html").write_text(page, encoding="utf-8")
    return site
