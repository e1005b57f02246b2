"""Escaping for everything a model or the store wrote, before it enters HTML.

Two targets, one rule each:

- real HTML (transcripts, Styler cells): :func:`esc_html`, i.e. ``html.escape``
  with quotes escaped too;
- plotly text (hover, marker text, table cells, titles, tick labels): plotly
  interprets a subset of HTML tags (``<b>``, ``<br>``, ``<a href>`` ...) and
  decodes entities, so ``&``, ``<`` and ``>`` are escaped by :func:`esc_plot`
  and plotly shows them as text.

Values are turned into text first (:func:`as_text`), then cut (:func:`short`),
then escaped, so an escape sequence is never cut in half.
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from workbench.records import json_text as answer_text


def as_text(value: Any) -> str:
    """A stored value or answer as text: strings as-is, anything else as JSON."""
    return "" if value is None else answer_text(value)


def short(text: Any, n: int = 300) -> str:
    """At most ``n`` characters, with an ellipsis when cut."""
    s = as_text(text)
    return s if len(s) <= n else s[: max(0, n - 1)] + "…"


def esc_html(text: Any) -> str:
    """For HTML documents: ``html.escape`` of the text form, quotes included."""
    return html.escape(as_text(text), quote=True)


def esc_plot(text: Any, n: int | None = None, *, newlines: bool = True) -> str:
    """For plotly strings: escape ``&``, ``<`` and ``>`` (cut to ``n`` characters
    first when given); line breaks become ``<br>`` when ``newlines``, else ``⏎``."""
    s = as_text(text) if n is None else short(text, n)
    s = html.escape(s, quote=False)
    return s.replace("\r\n", "\n").replace("\n", "<br>" if newlines else "⏎")


def plot_lines(lines: Iterable[str]) -> str:
    """Join lines that are already escaped into one plotly hover text."""
    return "<br>".join(lines)
