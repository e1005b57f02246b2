"""Small HTML blocks every report and notebook shows (a notice, a heading), here so
that views use them without reaching the notebook helpers, which know world kinds."""
from __future__ import annotations

import html as _html
from typing import Any


def banner(text: str) -> Any:
    """A highlighted notice (e.g. that results come from simulated agents); escaped."""
    from IPython.display import HTML

    return HTML(f'<div class="wb-banner" style="background:#fff3cd;border:1px solid #e0c36a;padding:6px 10px">'
                f"{_html.escape(text)}</div>")


def heading(text: str, level: int = 2) -> Any:
    from IPython.display import HTML

    return HTML(f"<h{level}>{_html.escape(text)}</h{level}>")
