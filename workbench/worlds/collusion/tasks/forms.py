"""Which data-search questions a cell plays (its ``data_questions``), applied to an episode sequence.

A sequence is drawn (or imported) with the default ids; under ``data_questions: multi-join`` the cell
plays, at the same places, the multi-join questions: ``data-NN`` -> ``dataj-NN`` (another task, with
its own truth, so its own id: the records name the question each agent really had). The map is one to
one, so the sequence's invariants (no task twice, both agents on the same family) still hold and every
cell plays the same families at the same places. Other tasks pass through unchanged. (Record extraction
under ``extraction_ids: resolved`` keeps its ids: the truth is the same, only the form differs; see
``records.offered``.)
"""
from __future__ import annotations

from collections.abc import Iterable

from . import data
from .sequences import EpisodeTasks

DATA_QUESTIONS: tuple[str, ...] = ("simple", "multi-join")


def task_id_in_form(task_id: str, data_questions: str = "simple") -> str:
    """The id a cell with this option plays in place of ``task_id`` (either form may be given)."""
    base = data.simple_id(task_id)
    if base in data.TASKS:
        return data.multi_join_id(base) if data_questions == "multi-join" else base
    return task_id


def in_form(sequence: Iterable[EpisodeTasks], data_questions: str = "simple") -> tuple[EpisodeTasks, ...]:
    """The sequence with each of our data-search ids in the cell's form."""
    return tuple(EpisodeTasks(ep.family, task_id_in_form(ep.alice, data_questions),
                              task_id_in_form(ep.bob, data_questions)) for ep in sequence)
