"""Task families of the peer-verification world: code analysis, record extraction
and data search, all authored here (no copied task data).

The world calls only this module: ``all_tasks``/``get_task`` for the catalogue,
``task_tools`` for the task-phase tool schemas, ``Workspace`` to give each agent
its own files and run its tool calls, and ``evaluate`` to decide whether a saved
answer is right (the truth the verdict reward is paid against). The simulated
agents' ``Solver`` and the seeded ``episode_sequences`` live in sibling modules.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import InputError, UnknownNameError

from . import code, data, data_joins, imported, imported_play, records
from .base import FAMILIES, Task, ToolError
from .sequences import EpisodeTasks, SequenceFileError, episode_sequences, load_sequence_file
from .solver import Solver
from .validation import validate_answer

_MODULES = {"code-analysis": code, "record-extraction": records, "data-search": data}
_WORKSPACES: dict[str, Any] = {"code-analysis": code.CodeWorkspace, "record-extraction": records.workspace,
               "data-search": data.DataWorkspace}
_ALL: dict[str, Task] = {**code.TASKS, **records.TASKS, **data.TASKS}
# the multi-join questions, played in place of data.TASKS where a cell asks for them (tasks.forms)
_VARIANTS: dict[str, Task] = dict(data_joins.TASKS)


def all_builtin_ids() -> set[str]:
    """The ids of this workbench's own tasks (an imported pool may not reuse them)."""
    return set(_ALL) | set(_VARIANTS)


def all_tasks() -> dict[str, Task]:
    """Every task of the default pool by id, imported pools registered in this process included (a fresh
    dict; the tasks themselves are frozen). The multi-join questions (``dataj-NN``, played in place of
    ``data-NN`` under ``data_questions: multi-join``) are not in it; ``get_task`` finds them."""
    return {**_ALL, **imported.imported_tasks()}


def get_task(task_id: str) -> Task:
    task = _ALL.get(task_id) or _VARIANTS.get(task_id) or imported.imported_tasks().get(task_id)
    if task is None:
        raise UnknownNameError(f"unknown task id {task_id!r} (ids look like code-01a, rec-01, data-01, or an id "
                               f"of a pool brought in with `workbench collusion import-tasks`)")
    return task


def _module(family: str) -> Any:
    if family not in _MODULES:
        raise InputError(f"unknown task family {family!r}; expected one of {', '.join(FAMILIES)}")
    return _MODULES[family]


def evaluate(task: Task, answer: str) -> bool:
    """Is the saved answer correct? Never raises on a malformed answer (it is simply wrong)."""
    if not isinstance(answer, str):
        return False
    if imported.is_imported(task):
        return imported.evaluate(task, answer)
    return bool(_module(task.family).evaluate(task, answer))


def evaluation_detail(task: Task, answer: str | None) -> dict[str, Any]:
    """What a saved answer got wrong, not only whether: ``correct``; ``missing`` (expected ids, rows or the
    label that the answer lacks); ``extra`` (what it added); ``problem`` (unparseable, repeats; else None).
    ``answer`` None means nothing was saved."""
    if not isinstance(answer, str):
        return {"correct": False, "problem": "no answer saved", "missing": [], "extra": []}
    source = imported if imported.is_imported(task) else _module(task.family)
    detail = dict(source.evaluation_detail(task, answer))
    return {"correct": evaluate(task, answer), **detail}


def task_fingerprint(task: Task) -> str:
    """A short hash of everything an agent meets in a task and of its truth (briefs, the files the
    workspace holds, the reference answer): recordings keyed by it go stale when the task changes."""
    import hashlib
    import json

    if imported.is_imported(task):
        body = json.dumps([task.task_id, task.family, task.brief, task.peer_brief,
                           imported.fingerprint_content(task)], ensure_ascii=False)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    module = _module(task.family)
    content = {"code-analysis": lambda: code._SOURCES[task.task_id],
               "record-extraction": lambda: "\n".join(records._GEN[task.task_id].lines),
               "data-search": lambda: data.question(task).text()}[task.family]()
    body = json.dumps([task.task_id, task.family, task.brief, task.peer_brief, content,
                       str(module.reference_answer(task))], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def reference_answer(task: Task) -> str:
    """A correct answer in the task's answer format (for simulated agents and tests)."""
    if imported.is_imported(task):
        return imported.reference_answer(task)
    return str(_module(task.family).reference_answer(task))


def corrupt_answer(task: Task, answer: str) -> str:
    """A wrong answer close to ``answer`` (a flipped label, one id or row too few or too many):
    what a simulated agent with an error saves. ``evaluate`` rejects it whenever ``answer`` was right."""
    if imported.is_imported(task):
        return imported.corrupt(task, answer)
    return str(_module(task.family).corrupt(task, answer))


def code_label(task: Task) -> str:
    """The true label ("bug"/"no_bug") of a code-analysis task; ValueError for other families."""
    if task.family != "code-analysis":
        raise InputError(f"{task.task_id} is a {task.family} task; only code-analysis tasks have a label")
    if imported.is_imported(task):
        return imported.reference_answer(task)
    return code.label(task)


def task_tools(family: str | Task) -> list[dict[str, Any]]:
    """The task-phase tools of a family in OpenAI chat-completions form
    (``{"type": "function", "function": {name, description, parameters}}``),
    without save_final_answer/get_log, which the world adds. Given a Task, an imported one gets the source
    study's tools for its family (``imported_play``); a family name or one of our own tasks gets ours."""
    if isinstance(family, Task):
        if imported.is_imported(family):
            return imported_play.tools(family)
        if family.family == "code-analysis":
            return code.tools_for(family)  # ours, or the source study's under code_tools: original
        if family.family == "record-extraction":
            return records.tools_for(family)  # ours, or the source study's under extraction_ids: resolved
        family = family.family
    return _module(family).tools()


def offered_task(task: Task, code_tools: str = "workbench", extraction_ids: str = "shown") -> Task:
    """The task as a cell offers it: a code task of ours under ``code_tools: original`` gets the brief of
    the source study's tool API (``code.offered``; ``task_tools`` and ``Workspace`` follow it), an extraction
    task of ours under ``extraction_ids: resolved`` the source study's form (``records.offered``: no ids in
    the document, resolve_records); other tasks, imported ones included (always the source's tools), are
    returned as they are."""
    if imported.is_imported(task):
        return task
    if task.family == "record-extraction":
        return records.offered(task, extraction_ids)
    if task.family != "code-analysis":
        return task
    return code.offered(task, code_tools)


def import_task_pool(source: str | Path, out: str | Path) -> dict[str, Any]:
    """``workbench collusion import-tasks``: validate a pool in the source study's layout, write its copy to
    ``out`` and check every sequence folder it brought against the imported ids (see ``imported``)."""
    index = imported.import_pool(source, out)
    for name in index["sequences"]:
        load_sequence_file(Path(out) / "sequences" / name)
    return index


class Workspace:
    """One agent's files for one episode, under ``root`` (``root/task`` is what
    the agent sees as /task; ``root/scratch`` is the sandbox's). Nothing outside
    ``root`` is written."""

    def __init__(self, task: Task, root: Path) -> None:
        self.task = task
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        _module(task.family)
        if imported.is_imported(task):
            if task.family not in imported_play.WORKSPACES:
                raise InputError(f"{task.task_id}: imported {task.family} tasks cannot be played (no workspace "
                                 f"for that family)")
            self._impl = imported_play.WORKSPACES[task.family](task, self.root)
        else:
            self._impl = _WORKSPACES[task.family](task, self.root)
        self._closed = False

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Run one task tool; a bad tool name or bad arguments raise ToolError with a message for the agent."""
        if self._closed:
            raise ToolError("the task workspace is closed")
        if not isinstance(tool, str):
            raise ToolError(f"tool name must be a string, got {type(tool).__name__}")
        return self._impl.call(tool, arguments)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._impl.close()


__all__ = ["FAMILIES", "Task", "ToolError", "Workspace", "EpisodeTasks", "Solver", "all_tasks", "get_task",
           "evaluate", "evaluation_detail", "reference_answer", "task_fingerprint", "corrupt_answer", "code_label",
           "task_tools", "episode_sequences", "validate_answer", "all_builtin_ids", "import_task_pool",
           "SequenceFileError", "load_sequence_file", "offered_task"]
