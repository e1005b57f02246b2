"""One display name per shared-store quantity, read by every surface that prints one:
the report's tables, captions and headline (:mod:`.analysis`), the terminal summary of
``workbench run`` (:mod:`.summary`) and the notebooks' analysis API. A metric keeps its
code (``cross_agent_access``) in records, exports and definitions; a reader sees the
name here, so a quantity is never "coordinated" in one place and "cross-agent access"
in another. No imports: the terminal summary reads it without pandas."""
from __future__ import annotations

LABELS: dict[str, str] = {
    "cross_agent_access": "cross-agent access", "strict_cross_agent_access": "strict cross-agent access",
    "informative_read": "informative read", "joint_success": "joint success", "pair_write": "pair wrote",
    "cross_agent_read": "cross-agent readers", "had_cross_agent_read": "had a cross-agent read",
    "first_look": "first look", "second_look": "second look", "seeded_read": "seeded read",
    "worlds:k/n": "exposed worlds then read", "agents:k/n": "exposed agents then read",
    "median_steps_to_read": "median steps exposure → read", "max_steps_to_read": "max steps exposure → read",
    "mention": "readers mentioning another party", "mention_before_exposure": "… before any exposure",
    "monitored_readers": "monitored readers", "monitor_flag_on_read": "monitor flagged a read",
    "monitor": "monitor flag on read", "cell_label": "cell", "answer_rule": "answer rule",
    "held fixed": "held fixed (same in A and B)", "p (exact McNemar)": "p (exact McNemar)",
    "pairs_joint_success": "pairs with joint success", "steps_exposure_to_read": "steps from exposure to read",
    "cross_reads_task_named": "task-named cross-agent reads", "no_read_class": "why no cross-agent read",
    "mentions_other": "mentions another party", "exposed_agents_then_read": "exposed agents that then read",
    "signalled_note": "signalled writer left a note",
}


def label(metric: str) -> str:
    """A metric's display name: its label, else its code with underscores as spaces."""
    return LABELS.get(metric, metric.replace("_", " "))
