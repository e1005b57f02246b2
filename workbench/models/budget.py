"""A study budget in US dollars, shared by every client of a run.

Cost is known only after a call, so a call first *reserves* an upper bound of
what it can cost (prompt bytes at the input price plus its output cap at the
output price) and is refused when that bound does not fit in what remains;
when the call returns, the reservation is *settled* at the actual cost. As
long as the provider keeps to the output cap, the spent amount can never pass
the limit, however many calls run at once. A call whose actual cost exceeds
its reservation (a provider that ignored the cap) is still charged in full and
counted in ``overruns``; a call whose price is unknown cannot be bounded and is
counted in ``unpriced`` (its cost, if litellm learns it afterwards, is charged).

Thread- and asyncio-safe: every operation is a short critical section under a
lock and never awaits.

For the study runner: :func:`budget_from` builds one from a study's setting,
``budget.exhausted`` says when no new world should start, a failed call's
error starts with :data:`BUDGET_ERROR` (see :func:`is_budget_cut`) so a world
cut by the budget can be told from one that failed, and ``snapshot()`` is what
to put in the manifest.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from workbench.errors import InputError

BUDGET_ERROR = "BudgetExhausted"


@dataclass(frozen=True)
class Reservation:
    amount: float
    granted: bool


class Budget:
    def __init__(self, limit_usd: float) -> None:
        if limit_usd is None or float(limit_usd) < 0:
            raise InputError(f"a budget limit must be a non-negative number of USD (got {limit_usd!r})")
        self.limit_usd = float(limit_usd)
        self._lock = threading.Lock()
        self._spent = 0.0
        self._reserved = 0.0
        self.calls = 0
        self.refused = 0
        self.overruns = 0
        self.unpriced = 0
        self.carried = 0.0  # spent by earlier invocations of the study (see carry)

    # -- reading ------------------------------------------------------------------
    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    @property
    def reserved(self) -> float:
        with self._lock:
            return self._reserved

    @property
    def remaining(self) -> float:
        """What is left for new reservations (limit - spent - reserved, never below 0)."""
        with self._lock:
            return max(0.0, self.limit_usd - self._spent - self._reserved)

    @property
    def exhausted(self) -> bool:
        """True once the limit is reached or a call has been refused for want of budget:
        the study runner starts no new world from then on."""
        with self._lock:
            return self._spent >= self.limit_usd or self.refused > 0

    # -- changing -----------------------------------------------------------------
    def reserve(self, amount: float) -> Reservation:
        """Hold ``amount`` until :meth:`settle`; refused (granted False) when it does not fit."""
        amount = max(0.0, float(amount))
        with self._lock:
            if self._spent + self._reserved + amount > self.limit_usd or self._spent >= self.limit_usd:
                self.refused += 1
                return Reservation(amount, False)
            self._reserved += amount
            return Reservation(amount, True)

    def settle(self, reservation: Reservation, cost: float | None) -> None:
        """Release a granted reservation and charge the actual cost (None: unknown, nothing charged)."""
        with self._lock:
            if reservation.granted:
                self._reserved = max(0.0, self._reserved - reservation.amount)
            self.calls += 1
            if cost is None:
                self.unpriced += 1
                return
            cost = max(0.0, float(cost))
            if cost > reservation.amount + 1e-12:
                self.overruns += 1
            self._spent += cost

    def carry(self, amount: float) -> None:
        """Start from what earlier invocations of the study spent (read from its ledger)."""
        with self._lock:
            self._spent += max(0.0, float(amount))
            self.carried += max(0.0, float(amount))

    def charge(self, cost: float | None) -> None:
        """Charge a cost without a reservation (e.g. a call made outside a client)."""
        self.settle(Reservation(0.0, False), cost)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"limit_usd": self.limit_usd, "spent_usd": round(self._spent, 8),
                    "reserved_usd": round(self._reserved, 8),
                    "remaining_usd": round(max(0.0, self.limit_usd - self._spent - self._reserved), 8),
                    "exhausted": self._spent >= self.limit_usd or self.refused > 0,
                    "carried_usd": round(self.carried, 8),
                    "calls": self.calls, "refused": self.refused, "overruns": self.overruns,
                    "unpriced": self.unpriced}

    def __repr__(self) -> str:
        s = self.snapshot()
        return f"Budget(limit={s['limit_usd']}, spent={s['spent_usd']}, reserved={s['reserved_usd']})"


def budget_from(limit_usd: float | None) -> Budget | None:
    """A Budget for a study's ``budget_usd`` setting (None: no budget)."""
    return None if limit_usd is None else Budget(limit_usd)


def is_budget_cut(error: str | None) -> bool:
    """Whether a failed call's error (``reply.error``, ``world['failed']['error']``) was the budget."""
    return bool(error) and str(error).startswith(BUDGET_ERROR)
