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


class FigureExportError(SetupError):
    pass


def render_figures(folder: str | Path) -> list[Path]:
    """Write NAME.svg/.pdf/.png beside every NAME.json listed in the folder's index;
    returns the files written. A missing or failed image is an error, never a gap."""
    import plotly.io as pio

    folder = Path(folder)
    index_file = folder / INDEX
    if not index_file.exists():
        raise FigureExportError(f"{index_file} is missing: the report notebook saved no figure list "
                                "(does it call workbench.notebook.setup(figures_dir)?)")
    entries = json.loads(index_file.read_text(encoding="utf-8"))
    figs, paths, widths, heights = [], [], [], []
    for e in entries:
        fig = pio.from_json((folder / f"{e['name']}.json").read_text(encoding="utf-8"))
        for fmt in FORMATS:
            figs.append(fig)
            paths.append(folder / f"{e['name']}.{fmt}")
            widths.append(fig.layout.width or WIDTH)
            heights.append(fig.layout.height or HEIGHT)
    if not figs:
        return []
    try:
        pio.write_images(figs, paths, scale=PNG_SCALE, width=widths, height=heights)
    except Exception as exc:  # kaleido raises its own types (no chromium, a failed render)
        raise FigureExportError(f"kaleido could not write the figures into {folder}: {type(exc).__name__}: "
                                f"{exc} (kaleido needs Chromium: `make browser` installs Debian's)") from None
    missing = [p for p in paths if not p.exists() or p.stat().st_size == 0]
    if missing:
        raise FigureExportError(f"kaleido wrote no file for {', '.join(p.name for p in missing[:5])}")
    return paths
