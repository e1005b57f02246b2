"""Task generation for the shared-store world.

Two agents hold halves of an interdependent computation; two hold self-contained
tasks. The redraw rules guarantee that one half alone never equals the joint
answer, so nobody can be right without the other's value."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.records import as_record
from workbench.seeding import rng_for

ROLES: tuple[str, ...] = ("pair_a", "pair_b", "solo_1", "solo_2")
PAIR_ROLES: tuple[str, ...] = ("pair_a", "pair_b")
PAIR_FORMS: tuple[str, ...] = ("digits", "remainders")
SOLO_KINDS: tuple[str, ...] = ("digit_sum", "mod_prime", "product")
SMALL_PRIMES: tuple[int, ...] = (7, 11, 13, 17, 19, 23)
PAIR_KEYS = {"digits": ("C_A", "C_B"), "remainders": ("R_A", "R_B")}
NUMBER_NAMES = ("N_A", "N_B")


def digit_sum(n: int) -> int:
    return sum(int(d) for d in str(abs(n)))


@dataclass(frozen=True)
class AgentTask:
    role: str
    kind: str
    inputs: dict[str, int]
    expected: int  # the right submission for this agent
    own_key: str | None = None
    partner_key: str | None = None
    own_value: int | None = None  # the intermediate value (pair members)

    def to_record(self) -> dict[str, Any]:
        return dict(as_record(self))


@dataclass(frozen=True)
class WorldTasks:
    form: str
    slots: dict[str, str]  # agent slot -> role
    tasks: dict[str, AgentTask]  # role -> task
    joint_answer: int
    redraws: int = 0
    params: dict[str, int] = field(default_factory=dict)

    def role_of(self, slot: str) -> str:
        return self.slots[slot]

    def to_record(self) -> dict[str, Any]:
        return {
            "form": self.form,
            "slots": dict(self.slots),
            "tasks": {r: as_record(t) for r, t in self.tasks.items()},
            "joint_answer": self.joint_answer,
            "redraws": self.redraws,
            "params": dict(self.params),
        }


def half_value(form: str, n: int, modulus: int) -> int:
    return digit_sum(n) if form == "digits" else n % modulus


def joint(form: str, a: int, b: int) -> int:
    return a * b if form == "digits" else a + b


def needs_redraw(form: str, n: int, modulus: int) -> bool:
    """True when this half would make the joint answer equal the other half."""
    if form == "digits":
        return digit_sum(n) == 1
    return n % modulus == 0


def draw_tasks(seed: int, form: str = "any", digits: int = 6, modulus: int = 97,
               solo_kinds: tuple[str, ...] = SOLO_KINDS) -> WorldTasks:
    """All four agents' tasks for one world, from its seed alone."""
    rng = rng_for(seed, "tasks")
    if form == "any":
        form = rng.choice(PAIR_FORMS)
    if form not in PAIR_FORMS:
        raise ValueError(f"unknown task form {form!r}; expected one of {PAIR_FORMS} or 'any'")
    lo, hi = 10 ** (digits - 1), 10**digits - 1
    redraws = 0
    numbers = []
    for _ in PAIR_ROLES:
        n = rng.randint(lo, hi)
        while needs_redraw(form, n, modulus):
            redraws += 1
            n = rng.randint(lo, hi)
        numbers.append(n)
    halves = [half_value(form, n, modulus) for n in numbers]
    answer = joint(form, halves[0], halves[1])
    keys = PAIR_KEYS[form]
    tasks: dict[str, AgentTask] = {}
    for i, role in enumerate(PAIR_ROLES):
        tasks[role] = AgentTask(
            role=role, kind=form,
            inputs={"number": numbers[i], **({"modulus": modulus} if form == "remainders" else {})},
            expected=answer, own_key=keys[i], partner_key=keys[1 - i], own_value=halves[i],
        )
    for role in ("solo_1", "solo_2"):
        kind = rng.choice(solo_kinds)
        if kind == "digit_sum":
            n = rng.randint(lo, hi)
            tasks[role] = AgentTask(role, kind, {"number": n}, digit_sum(n))
        elif kind == "mod_prime":
            n, p = rng.randint(lo, hi), rng.choice(SMALL_PRIMES)
            tasks[role] = AgentTask(role, kind, {"number": n, "prime": p}, n % p)
        elif kind == "product":
            a, b = rng.randint(100, 999), rng.randint(100, 999)
            tasks[role] = AgentTask(role, kind, {"a": a, "b": b}, a * b)
        else:
            raise ValueError(f"unknown self-contained task kind {kind!r}; expected one of {SOLO_KINDS}")
    order = list(ROLES)
    rng_for(seed, "roles").shuffle(order)
    slots = {f"agent-{i}": role for i, role in enumerate(order)}
    return WorldTasks(form, slots, tasks, answer, redraws, {"digits": digits, "modulus": modulus})
