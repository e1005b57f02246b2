"""A report's figures as files for papers: the plotly JSON the report notebook
saved (:mod:`workbench.views.figure_sink`) rendered to SVG, PDF and PNG by kaleido,
which drives the machine's Chromium (Debian's, installed by ``make browser``)."""
from __future__ import annotations

import json
from pathlib import Path

from workbench.errors import SetupError
from workbench.views.figure_sink import INDEX

FORMATS = ("svg", "pdf", "png")
PNG_SCALE = 2  # print resolution for a column-wide figure
WIDTH = 1100  # a figure that sets no width: the report's column, so legends beside a plot leave it room
HEIGHT = 550
TIMEOUT_S = 180  # per figure; kaleido's default (90 s) is short for a first render on a loaded 2-core machine


class FigureExportError(SetupError):
    pass


def render_figures(folder: str | Path) -> list[Path]:
    """Write NAME.svg/.pdf/.png beside every NAME.json listed in the folder's index;
    returns the files written. A missing or failed image is an error, never a gap:
    kaleido reports a figure that failed (e.g. timed out on a loaded machine) by
    returning its error, so those are tried once more before giving up."""
    import plotly.io as pio

    folder = Path(folder)
    index_file = folder / INDEX
    if not index_file.exists():
        raise FigureExportError(f"{index_file} is missing: the report notebook saved no figure list "
                                "(does it call workbench.notebook.setup(figures_dir)?)")
    specs = []
    for e in json.loads(index_file.read_text(encoding="utf-8")):
        fig = pio.from_json((folder / f"{e['name']}.json").read_text(encoding="utf-8")).to_dict()
        width = (fig.get("layout") or {}).get("width") or WIDTH
        height = (fig.get("layout") or {}).get("height") or HEIGHT
        specs += [{"fig": fig, "path": folder / f"{e['name']}.{fmt}",
                   "opts": {"format": fmt, "width": width, "height": height, "scale": PNG_SCALE}} for fmt in FORMATS]
    errors: list[str] = []
    todo = specs
    for _attempt in range(2):
        errors = _write(todo)
        todo = [s for s in todo if not s["path"].exists() or s["path"].stat().st_size == 0]
        if not todo:
            return [s["path"] for s in specs]
    raise FigureExportError(f"kaleido wrote no file for {', '.join(s['path'].name for s in todo[:5])}"
                            + (f": {'; '.join(errors[:3])}" if errors else ""))


def _write(specs: list[dict]) -> list[str]:
    """One kaleido session (one browser start) for every spec; the errors it returned."""
    import kaleido

    try:
        returned = kaleido.write_fig_from_object_sync(specs, kopts={"timeout": TIMEOUT_S})
    except Exception as exc:  # kaleido raises its own types (no chromium, a browser that would not start)
        raise FigureExportError(f"kaleido could not write figures: {type(exc).__name__}: {exc} (kaleido needs "
                                "Chromium: `make browser` installs Debian's)") from None
    return [f"{type(e).__name__}: {e}" for e in returned or ()]
