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

import functools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import InputError
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
            raise InputError(f"episode_sequences: {name} must be an integer >= {low}, got {value!r}")
    need = math.ceil(n_episodes / len(FAMILIES)) + math.ceil(warmup / len(FAMILIES))
    cap = capacity()
    short = {f: c for f, c in cap.items() if c < need}
    if short:
        raise InputError(
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


# --- imported sequences ---------------------------------------------------------------------------
# The source study stores its fixed sequences as a folder holding one ``repNNN_sampled_manifest.json`` per
# sequence (an object ``{"pairs": [{"tasks": [id, id]}, ...]}``) and a ``sampled_manifest_record.json`` that
# lists every run (``{"runs": [{"rep": n, "pairs": [{"episode": k, "task_type": t, "task_ids": [id, id]}]}]}``).
# A user's own copy in that format can be imported: a folder, a record file or one rep file. The ids must be
# ids of our task pool (we ship none of the source study's tasks); every problem names the field it is in.

RECORD_NAME = "sampled_manifest_record.json"
_TYPE_NAMES = {"code_analysis": "code-analysis", "record_extraction": "record-extraction",
               "text_extraction": "record-extraction", "data_search": "data-search"}


class SequenceFileError(InputError):
    """A sequence manifest that cannot be used; the message names the file and the field."""


def _family_of(task_type: Any, where: str) -> str:
    if not isinstance(task_type, str):
        raise SequenceFileError(f"{where}: expected a task type string, got {task_type!r}")
    name = _TYPE_NAMES.get(task_type, task_type)
    if name not in FAMILIES:
        raise SequenceFileError(f"{where}: unknown task type {task_type!r} (expected one of "
                                f"{', '.join(sorted(_TYPE_NAMES))})")
    return name


def _pair(ids: Any, where: str, task_type: Any, seen: dict[str, str], groups: dict[str, str]) -> EpisodeTasks:
    if not isinstance(ids, list) or len(ids) != 2:
        raise SequenceFileError(f"{where}: expected a list of two task ids, got {ids!r}")
    tasks: list[Task] = []
    for k, task_id in enumerate(ids):
        here = f"{where}[{k}]"
        if not isinstance(task_id, str) or not task_id:
            raise SequenceFileError(f"{here}: expected a task id string, got {task_id!r}")
        task = _ALL_TASKS().get(task_id)
        if task is None:
            raise SequenceFileError(
                f"{here}: no task {task_id!r} in this workbench's task pool (ids look like code-01a, rec-01, "
                f"data-01) nor in an imported pool (a task_pool.json written by `workbench collusion "
                f"import-tasks` beside the manifest or up to two folders above it)")
        if task_id in seen:
            raise SequenceFileError(f"{here}: task {task_id!r} already appears at {seen[task_id]} "
                                    f"(no task twice in a sequence)")
        if task.group in groups:
            raise SequenceFileError(f"{here}: task {task_id!r} is a twin of the task at {groups[task.group]} "
                                    f"(correct and buggy twins of one spec never share a sequence)")
        seen[task_id] = here
        groups[task.group] = here
        tasks.append(task)
    if tasks[0].family != tasks[1].family:
        raise SequenceFileError(f"{where}: the two tasks are of different families ({tasks[0].family} vs "
                                f"{tasks[1].family}); an episode gives both agents tasks of one family")
    if task_type is not None and _family_of(task_type, where.rsplit(".", 1)[0] + ".task_type") != tasks[0].family:
        raise SequenceFileError(f"{where.rsplit('.', 1)[0]}.task_type: says {task_type!r} but the tasks are "
                                f"{tasks[0].family} tasks")
    return EpisodeTasks(tasks[0].family, tasks[0].task_id, tasks[1].task_id)


def _ALL_TASKS() -> dict[str, Task]:
    from . import imported

    own = {tid: t for family in _FAMILY_TASKS.values() for tid, t in family.items()}
    return {**own, **imported.imported_tasks()}


def _rep_sequence(doc: Any, where: str) -> list[EpisodeTasks]:
    """One ``repNNN_sampled_manifest.json`` document: ``{"pairs": [{"tasks": [id, id]}, ...]}``."""
    if not isinstance(doc, dict):
        raise SequenceFileError(f"{where}: expected an object with a \"pairs\" list, got {type(doc).__name__}")
    pairs = doc.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise SequenceFileError(f"{where}.pairs: expected a non-empty list of {{\"tasks\": [id, id]}} entries")
    seen: dict[str, str] = {}
    groups: dict[str, str] = {}
    out = []
    for i, entry in enumerate(pairs):
        here = f"{where}.pairs[{i}]"
        if not isinstance(entry, dict) or "tasks" not in entry:
            raise SequenceFileError(f"{here}.tasks: missing (each pair is {{\"tasks\": [id, id]}})")
        unknown = sorted(set(entry) - {"tasks"})
        if unknown:
            raise SequenceFileError(f"{here}: unknown field(s) {', '.join(unknown)} (a pair holds only \"tasks\")")
        out.append(_pair(entry["tasks"], f"{here}.tasks", None, seen, groups))
    return out


def _record_sequences(doc: Any, where: str) -> list[list[EpisodeTasks]]:
    """A ``sampled_manifest_record.json`` document: its ``runs`` in order of ``rep``."""
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not runs:
        raise SequenceFileError(f"{where}.runs: expected a non-empty list of runs")
    reps: dict[int, str] = {}
    out: list[tuple[int, list[EpisodeTasks]]] = []
    for r, run in enumerate(runs):
        here = f"{where}.runs[{r}]"
        if not isinstance(run, dict):
            raise SequenceFileError(f"{here}: expected an object, got {type(run).__name__}")
        rep = run.get("rep", r + 1)
        if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
            raise SequenceFileError(f"{here}.rep: expected a positive integer, got {rep!r}")
        if rep in reps:
            raise SequenceFileError(f"{here}.rep: rep {rep} already used by {reps[rep]}")
        reps[rep] = here
        pairs = run.get("pairs")
        if not isinstance(pairs, list) or not pairs:
            raise SequenceFileError(f"{here}.pairs: expected a non-empty list of episode pairs")
        seen: dict[str, str] = {}
        groups: dict[str, str] = {}
        seq = []
        for i, entry in enumerate(pairs):
            p = f"{here}.pairs[{i}]"
            if not isinstance(entry, dict) or "task_ids" not in entry:
                raise SequenceFileError(f"{p}.task_ids: missing")
            episode = entry.get("episode", i + 1)
            if episode != i + 1:
                raise SequenceFileError(f"{p}.episode: expected {i + 1} (pairs in episode order), got {episode!r}")
            seq.append(_pair(entry["task_ids"], f"{p}.task_ids", entry.get("task_type"), seen, groups))
        for key, expected in (("pair_count", len(seq)), ("task_count", 2 * len(seq))):
            if key in run and run[key] != expected:
                raise SequenceFileError(f"{here}.{key}: says {run[key]!r} but the run has {expected}")
        out.append((rep, seq))
    if isinstance(doc, dict) and "pairs_per_run" in doc:
        for r, (_rep, seq) in enumerate(out):
            if len(seq) != doc["pairs_per_run"]:
                raise SequenceFileError(f"{where}.runs[{r}].pairs: {len(seq)} pairs, but pairs_per_run says "
                                        f"{doc['pairs_per_run']!r}")
    return [seq for _rep, seq in sorted(out, key=lambda x: x[0])]


def load_sequence_file(path: str | Path) -> list[list[EpisodeTasks]]:
    """The sequences of a manifest in the source study's format (a folder, its record file, or one rep file),
    validated; SequenceFileError names the file and field of the first problem. A manifest inside an
    imported pool (``task_pool.json`` beside it or up to two folders above) may name that pool's ids."""
    from . import imported

    p = Path(path)
    pool = imported.find_pool(p) if p.exists() else None
    if pool is not None:
        imported.register_pool(pool)
    if p.is_dir():
        record = p / RECORD_NAME
        if record.is_file():
            return _record_sequences(_read_json(record), record.name)
        reps = sorted(p.glob("rep*_sampled_manifest.json"))
        if not reps:
            raise SequenceFileError(f"{p}: no {RECORD_NAME} and no rep*_sampled_manifest.json files")
        return [_rep_sequence(_read_json(f), f.name) for f in reps]
    if not p.is_file():
        raise SequenceFileError(f"sequences_file: {p} does not exist")
    doc = _read_json(p)
    if isinstance(doc, dict) and "runs" in doc:
        return _record_sequences(doc, p.name)
    return [_rep_sequence(doc, p.name)]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SequenceFileError(f"{path}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise SequenceFileError(f"{path.name}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                f"{exc.msg})") from None


def check_imported(sequences: list[list[EpisodeTasks]], n_total: int, needed: int, where: str) -> None:
    """Each imported sequence must have warm-up + evaluation episodes, and there must be one per world."""
    for i, seq in enumerate(sequences):
        if len(seq) != n_total:
            raise SequenceFileError(f"{where}: sequence {i + 1} has {len(seq)} episodes but the cell plays "
                                    f"warmup + episodes = {n_total}")
    if len(sequences) < needed:
        raise SequenceFileError(f"{where}: {len(sequences)} sequence(s), but world index {needed - 1} needs "
                                f"at least {needed}")


def imported_sequence(cell: Any, index: int, base_dir: Path | None) -> tuple[EpisodeTasks, ...]:
    """Sequence ``index`` of the cell's ``sequences_file`` (relative to ``base_dir``), checked against the cell."""
    path = Path(cell.sequences_file)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    seqs = _load_cached(str(path.resolve()))
    check_imported(seqs, cell.warmup + cell.episodes, index + 1, f"sequences_file {cell.sequences_file}")
    return tuple(seqs[index])


@functools.lru_cache(maxsize=8)
def _load_cached(path: str) -> list[list[EpisodeTasks]]:
    return load_sequence_file(path)
