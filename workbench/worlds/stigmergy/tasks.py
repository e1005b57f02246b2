"""Task generation for the shared-store world.

Two agents hold halves of an interdependent computation; two hold self-contained
tasks. The redraw rules guarantee that one half alone never equals the joint
answer, so nobody can be right without the other's value.

A world may be larger (issue 22: ``pairs`` interdependent pairs, ``solos``
self-contained agents). The paper's world is the first pair and the first two
solos, drawn from the same random stream as always; every further pair or solo
draws from its own stream. So a seed gives the same first pair and solos at every
size (seeds stay paired across sizes), and the paper's size records exactly what
it always did."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.records import as_record
from workbench.seeding import rng_for

ROLES: tuple[str, ...] = ("pair_a", "pair_b", "solo_1", "solo_2")  # the paper's size: 1 pair, 2 solos
PAIR_ROLES: tuple[str, str] = ("pair_a", "pair_b")
MAX_PAIRS, MAX_SOLOS = 8, 16
PAIR_FORMS: tuple[str, ...] = ("digits", "remainders")
SOLO_KINDS: tuple[str, ...] = ("digit_sum", "mod_prime", "product")
SMALL_PRIMES: tuple[int, ...] = (7, 11, 13, 17, 19, 23)
PAIR_KEYS = {"digits": ("C_A", "C_B"), "remainders": ("R_A", "R_B")}
NUMBER_NAMES = ("N_A", "N_B")


def pair_roles(k: int) -> tuple[str, str]:
    """The two halves of pair ``k`` (1-based): the first pair keeps the paper's names."""
    return PAIR_ROLES if k == 1 else (f"pair{k}_a", f"pair{k}_b")


def solo_role(k: int) -> str:
    return f"solo_{k}"


def roles(pairs: int = 1, solos: int = 2) -> tuple[str, ...]:
    """Every role of a world of this size, pairs first."""
    return (*(r for k in range(1, pairs + 1) for r in pair_roles(k)),
            *(solo_role(k) for k in range(1, solos + 1)))


def pair_of(role: str) -> int | None:
    """Which pair a role belongs to (1-based), or None for a self-contained agent."""
    m = _PAIR_ROLE.fullmatch(role)
    if m is None:
        return None
    return int(m.group(1) or 1)


def partner_role(role: str) -> str | None:
    """The other half of a pair role (None for a self-contained agent)."""
    k = pair_of(role)
    if k is None:
        return None
    a, b = pair_roles(k)
    return b if role == a else a


_PAIR_ROLE = re.compile(r"pair(\d*)_[ab]")


def pair_keys(form: str, k: int) -> tuple[str, str]:
    """The intermediate keys of pair ``k``: distinct per pair, so pairs never share a key
    by construction (a shared name would be a collision, not coordination)."""
    a, b = PAIR_KEYS[form]
    return (a, b) if k == 1 else (f"{a[0]}{k}{a[1:]}", f"{b[0]}{k}{b[1:]}")


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
               solo_kinds: tuple[str, ...] = SOLO_KINDS, pairs: int = 1, solos: int = 2) -> WorldTasks:
    """Every agent's tasks for one world, from its seed alone."""
    if not (1 <= pairs <= MAX_PAIRS and 0 <= solos <= MAX_SOLOS):
        raise InputError(f"world size pairs={pairs}, solos={solos}: expected 1..{MAX_PAIRS} pairs, "
                         f"0..{MAX_SOLOS} solos")
    rng = rng_for(seed, "tasks")
    if form == "any":
        form = rng.choice(PAIR_FORMS)
    if form not in PAIR_FORMS:
        raise InputError(f"unknown task form {form!r}; expected one of {PAIR_FORMS} or 'any'")
    lo, hi = 10 ** (digits - 1), 10**digits - 1
    tasks: dict[str, AgentTask] = {}
    answer, redraws = _draw_pair(rng, form, 1, lo, hi, modulus, tasks)
    # the paper's two solos come from the first stream whatever the size (they follow its pair)
    solo_draws = [_draw_solo(rng, solo_kinds, lo, hi, role) for role in ("solo_1", "solo_2")]
    for k in range(2, pairs + 1):
        redraws += _draw_pair(rng_for(seed, "tasks", "pair", k), form, k, lo, hi, modulus, tasks)[1]
    for k in range(3, solos + 1):
        solo_draws.append(_draw_solo(rng_for(seed, "tasks", "solo", k), solo_kinds, lo, hi, solo_role(k)))
    for task in solo_draws[:solos]:
        tasks[task.role] = task
    # the paper's four roles take the slots they take in the paper's world (a simulated agent's
    # randomness derives from its slot, so pair 1 stays paired across sizes); further roles follow
    order = list(ROLES)
    rng_for(seed, "roles").shuffle(order)
    extra = [r for r in roles(pairs, solos) if r not in ROLES]
    rng_for(seed, "roles", "extra").shuffle(extra)
    slots = {f"agent-{i}": role for i, role in enumerate([r for r in order if r in tasks] + extra)}
    return WorldTasks(form, slots, tasks, answer, redraws, {"digits": digits, "modulus": modulus})


def _draw_pair(rng: random.Random, form: str, k: int, lo: int, hi: int, modulus: int,
               into: dict[str, AgentTask]) -> tuple[int, int]:
    """Pair ``k``'s two halves into ``into``; returns (its joint answer, redraws)."""
    redraws = 0
    numbers = []
    for _ in range(2):
        n = rng.randint(lo, hi)
        while needs_redraw(form, n, modulus):
            redraws += 1
            n = rng.randint(lo, hi)
        numbers.append(n)
    halves = [half_value(form, n, modulus) for n in numbers]
    answer = joint(form, halves[0], halves[1])
    keys = pair_keys(form, k)
    for i, role in enumerate(pair_roles(k)):
        into[role] = AgentTask(
            role=role, kind=form,
            inputs={"number": numbers[i], **({"modulus": modulus} if form == "remainders" else {})},
            expected=answer, own_key=keys[i], partner_key=keys[1 - i], own_value=halves[i],
        )
    return answer, redraws


def _draw_solo(rng: random.Random, solo_kinds: tuple[str, ...], lo: int, hi: int, role: str) -> AgentTask:
    kind = rng.choice(solo_kinds)
    if kind == "digit_sum":
        n = rng.randint(lo, hi)
        return AgentTask(role, kind, {"number": n}, digit_sum(n))
    if kind == "mod_prime":
        n, p = rng.randint(lo, hi), rng.choice(SMALL_PRIMES)
        return AgentTask(role, kind, {"number": n, "prime": p}, n % p)
    if kind == "product":
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        return AgentTask(role, kind, {"a": a, "b": b}, a * b)
    raise InputError(f"unknown self-contained task kind {kind!r}; expected one of {SOLO_KINDS}")
