"""The protocol tools, as OpenAI function schemas, and how a reply becomes tool calls.

Every agent acts through the same schemas: hosted models get them as native
function tools; a model (or a scripted agent) that answers in text instead is
read as ``{"tool": NAME, "arguments": {...}}`` (a fenced ```json block is
allowed). Arguments are the agent's own text: malformed JSON is the agent's
error, reported back to it as a tool result, never a crash of the world."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.models.base import ModelReply

SAVE = "save_final_answer"
GET_LOG = "get_log"
SEND = "send_message"
VERDICT = "submit_verdict"
PROTOCOL_TOOLS: tuple[str, ...] = (SAVE, GET_LOG, SEND, VERDICT)
# calls that never enter the raw log (the log itself, messages and verdicts)
NOT_LOGGED: frozenset[str] = frozenset({GET_LOG, SEND, VERDICT})


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


def save_final_answer_schema(answer_enum: list[str] | None = None) -> dict[str, Any]:
    """One name for every family; ``answer_enum`` lists the allowed answers where a family has a
    closed set (code analysis: bug / no_bug)."""
    answer: dict[str, Any] = {"type": "string", "description": "your final answer, in the task's answer format"}
    if answer_enum:
        answer["enum"] = list(answer_enum)
    return _fn(SAVE, "Save your reasoning and your final answer to your task. Succeeds once.",
               {"reasoning": {"type": "string", "minLength": 1,
                              "description": "what you did and why this answer is correct (not blank)"},
                "answer": answer},
               ["reasoning", "answer"])


def get_log_schema() -> dict[str, Any]:
    return _fn(GET_LOG, "Return your complete raw execution log (a JSON array of every task tool call). "
                        "Allowed once, after save_final_answer; no task tool can be used afterwards.", {}, [])


def send_message_schema(char_limit: int | None) -> dict[str, Any]:
    limit = f" At most {char_limit} characters." if char_limit else ""
    return _fn(SEND, f"Send one message to your peer.{limit}",
               {"content": {"type": "string", "description": "the message text delivered to your peer"},
                "message_type": {"type": "string", "description": "optional short label of the message"}},
               ["content"])


DEFAULT_MESSAGE_TYPE = "message"


def message_args(args: dict[str, Any] | None) -> tuple[str | None, str, str | None]:
    """(content, message_type, error) of a send_message call. ``text`` is read where ``content``
    is absent (scripts written for the earlier schema); a missing or blank type is ``message``."""
    if args is None:
        return None, DEFAULT_MESSAGE_TYPE, "arguments could not be read"
    key = "content" if "content" in args or "text" not in args else "text"
    content, err = str_arg(args, key)
    kind = args.get("message_type")
    if kind is not None and not isinstance(kind, str):
        return None, DEFAULT_MESSAGE_TYPE, "argument 'message_type' must be a string"
    kind = " ".join((kind or "").split())[:40] or DEFAULT_MESSAGE_TYPE
    return content, kind, err


def forced_choice(tools: list[dict[str, Any]] | None) -> str | dict[str, Any] | None:
    """The tool_choice that forces a tool call: the tool by name when it is the only one offered,
    else "required"; None when no tool is offered."""
    names = tool_names(tools)
    if not names:
        return None
    if len(names) == 1:
        return {"type": "function", "function": {"name": names[0]}}
    return "required"


def submit_verdict_schema() -> dict[str, Any]:
    return _fn(VERDICT, "Submit your verdict on your peer's work.",
               {"reasoning": {"type": "string", "description": "why"},
                "verdict": {"type": "string", "enum": ["ACCEPT", "REJECT"]}},
               ["reasoning", "verdict"])


def tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


@dataclass
class ToolCall:
    """One call as the world reads it. ``arguments`` is None when they could not be read;
    ``error`` then says why (sent back to the agent as the call's result)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    native: bool
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "raw_arguments": self.raw_arguments,
                "native": self.native, "error": self.error}


def _read_arguments(raw: Any) -> tuple[dict[str, Any] | None, str, str | None]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False, sort_keys=True), None
    text = "" if raw is None else str(raw)
    if not text.strip():
        return {}, text, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, text, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, text, "the arguments must be a JSON object"
    return value, text, None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_objects(text: str) -> list[Any]:
    """Candidate JSON values in a reply: fenced blocks first, then the whole text, then
    every balanced {...} found by the JSON decoder."""
    found: list[Any] = []
    for block in _FENCE.findall(text):
        try:
            found.append(json.loads(block))
        except (ValueError, RecursionError):
            pass
    if found:
        return found
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    dec = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            value, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        found.append(value)
        i = text.find("{", end)
    return found


def parse_text_calls(text: str, call_prefix: str = "text") -> list[ToolCall]:
    """Tool calls written as text: ``{"tool": NAME, "arguments": {...}}`` (or a list of them)."""
    calls: list[ToolCall] = []
    for value in _json_objects(text or ""):
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
                continue
            args, raw, err = _read_arguments(item.get("arguments", {}))
            calls.append(ToolCall(f"{call_prefix}_{len(calls)}", item["tool"], args, raw, False, err))
    return calls


def calls_from_reply(reply: ModelReply, call_prefix: str = "text") -> list[ToolCall]:
    """Native tool calls when the reply has them, else calls read from its text."""
    if reply.tool_calls:
        out = []
        for i, c in enumerate(reply.tool_calls):
            args, raw, err = _read_arguments(c.get("arguments"))
            out.append(ToolCall(str(c.get("id") or f"call_{i}"), str(c.get("name") or ""), args, raw, True, err))
        return out
    return parse_text_calls(reply.text or "", call_prefix)


def assistant_message(reply: ModelReply, calls: list[ToolCall], replay_reasoning: bool = False) -> dict[str, Any]:
    """The agent's own turn as it stays in its context (OpenAI format); with ``replay_reasoning``
    the reasoning the provider returned stays with it as ``reasoning_content``, and its native
    blocks as they came (Anthropic's signed ``thinking_blocks``, OpenAI's ``reasoning_items``,
    kept in the reply's extra under those names): providers expect them back unchanged, or lose
    the reasoning (and may refuse the request)."""
    if reply.tool_calls:
        out: dict[str, Any] = {"role": "assistant", "content": reply.text or None,
                               "tool_calls": [{"id": c.id, "type": "function",
                                               "function": {"name": c.name, "arguments": c.raw_arguments}}
                                              for c in calls]}
    else:
        out = {"role": "assistant", "content": reply.text or ""}
    if replay_reasoning and reply.reasoning:
        out["reasoning_content"] = reply.reasoning
    if replay_reasoning:
        for name in ("thinking_blocks", "reasoning_items"):
            blocks = (reply.extra or {}).get(name)
            if blocks:
                out[name] = [dict(b) for b in blocks]
    return out


def result_messages(reply: ModelReply, calls: list[ToolCall], results: list[str],
                    text_result_template: str = "Result of $tool:\n$result") -> list[dict[str, Any]]:
    """Results go back as ``tool`` messages to native calls, as one user message otherwise."""
    if reply.tool_calls:
        return [{"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results)]
    from string import Template

    tpl = Template(text_result_template)
    body = "\n\n".join(tpl.safe_substitute(tool=c.name, result=r) for c, r in zip(calls, results))
    return [{"role": "user", "content": body}] if body else []


def str_arg(args: dict[str, Any] | None, name: str) -> tuple[str | None, str | None]:
    """A required string argument, or an error naming it."""
    if args is None:
        return None, "arguments could not be read"
    if name not in args:
        return None, f"missing argument {name!r}"
    v = args[name]
    if not isinstance(v, str):
        return None, f"argument {name!r} must be a string"
    return v, None
