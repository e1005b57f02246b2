"""The recall world's page: the report's turn timeline and retrieval ranks, the explorer's shared memory
after each turn (a slider), what each recalling agent had in context, and every model call."""
from __future__ import annotations

import json
from typing import Any

from workbench.views.escape import as_text
from workbench.views.markup import Markup, render
from workbench.worlds.recall.views import context_html, retrieval_ranks, statements_html, turn_timeline


def memory_slider_html(world: dict[str, Any]) -> str:
    """Shared memory after each turn (the explorer's ``memory_at_turn``), one escaped table per turn, a range
    input choosing which is shown (works without a server: the tables are all in the page)."""
    from workbench.worlds.recall.views import memory_at_turn

    turns = sorted({int(t["turn"]) for t in world.get("turns") or []})
    if not turns:
        return str(render("note.html", text="no turns"))
    panes = [{"turn": t, "rows": [[as_text(v) for v in (m.get("entry_id"), m.get("author_role"), m.get("authority"),
                                                         m.get("turn"), m.get("namespace") or "", m.get("text"))]
                                  for m in memory_at_turn(world, t)]} for t in turns]
    # the labels are JSON inside a script element: "<" written as \u003c so no text can close the element
    labels = json.dumps([f"turn {t}" for t in turns]).replace("<", "\\u003c")
    return str(render("recall_memory_slider.html", panes=panes, labels=Markup(labels)))


def sections(records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    context = render("recall_context_heading.html", world_id=as_text(world.get("world_id")),
                     context=Markup(context_html(world)))
    return [("Turn timeline", turn_timeline(world)),
            ("Retrieval ranks", retrieval_ranks(world)),
            ("Shared memory, turn by turn (slider)", memory_slider_html(world)),
            ("What each recalling agent had in context", str(context)),
            ("Every model call", statements_html(world, steps))]
