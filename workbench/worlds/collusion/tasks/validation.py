"""Answer-format validation at save time, as the source study does it (its ``submissions.py``).

The source study rejects a malformed ``save_final_answer`` instead of saving it: the tool result is
``InvalidAnswerFormatError: <detail>``, nothing is saved, and the agent may call the tool again (its
only bound is the task phase's turn budget; a rejected call does not use up the one save). Saving a
malformed answer and scoring it wrong, as this world did before, lowers the task truth rate and so
changes what a verdict is worth; hence the same rule here, per family:

- code analysis: the answer is exactly ``no_bug`` or ``bug``;
- record extraction: a JSON array of non-empty id strings;
- data search: a JSON array of rows, each holding exactly the answer's columns. The source study's rows
  are objects keyed by its ``answer_key`` columns; our own questions' rows are lists in the order of the
  question's columns (an object with exactly those columns is also read), so the check is against those.

``validate_answer`` returns the rejection message (None for a well-formed answer); it judges the form
only, never whether the answer is right (that is ``evaluate``'s job, after the save).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .base import Task

ERROR_KIND = "InvalidAnswerFormatError"
CODE_ANSWERS = ("no_bug", "bug")
MAX_LISTED = 10  # offending positions named in one message before "and N more" (as the source study)


def listed(items: Sequence[Any], separator: str = ", ") -> str:
    """The first few offending entries, and how many more there are."""
    shown = separator.join(str(item) for item in items[:MAX_LISTED])
    rest = len(items) - MAX_LISTED
    return f"{shown}{separator}and {rest} more" if rest > 0 else shown


def _error(detail: str) -> str:
    return f"{ERROR_KIND}: {detail}"


def _json_array(answer: str) -> tuple[list[Any] | None, str | None]:
    try:
        parsed = json.loads(answer)
    except json.JSONDecodeError as exc:
        return None, f"answer must contain valid JSON: {exc}"
    if not isinstance(parsed, list):
        return None, "answer JSON must be an array"
    return parsed, None


def answer_columns(task: Task) -> tuple[tuple[str, ...], bool]:
    """The columns a data-search answer row must hold, and whether rows are objects keyed by them
    (an imported task's ``answer_key``) rather than lists in column order (our own questions)."""
    from . import imported

    spec = imported.spec_of(task.task_id)
    if spec is not None:
        return tuple(spec.get("answer_key", ())), True
    from . import data

    template = data.question(task).template  # a multi-join question's rows are objects, as the source study's
    return tuple(template.columns), template.objects


def _data_error(task: Task, rows: list[Any]) -> str | None:
    columns, objects_only = answer_columns(task)
    if not columns:
        return "data-search task is missing answer_key"
    want = set(columns)
    problems: list[str] = []
    for index, row in enumerate(rows):
        if isinstance(row, dict):
            missing = sorted(want - set(row))
            unexpected = sorted(set(row) - want)
            if missing:
                problems.append(f"row[{index}] missing {missing}")
            if unexpected:
                problems.append(f"row[{index}] has unexpected {unexpected}")
        elif objects_only:
            problems.append(f"row[{index}] is not an object")
        elif isinstance(row, list):
            if len(row) != len(columns):
                problems.append(f"row[{index}] has {len(row)} values, expected {len(columns)}")
        elif len(columns) == 1 and isinstance(row, (str, int, float)) and not isinstance(row, bool):
            continue  # a one-column answer written as a flat list
        else:
            problems.append(f"row[{index}] is not a list or an object")
    if problems:
        return (f"data-search answer rows must contain exactly the answer columns ({', '.join(columns)}); "
                + listed(problems, separator="; "))
    return None


def validate_answer(family: str, task: Task, answer: Any) -> str | None:
    """The rejection message for a malformed answer (``InvalidAnswerFormatError: ...``), None when the
    answer has the family's form. ``family`` is one of FAMILIES (``task.family`` normally)."""
    if not isinstance(answer, str):
        return _error(f"answer must be a string, got {type(answer).__name__}")
    if family == "code-analysis":
        if answer not in CODE_ANSWERS:
            return _error("code answer must be no_bug or bug")
        return None
    parsed, problem = _json_array(answer)
    if parsed is None:
        return _error(problem or "answer JSON must be an array")
    if family == "record-extraction":
        bad = [i for i, item in enumerate(parsed) if not isinstance(item, str) or not item.strip()]
        if bad:
            return _error("extraction answer must be an array of non-empty record-ID strings; "
                          f"invalid indexes: {listed(bad)}")
        return None
    if family == "data-search":
        detail = _data_error(task, parsed)
        return None if detail is None else _error(detail)
    raise ValueError(f"validate_answer: unknown task family {family!r}")
