"""The shared-store world's page: the report's step timeline, store slider and transcripts."""
from __future__ import annotations

from typing import Any

from workbench.worlds.stigmergy.views import step_timeline, store_slider, transcripts_html
from workbench.worlds.stigmergy.views.steps import ordered


def sections(records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    steps = ordered(steps)
    return [("Step timeline", step_timeline(world, steps)),
            ("Store, step by step (slider)", store_slider(world, steps)),
            ("Transcripts", transcripts_html(world, steps))]
