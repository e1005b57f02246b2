"""Each world kind's world page, drawn with that kind's own view functions (the
report's and the explorer's). A module here per kind, named as the kind, with
``sections(records, world, steps) -> list[(title, html or plotly figure)]``;
found by name with importlib (as :mod:`workbench.worlds` finds kinds), so the
viewer's callers import no kind. A kind without a module here gets the kind-free
page (summary, calls and transcripts only)."""
from __future__ import annotations

import importlib
from typing import Any

Section = tuple[str, Any]  # (title, HTML text or a plotly figure)


def kind_sections(kind: str, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
    """The sections a kind draws for one world, or [] for a kind the viewer has no module for."""
    try:
        module = importlib.import_module(f"{__name__}.{kind}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{kind}":
            raise
        return []
    return list(module.sections(records, world, steps))
