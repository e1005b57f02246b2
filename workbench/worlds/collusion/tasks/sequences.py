"""Fixed episode sequences: which tasks Alice and Bob get in each episode.

Sequences are drawn from a seed so that every model and condition plays the
same tasks (world i plays sequence i). Invariants, all checked by tests over
many seeds:
- both agents of an episode get different tasks of the same family;
- no group appears twice in a sequence (so twins are never paired, and an
  agent never meets the twin of a spec it or its peer saw earlier), hence no
  task twice, warm-up included;
- the evaluation episodes cycle through the families, so with three or more of
  them every family appears (warm-up episodes are balanced the same way);
- the code tasks of a sequence are half buggy, half correct (one extra of
  either when their number is odd), so "bug" is no safer a guess than "no_bug".
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from workbench.seeding import rng_for

from . import code, data, records
from .base import FAMILIES, Task

_FAMILY_TASKS: dict[str, dict[str, Task]] = {"code-analysis": code.TASKS, "record-extraction": records.TASKS,
                                             "data-search": data.TASKS}


@dataclass(frozen=True)
class EpisodeTasks:
    family: str
    alice: str  # task id
    bob: str    # task id


def _groups(family: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for task in _FAMILY_TASKS[family].values():
        out.setdefault(task.group, []).append(task.task_id)
    return {g: sorted(ids) for g, ids in sorted(out.items())}


def _family_plan(rng: random.Random, n: int) -> list[str]:
    """n families, each appearing floor(n/3) or ceil(n/3) times, in a seeded order."""
    order = list(FAMILIES)
    rng.shuffle(order)
    plan = [order[i % len(order)] for i in range(n)]
    rng.shuffle(plan)
    return plan


def capacity() -> dict[str, int]:
    """Episodes of each family that fit in one sequence (two unused groups per episode)."""
    return {f: len(_groups(f)) // 2 for f in FAMILIES}


def episode_sequences(seed: int, n_sequences: int, n_episodes: int, warmup: int = 0) -> list[list[EpisodeTasks]]:
    """``n_sequences`` lists of ``warmup + n_episodes`` episodes (warm-up first), deterministic from ``seed``."""
    for name, value, low in (("n_sequences", n_sequences, 1), ("n_episodes", n_episodes, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"episode_sequences: {name} must be an integer >= {low}, got {value!r}")
    need = math.ceil(n_episodes / len(FAMILIES)) + math.ceil(warmup / len(FAMILIES))
    cap = capacity()
    short = {f: c for f, c in cap.items() if c < need}
    if short:
        raise ValueError(
            f"episode_sequences: {warmup} warm-up + {n_episodes} episodes need up to {need} episodes of each family "
            f"in one sequence, but the task pool holds enough distinct groups for only "
            + ", ".join(f"{c} of {f}" for f, c in sorted(short.items()))
            + " (no task or twin may repeat within a sequence); ask for fewer episodes")
    groups = {f: _groups(f) for f in FAMILIES}
    out: list[list[EpisodeTasks]] = []
    for index in range(n_sequences):
        rng = rng_for("collusion-sequences", seed, index)
        plan = _family_plan(rng, warmup) + _family_plan(rng, n_episodes)
        picks: dict[str, list[str]] = {}
        for family in FAMILIES:
            k = 2 * plan.count(family)
            chosen = rng.sample(list(groups[family]), k)
            if family == "code-analysis":
                labels = ["bug", "no_bug"] * (k // 2)
                rng.shuffle(labels)
                picks[family] = [_twin_with(groups[family][g], want) for g, want in zip(chosen, labels)]
            else:
                picks[family] = [rng.choice(groups[family][g]) for g in chosen]
        sequence = []
        for family in plan:
            alice, bob = picks[family].pop(), picks[family].pop()
            sequence.append(EpisodeTasks(family, alice, bob))
        out.append(sequence)
    return out


def _twin_with(task_ids: list[str], label: str) -> str:
    for task_id in task_ids:
        if code.label(code.TASKS[task_id]) == label:
            return task_id
    raise RuntimeError(f"code group of {task_ids} has no {label} twin")  # the data guarantees one
