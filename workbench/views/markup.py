"""HTML from Jinja2 templates with autoescape on: the one way the package writes HTML.

Model- and script-written text is data. Building HTML in f-strings means escaping by
hand at every site, and one missed site is an injection (or, in JupyterLab, a ``$…$``
value typeset by MathJax as italics: the ground truth a researcher reads would be
wrong). Templates under ``workbench/views/html/`` are rendered with autoescape, so a
value is escaped unless code marks it :class:`Markup` on purpose (a fragment this
module rendered itself), and every block is wrapped in an element MathJax skips.

Use :func:`render` for a template file, :func:`render_string` for a one-line snippet
that is not worth a file (still autoescaped), and :func:`join` to put rendered
fragments together.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from markupsafe import Markup, escape

__all__ = ["Markup", "escape", "join", "render", "render_string"]

# JupyterLab's MathJax skips an element with this class (and its children): a "$240,000 | $240,000"
# in a table stays as written. The viewer and published reports carry no MathJax; harmless there.
NO_MATH = "tex2jax_ignore mathjax_ignore"


@lru_cache(maxsize=1)
def _env() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("workbench.views", "html"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)
    env.globals["NO_MATH"] = NO_MATH
    return env


def render(name: str, /, **context: Any) -> Markup:
    """Template ``workbench/views/html/NAME`` rendered with ``context`` (autoescaped)."""
    return Markup(_env().get_template(name).render(**context))


@lru_cache(maxsize=512)
def _compiled(source: str) -> Any:
    return _env().from_string(source)


def render_string(source: str, /, **context: Any) -> Markup:
    """A short inline template (a span, a link) rendered with autoescape, like a file template."""
    return Markup(_compiled(source).render(**context))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Fragments as one: Markup parts kept as they are, anything else escaped."""
    return Markup(escape(sep)).join(p if isinstance(p, Markup) else escape(p) for p in parts)
