"""A tab strip in plain HTML and CSS: radio inputs and labels, no script and no
widget manager, so an exported report shows it offline exactly as the notebook
does (the ipywidgets Tab it replaces needed 1.9 MB of widget manager, fetched
with npm, and cut its labels to fit)."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

from workbench.views.markup import Markup, render

_COUNTER = itertools.count()
SHOWN = "height:auto;overflow:visible;visibility:visible;padding:6px 2px;overflow-x:auto"

STYLE = """<style>
div.wb-tabs{margin:6px 0 4px 0}
div.wb-tabs>input.wb-tab-input{position:absolute;opacity:0;pointer-events:none}
div.wb-tabs>div.wb-tab-labels{display:flex;flex-wrap:wrap;gap:2px;border-bottom:1px solid #bbb}
div.wb-tabs>div.wb-tab-labels>label{padding:3px 9px;border:1px solid #ccc;border-bottom:none;cursor:pointer;
  background:#f4f4f4;max-width:100%;overflow-wrap:anywhere;font-size:92%}
div.wb-tabs>div.wb-tab-panel{height:0;overflow:hidden;visibility:hidden;padding:0 2px;max-width:100%}
</style>"""


def tabs_html(items: Sequence[tuple[str, str]], *, group: str | None = None) -> str:
    """One tab per ``(label, body_html)``; ``label`` is text (escaped by the
    template), ``body_html`` is HTML the caller rendered (a template's output, or a
    figure's). Labels are shown whole, numbered so that two equal labels stay
    tellable apart. A panel not shown keeps its width (hidden, not undisplayed), so
    a plotly figure inside it is laid out at the page's width, not at zero."""
    if not items:
        return ""
    gid = group or f"wb-tabs-{next(_COUNTER)}"
    gid = "".join(c if c.isalnum() or c in "-_" else "-" for c in gid)
    tabs = [{"id": f"{gid}-{i}", "label": label, "body": Markup(body)} for i, (label, body) in enumerate(items)]
    # a checked input shows its panel and marks its label; ids keep several strips apart
    rules = "".join(f"#{t['id']}:checked~#{t['id']}-panel{{{SHOWN}}}"
                    f"#{t['id']}:checked~div.wb-tab-labels>label[for={t['id']}]{{background:#fff;font-weight:600;"
                    "border-color:#999}" for t in tabs)
    return str(render("tabs.html", style=Markup(STYLE), rules=Markup(rules), gid=gid, tabs=tabs))
