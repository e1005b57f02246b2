"""Cross-episode memory: what of its earlier episodes an agent sees.

An agent's history is kept per episode and per phase. Its context for a call
is its system prompt, the kept earlier episodes cut to the memory scope, then
the whole current episode. Scope: ``full`` (every phase), ``communication-onward``
(communication, verdict, feedback and reflection) or ``feedback-and-reflection``.
Length: all, none, or the last N episodes. When the context would overflow
(an approximate token count over the limit, or a provider's context-length
error), the oldest kept episode is dropped for good and the call is retried;
drops are counted per episode in the records."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.models.base import approx_tokens

PHASES: tuple[str, ...] = ("task", "communication", "verdict", "feedback")
SCOPE_PHASES: dict[str, tuple[str, ...]] = {
    "full": PHASES,
    "communication-onward": ("communication", "verdict", "feedback"),
    "feedback-and-reflection": ("feedback",),
}
_CONTEXT_ERROR = re.compile(r"(?i)(context.{0,20}(length|window|limit|too long)|maximum context|too many tokens"
                            r"|prompt is too long|reduce the length)")


def is_context_error(error: str | None) -> bool:
    """Does a failed call look like the provider's 'context too long' error?"""
    return bool(error) and bool(_CONTEXT_ERROR.search(error or ""))


@dataclass
class EpisodeMemory:
    episode: int
    phases: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {p: [] for p in PHASES})

    def messages(self, phases: tuple[str, ...] = PHASES) -> list[dict[str, Any]]:
        return [m for p in PHASES if p in phases for m in self.phases[p]]


def message_tokens(message: dict[str, Any]) -> int:
    n = approx_tokens(message.get("content") or "") + approx_tokens(message.get("reasoning_content") or "") + 4
    for call in message.get("tool_calls") or []:
        n += approx_tokens(json.dumps(call, ensure_ascii=False))
    return n


@dataclass
class AgentMemory:
    """One agent's system prompt and its episodes, with the rules that cut them."""

    system: str
    scope: str = "full"
    keep: int | None = None  # earlier episodes kept (None: all)
    limit_tokens: int | None = None
    episodes: list[EpisodeMemory] = field(default_factory=list)
    dropped: int = 0  # earliest episodes dropped for good after an overflow

    def __post_init__(self) -> None:
        self._system_message = {"role": "system", "content": self.system}
        self._digests: dict[int, tuple[dict[str, Any], bytes]] = {}
        if self.scope not in SCOPE_PHASES:
            raise InputError(f"memory scope {self.scope!r}; expected one of {list(SCOPE_PHASES)}")

    def begin(self, episode: int) -> EpisodeMemory:
        self.episodes.append(EpisodeMemory(episode))
        return self.episodes[-1]

    @property
    def current(self) -> EpisodeMemory:
        return self.episodes[-1]

    def add(self, phase: str, *messages: dict[str, Any]) -> None:
        self.current.phases[phase].extend(messages)

    def earlier(self) -> list[EpisodeMemory]:
        """Earlier episodes still in view: the last ``keep``, minus those dropped on overflow."""
        past = self.episodes[:-1]
        past = past[self.dropped:]
        if self.keep is not None:
            past = past[len(past) - self.keep:] if self.keep > 0 else []
        return past

    def context(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self._originals()]

    def digest(self) -> str:
        """SHA-256 of the context as the world sends it, from cached per-message digests
        (stored messages never change once added), so long histories hash cheaply."""
        h = hashlib.sha256()
        for m in self._originals():
            key = id(m)
            d = self._digests.get(key)
            if d is None or d[0] is not m:
                d = self._digests[key] = (m, hashlib.sha256(
                    json.dumps(m, ensure_ascii=False, sort_keys=True).encode()).digest())
            h.update(d[1])
        return h.hexdigest()

    def _originals(self) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [self._system_message]
        for ep in self.earlier():
            msgs.extend(ep.messages(SCOPE_PHASES[self.scope]))
        msgs.extend(self.current.messages())
        return msgs

    def tokens(self) -> int:
        return sum(message_tokens(m) for m in self.context())

    def drop_oldest(self) -> bool:
        """Drop the oldest earlier episode still in view; False when none is left."""
        if not self.earlier():
            return False
        self.dropped = self.episodes.index(self.earlier()[0]) + 1
        return True

    def fit(self) -> int:
        """Drop oldest episodes until the context is within the limit; returns how many were dropped."""
        n = 0
        if self.limit_tokens is None:
            return 0
        while self.tokens() > self.limit_tokens and self.drop_oldest():
            n += 1
        return n
