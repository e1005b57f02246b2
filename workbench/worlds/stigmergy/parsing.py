"""Reply parsing: turning a model's text into one operation.

Two rules decide validity (a study parameter): ``strict`` needs the whole reply to
be one JSON object; ``lenient`` takes the text from the first ``{`` to the last
``}`` (the reference implementation's rule, which accepts prose before JSON).
Whatever rule decides, every reply is also classified (fenced, prose-wrapped,
several objects), because the source paper found that these shapes alone could
remove whole cells. Parsing never raises: model text is data.

Tool replies (a cell with ``actions: tools``) have their own counterpart of the two
rules, since the same "is this one operation?" question has other failure shapes
there: no call at all, several calls, a call of a tool that was not offered, and
arguments that are not JSON or lack a field (``bad arguments``). Arguments are
checked as the JSON-text fields are (:func:`validate_op`), the same under both rules.

- ``strict``: exactly one call, of an offered tool, with well-formed arguments. Text
  beside the call is ignored (narrating a call is what tool-trained models do; it is
  counted as ``text_with_call``, never invalid).
- ``lenient``: the first well-formed call where there are several (the others are not
  run, and their results say so); where there is no call, the reply's text read by the
  JSON-text lenient rule (first ``{`` to last ``}``), as an operation object
  (``{"op": ...}``) or as a call written out as text (``{"name"|"tool": NAME,
  "arguments"|"parameters": {...}}``, which is what a chat template that the server
  does not parse for calls leaves in the text). What it wrote there that is not one
  operation is classed as a call would be (unknown tool, bad arguments); text with no
  readable JSON object is "no call".

Why this lenient rule: it mirrors the JSON-text one (accept what can be read
unambiguously as one intended operation, refuse what cannot), and the two cases it
rescues are the ones a server or template, not the model's choice of action, decides.
A call of an unknown tool or with bad arguments is never rescued: no rule can say what
the model meant. Every tool reply is classified whichever rule decides
(:class:`ToolShape`: ``no_call``, ``multi_call``, ``unknown_tool``, ``bad_args``)."""
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
    call: int | None = None  # tool replies: the index of the call taken as the operation

    def to_record(self) -> dict[str, Any]:
        # built by hand: asdict() would deep-copy (and recurse into) model-written values
        out = {"rule": self.rule, "valid": self.valid, "op": self.op, "error": self.error}
        if self.call is not None:  # only a tool reply's call: JSON-text records keep their keys
            out["call"] = self.call
        return out


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


# -- tool replies ---------------------------------------------------------------------
NO_CALL, MULTI_CALL, UNKNOWN_TOOL, BAD_ARGS = "no tool call", "several tool calls", "unknown tool", "bad arguments"
# why a tool reply is invalid, as the attrition table names it (by the prefix of the outcome's error)
TOOL_INVALID_SHAPES: dict[str, str] = {NO_CALL: "no call", MULTI_CALL: "several calls", UNKNOWN_TOOL: "unknown tool",
                                       BAD_ARGS: "bad arguments"}


@dataclass(frozen=True)
class ToolShape:
    """What a tool reply looks like, independent of any rule: its calls, and its text's
    shape (the JSON-text fields; ``empty`` means no call and no text)."""

    n_calls: int = 0
    no_call: bool = False
    multi_call: bool = False
    unknown_tool: bool = False  # some (native) call names a tool that was not offered
    bad_args: bool = False  # some (native) call of an offered tool has arguments that are not one operation
    text_with_call: bool = False  # text beside a call (ignored by both rules)
    n_objects: int = 0
    multi_object: bool = False
    fenced: bool = False
    prose_wrapped: bool = False
    empty: bool = False


def _call_op(call: Any, allowed_ops: tuple[str, ...]) -> tuple[dict[str, Any] | None, str]:
    """One call as an operation, or the error (prefixed by its class) that says why not."""
    if not isinstance(call, dict):
        return None, f"{BAD_ARGS}: the call is not an object"
    name = call.get("name")
    if not isinstance(name, str) or name not in allowed_ops:
        offered = ", ".join(allowed_ops)
        return None, f"{UNKNOWN_TOOL} {str(name)[:80]!r} (the tools are: {offered})"
    args = call.get("arguments")
    if isinstance(args, str):
        if not args.strip():
            args = {}
        else:
            args, err = _load_object(args)
            if args is None:
                return None, f"{BAD_ARGS}: {err}"
    elif args is None:
        args = {}
    if not isinstance(args, dict):
        return None, f"{BAD_ARGS}: the arguments are a {type(args).__name__}, not an object"
    op, err = validate_op({**args, "op": name}, allowed_ops)
    if op is None:
        return None, f"{BAD_ARGS}: {err}"
    return op, ""


def _text_call(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A call written out as text: {"name"|"tool": NAME, "arguments"|"parameters": ARGS}."""
    name = obj.get("name", obj.get("tool"))
    if not isinstance(name, str) or "op" in obj:
        return None
    return {"name": name, "arguments": obj.get("arguments", obj.get("parameters"))}


def tool_shape(text: Any, tool_calls: Any, allowed_ops: tuple[str, ...]) -> ToolShape:
    calls = tool_calls if isinstance(tool_calls, list) else []
    text = text if isinstance(text, str) else ""
    base = reply_shape(text) if text.strip() else ReplyShape()
    unknown = bad = False
    for c in calls:
        op, err = _call_op(c, allowed_ops)
        unknown |= err.startswith(UNKNOWN_TOOL)
        bad |= err.startswith(BAD_ARGS)
    return ToolShape(n_calls=len(calls), no_call=not calls, multi_call=len(calls) > 1, unknown_tool=unknown,
                     bad_args=bad, text_with_call=bool(calls) and bool(text.strip()), n_objects=base.n_objects,
                     multi_object=base.multi_object, fenced=base.fenced, prose_wrapped=base.prose_wrapped,
                     empty=not calls and not text.strip())


def parse_tool_reply(text: Any, tool_calls: Any, rule: str, allowed_ops: tuple[str, ...]) -> ParseOutcome:
    """A tool reply under one rule (see the module's docstring); never raises."""
    if rule not in PARSER_RULES:
        raise InputError(f"unknown parser rule {rule!r}; expected one of {PARSER_RULES}")
    calls = tool_calls if isinstance(tool_calls, list) else []
    if not calls:
        if rule == "strict" or not isinstance(text, str):
            return ParseOutcome(rule, False, None, f"{NO_CALL} (the reply was text only)")
        obj, err = extract(text, "lenient")
        if obj is None:
            return ParseOutcome(rule, False, None, f"{NO_CALL} ({err})")
        written = _text_call(obj)
        if written is not None:
            op, err = _call_op(written, allowed_ops)
        else:
            op, err = validate_op(obj, allowed_ops)
            if op is None:  # classed as a call's would be: the operation is the tool
                err = f"{UNKNOWN_TOOL} {str(obj.get('op'))[:80]!r}" if str(err).startswith("unknown operation") \
                    else f"{BAD_ARGS}: {err}"
        if op is None:  # what it wrote could not be taken as one operation, and why
            return ParseOutcome(rule, False, None, f"{err} (written in the text; no tool call)")
        return ParseOutcome(rule, True, op, None)
    if rule == "strict" and len(calls) > 1:
        return ParseOutcome(rule, False, None, f"{MULTI_CALL} ({len(calls)}; one operation per reply)")
    first_error = ""
    for i, call in enumerate(calls):
        op, err = _call_op(call, allowed_ops)
        if op is not None:
            return ParseOutcome(rule, True, op, None, call=i)
        first_error = first_error or err
    return ParseOutcome(rule, False, None, first_error)


def parse_tool_both(text: Any, tool_calls: Any, allowed_ops: tuple[str, ...]) -> dict[str, Any]:
    """The record of a tool reply under both rules plus its shape, for later re-scoring."""
    return {"strict": parse_tool_reply(text, tool_calls, "strict", allowed_ops).to_record(),
            "lenient": parse_tool_reply(text, tool_calls, "lenient", allowed_ops).to_record(),
            "shape": as_record(tool_shape(text, tool_calls, allowed_ops))}


def parse_step(reply: dict[str, Any], allowed_ops: tuple[str, ...], actions: str = "json-text") -> dict[str, Any]:
    """A recorded reply parsed again under both rules, by its cell's action interface."""
    if actions == "tools":
        return parse_tool_both(reply.get("text"), reply.get("tool_calls"), allowed_ops)
    return parse_both(reply.get("text") or "", allowed_ops)


def step_valid(reply: dict[str, Any], rule: str, allowed_ops: tuple[str, ...], actions: str = "json-text") -> bool:
    """Whether a recorded reply is one operation under ``rule``, parsed again from the reply alone."""
    if actions == "tools":
        return parse_tool_reply(reply.get("text"), reply.get("tool_calls"), rule, allowed_ops).valid
    return reply_valid(reply.get("text"), rule, allowed_ops)


def tool_invalid_shape(outcome: dict[str, Any] | None) -> str | None:
    """Why a tool reply is invalid under one rule, as one of TOOL_INVALID_SHAPES' names
    (None when it is valid): read from the class its error starts with."""
    if outcome is None or outcome.get("valid"):
        return None
    error = str(outcome.get("error") or "")
    return next((name for prefix, name in TOOL_INVALID_SHAPES.items() if error.startswith(prefix)), "bad arguments")


def tool_invalid_shapes(reply: dict[str, Any], allowed_ops: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Why a recorded tool reply is invalid under the strict and the lenient rule."""
    parsed = parse_tool_both(reply.get("text"), reply.get("tool_calls"), allowed_ops)
    return tool_invalid_shape(parsed["strict"]), tool_invalid_shape(parsed["lenient"])
