"""Reading user-written files (studies, the model catalogue): one error type whose
message names the file, the field path and what was expected, and one way of
turning a pydantic error into that message. Never a traceback."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workbench.errors import InputError

MAX_YAML_BYTES = 5_000_000  # a study file larger than this is not a study
MAX_YAML_NODES = 200_000  # values a file may expand to through aliases (an alias bomb expands to billions)


def expanded_size(value: Any, limit: int) -> int:
    """How many values ``value`` holds when every alias is written out, counting up to just past
    ``limit`` (YAML aliases share one object, so a few hundred bytes can stand for billions)."""
    seen = 0
    stack = [value]
    while stack:
        v = stack.pop()
        seen += 1
        if seen > limit:
            return seen
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return seen


def project_of(folder: Path) -> Path:
    """The project a study belongs to: the nearest folder above it holding ``.git``, else its own folder."""
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def confined(base_dir: str | Path, value: str, field: str) -> Path:
    """A path a study names, relative to its folder, kept inside its project: a relative path (or
    glob) that climbs out of it with ``..`` is refused; an absolute path the user wrote is taken."""
    if Path(value).is_absolute():
        return Path(value)
    base = Path(base_dir).resolve()
    target = (base / value).resolve()
    head = target
    for i, part in enumerate(Path(value).parts):  # a glob: judge the folder before its first pattern
        if any(ch in part for ch in "*?["):
            head = (base / Path(*Path(value).parts[:i])).resolve() if i else base
            break
    project = project_of(base)
    try:
        head.relative_to(project)
    except ValueError:
        raise InputError(f"{field}: {value!r} leads outside the study's project ({project}); write an absolute path "
                         "to read files elsewhere") from None
    return target


class InputFileError(InputError):
    """``str(err)`` is the one line shown to the user."""

    def __init__(self, file: str | Path, path: str, message: str) -> None:
        self.file, self.path, self.message = str(file), path, message
        super().__init__(f"{file}: {path}: {message}" if path else f"{file}: {message}")


def field_path(loc: tuple[Any, ...]) -> str:
    """pydantic's loc as a path a person can find in YAML: ``cells[2].condition``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def expected(err: dict[str, Any]) -> str:
    msg = err["msg"].removeprefix("Value error, ")
    if not err.get("loc"):
        return msg  # a rule over several fields: the whole input is no help
    if err["type"] == "extra_forbidden":
        return "unknown field (not part of the schema)"
    if err["type"] == "missing":
        return "required field is missing"
    if "input" in err:
        msg += f" (got {repr(err['input'])[:80]})"
    return msg


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(field path, what was expected) of the first problem pydantic found."""
    err = exc.errors()[0]
    return field_path(tuple(err["loc"])), expected(dict(err))


def read_yaml_mapping(path: Path, error: type[InputFileError], what: str, empty_ok: bool = False) -> dict[str, Any]:
    """A YAML file whose top level must be a mapping; syntax errors name the line."""
    import yaml

    if not path.is_file():
        raise error(path, "", f"file not found (expected {what})")
    if path.stat().st_size > MAX_YAML_BYTES:
        raise error(path, "", f"{path.stat().st_size} bytes; a study or catalogue file is at most {MAX_YAML_BYTES}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if raw is None and empty_ok:
        return {}
    size = expanded_size(raw, MAX_YAML_NODES)
    if size > MAX_YAML_NODES:
        raise error(path, "", f"expands to more than {MAX_YAML_NODES:,} values through YAML aliases (&anchor/*alias); "
                              "write the values out or use fewer nested aliases")
    if not isinstance(raw, dict):
        raise error(path, "", f"expected a mapping at the top level ({what}), got {type(raw).__name__}")
    return raw
