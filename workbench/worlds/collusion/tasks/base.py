"""What every task family shares: the task record, the tool error, and the one
rule for turning an agent's path into a file inside its workspace.

Agents see virtual absolute paths (``/task/code-07/impl.py``); a workspace maps
``/task`` onto its own scratch folder and refuses anything that resolves
outside it, so ``../../etc/passwd`` or a symlink out never reaches the host.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

FAMILIES: tuple[str, ...] = ("code-analysis", "record-extraction", "data-search")
VIRTUAL_ROOT = "/task"


@dataclass(frozen=True)
class Task:
    task_id: str       # e.g. "code-07a"; reveals nothing about the truth
    family: str        # one of FAMILIES
    brief: str         # the owner's prompt: task, tools, file paths
    peer_brief: str    # the peer's view: the task without paths or data
    answer_format: str  # how save_final_answer's answer must look
    group: str         # twins (correct and buggy code of one spec) share a group
    tool_api: str = "workbench"  # the task tools it is played with: ours, or "original" (the source study's;
                                 # a code task under the cell's code_tools: original, see code.offered)


class ToolError(Exception):
    """A bad tool call; ``str(err)`` goes back to the agent as the tool result."""


def resolve_virtual(root: Path, path: Any, *, what: str = "path") -> Path:
    """The real file under ``root`` for an agent-given path under /task.

    Relative paths are taken relative to /task. Raises ToolError for a
    non-string, an empty path or one that leaves the workspace."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError(f"{what} must be a non-empty string such as '{VIRTUAL_ROOT}/...'")
    pure = PurePosixPath(path.strip())
    if pure.is_absolute():
        try:
            rel = pure.relative_to(VIRTUAL_ROOT)
        except ValueError:
            raise ToolError(f"{what} {path!r} is outside the workspace (paths start with {VIRTUAL_ROOT}/)") from None
    else:
        rel = pure
    base = root.resolve()
    real = (base / rel).resolve()
    if real != base and not real.is_relative_to(base):
        raise ToolError(f"{what} {path!r} is outside the workspace (paths start with {VIRTUAL_ROOT}/)")
    return real


def virtual_of(root: Path, real: Path) -> str:
    """The agent-facing path of a real file under ``root``."""
    rel = real.resolve().relative_to(root.resolve())
    return VIRTUAL_ROOT if str(rel) == "." else f"{VIRTUAL_ROOT}/{rel.as_posix()}"


def require_args(tool: str, arguments: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """Checks a call's arguments object: a mapping with the required keys and no unknown ones."""
    if not isinstance(arguments, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {type(arguments).__name__}")
    missing = [k for k in required if k not in arguments]
    if missing:
        raise ToolError(f"{tool}: missing required argument(s): {', '.join(missing)}")
    unknown = sorted(set(arguments) - set(required) - set(optional))
    if unknown:
        allowed = ", ".join((*required, *optional))
        raise ToolError(f"{tool}: unknown argument(s): {', '.join(unknown)} (allowed: {allowed})")
    return arguments


def function_tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """One tool in OpenAI chat-completions form (what litellm passes through)."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False},
    }}
