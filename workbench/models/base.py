"""The one interface through which every agent reaches a model.

Messages and sampling parameters go in; reply text, the model id the provider
returned, usage, cost and latency come out. Simulated, scripted, replayed and
(later) litellm-backed clients all implement :class:`ModelClient`, so a world
never knows which kind of agent it drives. ``latency_s`` is the model's latency
on the world clock (measured for real models, drawn for simulated ones): the
async scheduler orders operations by it, which makes simulated runs
deterministic. Wall-clock facts go into ``timing`` and are never compared.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]  # OpenAI chat format: role and content; tool_calls / tool_call_id where tools are used


@dataclass
class ModelRequest:
    messages: list[Message]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, reasoning_effort, ...
    # Function tools in the OpenAI JSON-schema form. Worlds whose agents act through
    # tools send them; a client without native tool calls may ignore them, and the
    # world then reads a JSON tool call from the reply text (see ``tool_calls``).
    tools: list[dict[str, Any]] | None = None


@dataclass
class ModelReply:
    text: str
    latency_s: float
    route: str
    model_returned: str | None = None
    reasoning: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    params_requested: dict[str, Any] = field(default_factory=dict)
    params_sent: dict[str, Any] = field(default_factory=dict)
    params_dropped: list[str] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # set when the call failed for good; text is then ""
    # Native tool calls, each {"id", "name", "arguments": raw JSON text}: recorded as
    # returned, parsed by the world (malformed arguments are the agent's error, not ours).
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)  # wall-clock, never compared

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class ModelClient(Protocol):
    """One client per agent; it may keep state between that agent's calls."""

    route: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...


def approx_tokens(text: str) -> int:
    """A rough token count for clients that have no tokenizer (about 4 chars a token)."""
    return max(1, (len(text) + 3) // 4) if text else 0
