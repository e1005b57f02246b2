"""A tab strip in plain HTML and CSS: radio inputs and labels, no script and no
widget manager, so an exported report shows it offline exactly as the notebook
does (the ipywidgets Tab it replaces needed 1.9 MB of widget manager, fetched
with npm, and cut its labels to fit)."""
from __future__ import annotations

import html
import itertools
from collections.abc import Sequence

_COUNTER = itertools.count()

STYLE = """<style>
div.wb-tabs{margin:6px 0 4px 0}
div.wb-tabs>input.wb-tab-input{position:absolute;opacity:0;pointer-events:none}
div.wb-tabs>div.wb-tab-labels{display:flex;flex-wrap:wrap;gap:2px;border-bottom:1px solid #bbb}
div.wb-tabs>div.wb-tab-labels>label{padding:3px 9px;border:1px solid #ccc;border-bottom:none;cursor:pointer;
  background:#f4f4f4;max-width:100%;overflow-wrap:anywhere;font-size:92%}
div.wb-tabs>div.wb-tab-panel{display:none;padding:6px 2px;max-width:100%;overflow-x:auto}
</style>"""


def tabs_html(items: Sequence[tuple[str, str]], *, group: str | None = None) -> str:
    """One tab per ``(label, body_html)``; ``label`` is text (escaped here),
    ``body_html`` is HTML the caller has already escaped. Labels are shown whole,
    numbered so that two equal labels stay tellable apart."""
    if not items:
        return ""
    gid = group or f"wb-tabs-{next(_COUNTER)}"
    gid = "".join(c if c.isalnum() or c in "-_" else "-" for c in gid)
    inputs, labels, panels, rules = [], [], [], []
    for i, (label, body) in enumerate(items):
        tid = f"{gid}-{i}"
        inputs.append(f'<input class="wb-tab-input" type="radio" name="{gid}" id="{tid}"'
                      f'{" checked" if i == 0 else ""}>')
        labels.append(f'<label for="{tid}" title="{html.escape(label, quote=True)}">{i + 1}. '
                      f"{html.escape(label)}</label>")
        panels.append(f'<div class="wb-tab-panel" id="{tid}-panel">{body}</div>')
        # a checked input shows its panel and marks its label; ids keep several strips apart
        rules.append(f"#{tid}:checked~#{tid}-panel{{display:block}}"
                     f"#{tid}:checked~div.wb-tab-labels>label[for={tid}]{{background:#fff;font-weight:600;"
                     f"border-color:#999}}")
    return (f"{STYLE}<style>{''.join(rules)}</style><div class=\"wb-tabs\" id=\"{gid}\">{''.join(inputs)}"
            f"<div class=\"wb-tab-labels\">{''.join(labels)}</div>{''.join(panels)}</div>")
