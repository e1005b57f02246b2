"""Where a report's figures go besides the page: with a folder set (``workbench
report DIR --figures OUT``), every figure a notebook shows through
:func:`workbench.views.readable.show_figure` is also saved there as plotly JSON
with its caption, in the order shown; :mod:`workbench.publish.figures` then turns
them into SVG, PDF and PNG in one kaleido session (one browser start, not one
per figure)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

INDEX = "figures.json"

_sink: dict[str, Any] = {"dir": None, "count": 0}


def save_figures_to(folder: str | Path | None) -> None:
    """Start saving shown figures into ``folder`` (created); ``None`` or "" stops."""
    if not folder:
        _sink.update(dir=None, count=0)
        return
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / INDEX).write_text("[]\n", encoding="utf-8")
    _sink.update(dir=path, count=0)


def _slug(text: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:48].rstrip("-") or "figure"


def _figure_title(fig: Any) -> str:
    try:
        text = fig.layout.title.text
    except AttributeError:
        return ""
    return re.sub(r"<[^>]*>", " ", str(text or "")).split("  ")[0]


def collect(fig: Any, caption: str, title: str = "") -> Path | None:
    """Save one shown figure (a plotly figure; anything else, e.g. a note shown in
    place of a figure, is not one and is skipped). Returns the JSON written."""
    folder = _sink["dir"]
    if folder is None or not hasattr(fig, "to_json"):
        return None
    _sink["count"] += 1
    heading = title or _figure_title(fig) or caption
    name = f"{_sink['count']:02d}-{_slug(heading)}"
    path = folder / f"{name}.json"
    path.write_text(fig.to_json(), encoding="utf-8")
    index_file = folder / INDEX
    index = json.loads(index_file.read_text(encoding="utf-8"))
    index.append({"name": name, "title": title, "caption": caption})
    index_file.write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
