"""Small HTML blocks every report and notebook shows (a notice, a heading), here so
that views use them without reaching the notebook helpers, which know world kinds."""
from __future__ import annotations

from typing import Any

from workbench.views.markup import render


def banner(text: str) -> Any:
    """A highlighted notice (e.g. that results come from simulated agents); escaped."""
    from IPython.display import HTML

    return HTML(render("banner.html", text=text))


def heading(text: str, level: int = 2) -> Any:
    from IPython.display import HTML

    return HTML(render("heading.html", text=text, level=int(level)))
