"""Reply parsing: turning a model's text into one operation.

Two rules decide validity (a study parameter): ``strict`` needs the whole reply to
be one JSON object; ``lenient`` takes the text from the first ``{`` to the last
``}`` (the reference implementation's rule, which accepts prose before JSON).
Whatever rule decides, every reply is also classified (fenced, prose-wrapped,
several objects), because the source paper found that these shapes alone could
remove whole cells. Parsing never raises: model text is data.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from workbench.errors import InputError
from workbench.records import as_record

ParserRule = Literal["strict", "lenient"]
PARSER_RULES: tuple[str, ...] = ("strict", "lenient")

_FENCE = re.compile(r"```")
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class ReplyShape:
    """What the reply looks like, independent of any rule."""

    n_objects: int = 0
    multi_object: bool = False
    fenced: bool = False
    prose_wrapped: bool = False
    empty: bool = False


@dataclass(frozen=True)
class ParseOutcome:
    rule: str
    valid: bool
    op: dict[str, Any] | None = None
    error: str | None = None

    def to_record(self) -> dict[str, Any]:
        # built by hand: asdict() would deep-copy (and recurse into) model-written values
        return {"rule": self.rule, "valid": self.valid, "op": self.op, "error": self.error}


MAX_DEPTH = 32  # deeper model-written JSON is refused, so that records stay serialisable


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON value, counted iteratively (no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def top_level_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every JSON object that starts at top level in ``text``: (start, end, value)."""
    found: list[tuple[int, int, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find("{", i)
        if j < 0:
            break
        try:
            value, end = _decoder.raw_decode(text, j)
        except (ValueError, RecursionError):
            i = j + 1
            continue
        if isinstance(value, dict):
            found.append((j, end, value))
            i = end
        else:  # pragma: no cover - raw_decode at "{" only yields dicts
            i = j + 1
    return found


def reply_shape(text: str) -> ReplyShape:
    stripped = text.strip()
    if not stripped:
        return ReplyShape(empty=True)
    objs = top_level_objects(stripped)
    prose = False
    if objs:
        outside = stripped[: objs[0][0]] + stripped[objs[-1][1]:]
        for a, b in zip(objs, objs[1:]):
            outside += stripped[a[1] : b[0]]
        fenced = bool(_FENCE.search(outside))  # backticks inside a JSON string are not a fence
        outside = re.sub(r"```[a-zA-Z]*", "", outside)
        prose = bool(outside.strip())
    else:
        fenced = bool(_FENCE.search(stripped))
        prose = True
    return ReplyShape(
        n_objects=len(objs),
        multi_object=len(objs) > 1,
        fenced=fenced,
        prose_wrapped=prose and bool(objs),
    )


DECODE_DEPTH = 256  # deeper text is refused before decoding (no operation can be that deep: MAX_DEPTH)
_JSON_TOKENS = re.compile(r'\\.|["{}\[\]]', re.DOTALL)


def _nested_deeper_than(text: str, limit: int) -> bool:
    """Whether brackets outside JSON strings nest deeper than ``limit`` in ``text``.

    Why: json's decoder recurses in C and stops at the interpreter's recursion limit,
    which counts the caller's frames too, so near that depth the same text gave a
    RecursionError from one call path and a syntax error from another, one frame
    shallower: a record's error depended on who parsed it. Refused here, text of any
    depth gets one answer."""
    if text.count("{") + text.count("[") <= limit:  # cannot nest deeper (C-speed counts)
        return False
    depth, in_string = 0, False
    for m in _JSON_TOKENS.finditer(text):
        tok = m.group()
        if tok == '"':
            in_string = not in_string
        elif in_string or len(tok) == 2:  # inside a string, or an escape
            continue
        elif tok in "{[":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _load_object(candidate: str) -> tuple[dict[str, Any] | None, str | None]:
    if _nested_deeper_than(candidate, DECODE_DEPTH):
        return None, f"not valid JSON (nested deeper than {DECODE_DEPTH} levels)"
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(value, dict):
        return None, f"JSON is a {type(value).__name__}, not an object"
    return value, None


def extract(text: str, rule: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object a rule takes from ``text``, or why there is none."""
    if rule == "strict":
        stripped = text.strip()
        if not stripped:
            return None, "empty reply"
        return _load_object(stripped)
    if rule == "lenient":
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            return None, "no JSON object in reply"
        return _load_object(text[start : end + 1])
    raise InputError(f"unknown parser rule {rule!r}; expected one of {PARSER_RULES}")


def validate_op(obj: dict[str, Any], allowed_ops: tuple[str, ...]) -> tuple[dict[str, Any] | None, str | None]:
    """Check one operation object against the operations offered to the agent."""
    op = obj.get("op")
    if not isinstance(op, str):
        return None, 'missing "op"'
    if op not in allowed_ops:
        return None, f"unknown operation {op!r}"
    if op in ("read", "write"):
        key = obj.get("key")
        if not isinstance(key, str) or not key or len(key) > 200:
            return None, f'"{op}" needs a non-empty string "key"'
    if op == "write" and "value" not in obj:
        return None, '"write" needs a "value"'
    if op == "submit" and "answer" not in obj:
        return None, '"submit" needs an "answer"'
    if _depth(obj) > MAX_DEPTH:
        return None, f"JSON nested deeper than {MAX_DEPTH} levels"
    clean: dict[str, Any] = {"op": op}
    if op in ("read", "write"):
        clean["key"] = obj["key"]
    if op == "write":
        clean["value"] = obj["value"]
    if op == "submit":
        clean["answer"] = obj["answer"]
    return clean, None


def parse_reply(text: str, rule: str, allowed_ops: tuple[str, ...]) -> ParseOutcome:
    """Parse under one rule; never raises on any input text."""
    if not isinstance(text, str):
        return ParseOutcome(rule, False, None, "reply is not text")
    obj, err = extract(text, rule)
    if obj is None:
        return ParseOutcome(rule, False, None, err)
    op, err = validate_op(obj, allowed_ops)
    if op is None:
        return ParseOutcome(rule, False, None, err)
    return ParseOutcome(rule, True, op, None)


def reply_valid(text: Any, rule: str, allowed_ops: tuple[str, ...]) -> bool:
    """Whether ``parse_reply`` accepts the reply: a pure function of its arguments,
    remembered for the last 65,536 texts (re-scoring asks it of every reply under
    every rule pair, and simulated replies repeat)."""
    if not isinstance(text, str):
        return parse_reply(text, rule, allowed_ops).valid
    return _reply_valid(text, rule, allowed_ops)


@functools.lru_cache(maxsize=1 << 16)
def _reply_valid(text: str, rule: str, allowed_ops: tuple[str, ...]) -> bool:
    return parse_reply(text, rule, allowed_ops).valid


def parse_both(text: str, allowed_ops: tuple[str, ...]) -> dict[str, Any]:
    """The record of a reply under both rules plus its shape, for later re-scoring.

    A reply that is one JSON object and nothing else (what most replies are) is
    decoded once: the lenient rule takes the very same text from its first ``{`` to
    its last ``}``, and such a reply's shape is one object, no fence, no prose."""
    if isinstance(text, str):
        obj, err = extract(text, "strict")
        if obj is not None:
            op, err = validate_op(obj, allowed_ops)
            lenient_op = None if op is None else dict(op)  # its own copy, as parsing it apart would give
            return {"strict": ParseOutcome("strict", op is not None, op, err).to_record(),
                    "lenient": ParseOutcome("lenient", op is not None, lenient_op, err).to_record(),
                    "shape": as_record(ReplyShape(n_objects=1))}
    shape = reply_shape(text) if isinstance(text, str) else ReplyShape(empty=True)
    return {
        "strict": parse_reply(text, "strict", allowed_ops).to_record(),
        "lenient": parse_reply(text, "lenient", allowed_ops).to_record(),
        "shape": as_record(shape),
    }
