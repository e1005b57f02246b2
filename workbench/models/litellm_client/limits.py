"""Connection and requests-per-minute limits shared by every client of one route + api_base in the process."""
from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any


class ModelLimits:
    """A connection limit and a sliding-window requests-per-minute limit.

    The semaphore is made per event loop (an asyncio primitive belongs to one
    loop, and each ``asyncio.run`` makes a new loop); the rpm window is shared
    across loops and threads."""

    def __init__(self, max_connections: int, rpm: int | None, window_s: float = 60.0) -> None:
        self.max_connections = max_connections
        self.rpm = rpm
        self.window_s = window_s
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

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


_LIMITS: dict[tuple[str, str | None], ModelLimits] = {}
_LIMITS_LOCK = threading.Lock()


def limits_for(route: str, api_base: str | None, max_connections: int, rpm: int | None) -> ModelLimits:
    """The process-wide limits of route+api_base; the first client to ask sets them."""
    key = (route, (api_base or "").rstrip("/") or None)
    with _LIMITS_LOCK:
        lim = _LIMITS.get(key)
        if lim is None:
            lim = ModelLimits(max_connections, rpm)
            _LIMITS[key] = lim
        return lim


def reset_limits() -> None:
    """Forget every shared limit (tests; a process that changes its catalogue)."""
    with _LIMITS_LOCK:
        _LIMITS.clear()
