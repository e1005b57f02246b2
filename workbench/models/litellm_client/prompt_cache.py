"""Prompt caching: the breakpoints a request marks, the cache figures a reply reports, and the
reasoning blocks an agent's own turns carry back.

Each agent re-sends its whole history every step, so its prompt is the previous step's
prompt plus one reply and one result. A provider that caches prompts bills the repeated
prefix at a fraction of the input price. OpenAI and Gemini cache long prefixes on their
own (nothing to send); Anthropic caches only up to the blocks a request marks with
``cache_control: {"type": "ephemeral"}`` (at most four), in the form litellm passes on:
a ``cache_control`` key on a message with text content (litellm puts it on the text
block it makes), on the last block of list content, or on the last tool call of an
assistant turn (its ``tool_use`` block). Marked with ``prompt_cache: auto``:

* the system prompt (the tools before it are cached with it), shared by every step;
* the last message before the new turn (the trailing user and tool messages): the
  history up to the previous step, which the next step's request repeats. Anthropic
  looks up to 20 blocks back from a breakpoint for the longest prefix an earlier request
  wrote, so each step reads what the one before wrote and writes one step more.

A request whose messages already carry ``cache_control`` (a world that places its own)
is left as it is. ``off`` marks nothing. What was sent is recorded in the reply's
``extra.prompt_cache``; what the provider cached is in its usage (``cached_tokens``
read, ``cache_write_tokens`` written), priced by :mod:`workbench.models.prices`.
"""
from __future__ import annotations

from typing import Any

EPHEMERAL = {"type": "ephemeral"}
MODES = ("auto", "off")
# the routes whose provider caches only what a request marks (litellm translates the marks)
_BREAKPOINT_PREFIXES = ("anthropic/", "openrouter/anthropic/")
# reasoning a provider returns on an assistant message, under litellm's names: Anthropic's signed
# thinking blocks, OpenAI Responses reasoning items (with their encrypted content)
REASONING_FIELDS = ("thinking_blocks", "reasoning_items")


def needs_breakpoints(route: str) -> bool:
    """Whether the route's provider caches only prefixes a request marks (Anthropic)."""
    return route.startswith(_BREAKPOINT_PREFIXES)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"prompt_cache: expected one of {list(MODES)}, got {mode!r}")
    return mode


def _has_marks(messages: list[dict[str, Any]]) -> bool:
    for m in messages:
        if "cache_control" in m:
            return True
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
            return True
        if any(isinstance(c, dict) and "cache_control" in c for c in m.get("tool_calls") or ()):
            return True
    return False


def _marked(message: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``message`` with a breakpoint on its last block, or None if it has no block to mark."""
    calls = message.get("tool_calls")
    if message.get("role") == "assistant" and calls:
        last = {**calls[-1], "cache_control": dict(EPHEMERAL)}
        return {**message, "tool_calls": [*calls[:-1], last]}
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "cache_control": dict(EPHEMERAL)}
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        return {**message, "content": [*content[:-1], {**content[-1], "cache_control": dict(EPHEMERAL)}]}
    return None


def breakpoints(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int] | None]:
    """(messages with the stable prefix marked, the indices marked); None when the request
    already carries marks of its own (left unchanged). The input list is not changed."""
    if _has_marks(messages):
        return messages, None
    out = list(messages)
    marked: list[int] = []
    if out and out[0].get("role") == "system":
        got = _marked(out[0])
        if got is not None:
            out[0] = got
            marked.append(0)
    end = len(out)
    while end > 0 and out[end - 1].get("role") in ("user", "tool"):
        end -= 1  # the new turn: results of the previous step and whatever follows them
    for i in range(end - 1, 0, -1):  # the last message before it that has a block to mark
        if out[i].get("role") == "system":
            break
        got = _marked(out[i])
        if got is not None:
            out[i] = got
            marked.append(i)
            break
    return out, marked


def reasoning_blocks_sent(messages: list[dict[str, Any]]) -> int:
    """Reasoning blocks (thinking blocks, reasoning items) the request replays on assistant turns."""
    n = 0
    for m in messages:
        if m.get("role") == "assistant":
            for name in REASONING_FIELDS:
                blocks = m.get(name)
                if blocks:
                    n += len(blocks)
    return n


def reasoning_of(message: Any) -> dict[str, list[dict[str, Any]]]:
    """The provider's native reasoning blocks on a reply message, as plain data and unchanged
    (a thinking block's signature must come back byte for byte)."""
    import json

    out: dict[str, list[dict[str, Any]]] = {}
    psf = getattr(message, "provider_specific_fields", None)
    for name in REASONING_FIELDS:
        blocks = getattr(message, name, None)
        if not blocks and isinstance(psf, dict):
            blocks = psf.get(name)
        if blocks:
            plain = json.loads(json.dumps(list(blocks), default=lambda o: getattr(o, "__dict__", str(o))))
            out[name] = [b for b in plain if isinstance(b, dict)]
    return out
