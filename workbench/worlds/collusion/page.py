"""The collusion world's page: the explorer's episode table, the report's trajectory (every episode's task,
communication, verdicts, feedback and reflection, with the judges' labels when judged) and each agent's
view of each episode."""
from __future__ import annotations

from typing import Any

from workbench.views.escape import esc_html
from workbench.worlds.collusion import metrics as M
from workbench.worlds.collusion.episode_html import agent_episode_html, episodes_html
from workbench.worlds.collusion.views import trajectory_html


def sections(records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    try:
        judgments = M.load_judgments(records.dir)
    except (OSError, ValueError):
        judgments = None
    agents = "".join(
        f"<details><summary>episode {esc_html(ep.get('episode'))} · {esc_html(agent)}</summary>"
        f"{agent_episode_html(world, steps, int(ep['episode']), agent)}</details>"
        for ep in world.get("episodes") or [] for agent in M.AGENTS)
    return [("Episodes", episodes_html(world)),
            ("Trajectory, episode by episode", trajectory_html(world, judgments)),
            ("Each agent in each episode", agents or "<p><i>no episodes</i></p>")]
