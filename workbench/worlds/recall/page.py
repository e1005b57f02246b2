"""The recall world's page: the report's turn timeline and retrieval ranks, the explorer's shared memory
after each turn (a slider), what each recalling agent had in context, and every model call."""
from __future__ import annotations

import json
from typing import Any

from workbench.views.escape import esc_html
from workbench.worlds.recall.views import context_html, retrieval_ranks, statements_html, turn_timeline


def memory_slider_html(world: dict[str, Any]) -> str:
    """Shared memory after each turn (the explorer's ``memory_at_turn``), one escaped table per turn, a range
    input choosing which is shown (works without a server: the tables are all in the page)."""
    from workbench.worlds.recall.views import memory_at_turn

    turns = sorted({int(t["turn"]) for t in world.get("turns") or []})
    if not turns:
        return "<p><i>no turns</i></p>"
    panes = []
    for i, t in enumerate(turns):
        rows = "".join("<tr>" + "".join(f"<td>{esc_html(v)}</td>" for v in (
            m.get("entry_id"), m.get("author_role"), m.get("authority"), m.get("turn"), m.get("namespace") or "",
            m.get("text"))) + "</tr>" for m in memory_at_turn(world, t))
        table = ("<table class='wb-grid'><tr><th>entry</th><th>author</th><th>authority</th><th>turn</th>"
                 f"<th>namespace</th><th>text</th></tr>{rows}</table>" if rows else "<p><i>empty</i></p>")
        hidden = "" if i == 0 else " hidden"
        panes.append(f"<div class='wb-pane' data-pane='{i}'{hidden}><b>shared memory after turn {t}</b>{table}</div>")
    labels = json.dumps([f"turn {t}" for t in turns])
    return (f"<div class='wb-slider'><input type='range' min='0' max='{len(turns) - 1}' value='0' "
            f"aria-label='turn'> <span class='wb-slider-label'>turn {turns[0]}</span>"
            f"<script type='application/json' class='wb-labels'>{labels}</script>"
            + "".join(panes) + "</div>")


def sections(records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    wid = f"<code>{esc_html(world.get('world_id'))}</code>"
    return [("Turn timeline", turn_timeline(world)),
            ("Retrieval ranks", retrieval_ranks(world)),
            ("Shared memory, turn by turn (slider)", memory_slider_html(world)),
            ("What each recalling agent had in context", f"<p>world {wid}</p>" + context_html(world)),
            ("Every model call", statements_html(world, steps))]
