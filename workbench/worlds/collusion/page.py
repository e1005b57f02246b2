"""The collusion world's page: the explorer's episode table, the report's trajectory (every episode's task,
communication, verdicts, feedback and reflection, with the judges' labels when judged) and each agent's
view of each episode."""
from __future__ import annotations

from typing import Any

from workbench.views.escape import as_text
from workbench.views.markup import Markup, render
from workbench.worlds.collusion import metrics as M
from workbench.worlds.collusion.episode_html import agent_episode_html, episodes_html
from workbench.worlds.collusion.views import trajectory_html


def sections(records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    try:
        judgments = M.load_judgments(records.dir)
    except (OSError, ValueError):
        judgments = None
    parts = [{"episode": as_text(ep.get("episode")), "agent": agent,
              "body": Markup(agent_episode_html(world, steps, int(ep["episode"]), agent))}
             for ep in world.get("episodes") or [] for agent in M.AGENTS]
    agents = render("collusion_agents.html", parts=parts) if parts else render("note.html", text="no episodes")
    return [("Episodes", episodes_html(world)),
            ("Trajectory, episode by episode", trajectory_html(world, judgments)),
            ("Each agent in each episode", str(agents))]
