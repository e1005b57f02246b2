"""Connection, requests-per-minute and tokens-per-minute limits shared by every client of one route + api_base
in the process."""
from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any


class ModelLimits:
    """A connection limit and sliding-window limits of requests and tokens per minute.

    The semaphore is made per event loop (an asyncio primitive belongs to one
    loop, and each ``asyncio.run`` makes a new loop); the windows are shared
    across loops and threads.

    Tokens per minute (what most providers enforce first for long prompts): an attempt
    takes a slot for the tokens it is estimated to use before it is sent (its prompt and
    its output cap, see :func:`estimate_tokens`) and waits while the window holds too many;
    when its usage comes back the slot is corrected to the tokens the provider counted
    (:meth:`TokenSlot.settle`). An attempt larger than the whole limit is let through
    when the window is empty, or it could never run."""

    def __init__(self, max_connections: int, rpm: int | None, window_s: float = 60.0, tpm: int | None = None) -> None:
        self.max_connections = max_connections
        self.rpm = rpm
        self.tpm = tpm
        self.window_s = window_s
        self._tokens: deque[TokenSlot] = deque()
        self._tokens_used = 0
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
            weakref.WeakKeyDictionary()
        self._starts: deque[float] = deque()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0

    def semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._sems.get(loop)
            if sem is None:
                sem = asyncio.Semaphore(self.max_connections)
                self._sems[loop] = sem
            return sem

    async def rpm_slot(self, sleep: Callable[[float], Awaitable[Any]]) -> float:
        """Wait until a request may start under the rpm window; returns the seconds waited."""
        if not self.rpm:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                while self._starts and self._starts[0] <= now - self.window_s:
                    self._starts.popleft()
                if len(self._starts) < self.rpm:
                    self._starts.append(now)
                    return waited
                wait = self._starts[0] + self.window_s - now
            wait = max(wait, 0.001)
            await sleep(wait)
            waited += wait

    async def tpm_slot(self, tokens: int, sleep: Callable[[float], Awaitable[Any]]) -> tuple[float, TokenSlot | None]:
        """Wait until ``tokens`` fit in the tokens-per-minute window; (seconds waited, the slot taken)."""
        if not self.tpm:
            return 0.0, None
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                while self._tokens and self._tokens[0].t <= now - self.window_s:
                    self._tokens_used -= self._tokens.popleft().tokens
                if not self._tokens or self._tokens_used + tokens <= self.tpm:
                    slot = TokenSlot(self, now, tokens)
                    self._tokens.append(slot)
                    self._tokens_used += tokens
                    return waited, slot
                # the earliest moment enough of the window has expired for these tokens to fit (for
                # more tokens than the whole limit: the moment the window is empty)
                excess, wait = self._tokens_used + tokens - self.tpm, self._tokens[-1].t + self.window_s - now
                for s in self._tokens:
                    excess -= s.tokens
                    if excess <= 0:
                        wait = s.t + self.window_s - now
                        break
            wait = max(wait, 0.001)
            await sleep(wait)
            waited += wait

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


class TokenSlot:
    """One attempt's share of the tokens-per-minute window."""

    __slots__ = ("limits", "t", "tokens")

    def __init__(self, limits: ModelLimits, t: float, tokens: int) -> None:
        self.limits, self.t, self.tokens = limits, t, tokens

    def settle(self, tokens: int) -> None:
        """The tokens the provider counted, in place of the estimate (once the usage is known)."""
        with self.limits._lock:
            if self in self.limits._tokens:  # still in the window
                self.limits._tokens_used += tokens - self.tokens
            self.tokens = tokens


def estimate_tokens(messages: list[dict[str, Any]], params: dict[str, Any]) -> int:
    """An attempt's tokens before it is sent: its prompt (about 4 characters a token, as
    :func:`workbench.models.base.approx_tokens`: no tokenizer here) and its output cap."""
    chars = 0
    for m in messages:
        content = m.get("content")
        chars += len(content) if isinstance(content, str) else len(str(content or ""))
        if m.get("tool_calls"):
            chars += len(str(m["tool_calls"]))
        chars += 16  # role and message framing
    if params.get("tools"):
        chars += len(str(params["tools"]))
    cap = params.get("max_tokens") or params.get("max_completion_tokens") or 0
    return (chars + 3) // 4 + int(cap)


_LIMITS: dict[tuple[str, str | None], ModelLimits] = {}
_LIMITS_LOCK = threading.Lock()
# What builds a route's limits the first time they are asked for (None: ModelLimits, this process's
# own windows). A Ray worker installs one whose windows are held by one actor for the whole
# cluster (workbench/ray_executor.py), so rpm and tpm stay global however many workers call.
LimitsFactory = Callable[[tuple[str, str | None], int, "int | None", "int | None"], ModelLimits]
_FACTORY: LimitsFactory | None = None


def set_limits_factory(factory: LimitsFactory | None) -> None:
    """Build every route's limits with ``factory`` from now on (None: this process's own);
    limits made before are forgotten."""
    global _FACTORY
    with _LIMITS_LOCK:
        _FACTORY = factory
        _LIMITS.clear()


def limits_for(route: str, api_base: str | None, max_connections: int, rpm: int | None,
               tpm: int | None = None) -> ModelLimits:
    """The process-wide limits of route+api_base; the first client to ask sets them."""
    key = (route, (api_base or "").rstrip("/") or None)
    with _LIMITS_LOCK:
        lim = _LIMITS.get(key)
        if lim is None:
            lim = ModelLimits(max_connections, rpm, tpm=tpm) if _FACTORY is None else \
                _FACTORY(key, max_connections, rpm, tpm)
            _LIMITS[key] = lim
        return lim


def reset_limits() -> None:
    """Forget every shared limit (tests; a process that changes its catalogue)."""
    with _LIMITS_LOCK:
        _LIMITS.clear()
