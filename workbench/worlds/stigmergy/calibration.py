"""Calibration of the simulated twins: each twin run on the designs of the paper's
figures it was fitted to (``profiles/calibration.yaml``), at the design's fitting
seed and at the further seeds the file lists, its count held against the reference
with a Newcombe interval of the difference.

This is what makes a twin usable for rehearsal: its parameters are data, the
figures they were set to are data beside them, and a check that anyone can run
(`workbench profiles --check`, and a test) says whether they still agree. A twin
is *within* a figure when the interval of its count pooled over every seed holds
0; each seed's own count and interval are kept too, so that the worst seed and
the number of seeds that are within on their own can be reported beside it (a
twin fitted at one seed can sit outside at another). Worlds run here directly
through the world and the simulated clients (no records are written): the check
is about the profile, not the runner.

How a figure is counted, as the paper counts it:

- over the *valid* worlds of the twin's cell (the paper's rates exclude invalid
  worlds), except the figure of the metric ``valid`` itself, which is over all of
  them (attrition);
- a cell has as many worlds as the twin's ``valid`` reference on the figure's
  design says (the paper's cell: 50, or 100); a figure on a design without one
  runs as many worlds as its reference counts (half as many for a per-pair-agent
  figure, which counts the world's two pair agents);
- a figure with ``given: METRIC`` counts only the worlds where that metric holds
  (exposure, then a read: of the exposed worlds, those with a later read);
- a figure under ``pooled:`` is one the paper gives only over all its cells: every
  twin in ``references`` runs its cell and their counts are added up.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import InputError
from workbench.resources import shipped
from workbench.seeding import derive_seed
from workbench.templates import template_set

PROMPTS = shipped("params", "prompts", "stigmergy")
CALIBRATION_FILE = Path(__file__).with_name("profiles") / "calibration.yaml"
POOLED = "all twins"  # the twin column of a pooled figure


@dataclass(frozen=True)
class SeedCount:
    """One seed's count of a figure beside the reference."""

    seed: int
    k: int
    n: int
    diff: float
    low: float
    high: float

    @property
    def within(self) -> bool:
        return self.n > 0 and self.low <= 0.0 <= self.high

    def text(self) -> str:
        if not self.n:
            return f"{self.seed}: 0/0"
        return f"{self.seed}: {self.k}/{self.n}, {self.diff:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


@dataclass(frozen=True)
class Check:
    """A twin's count of one figure, pooled over the seeds, beside the reference."""

    twin: str
    figure: str
    k: int
    n: int
    ref_k: int
    ref_n: int
    diff: float
    low: float
    high: float
    seeds: tuple[SeedCount, ...] = field(default=())

    @property
    def within(self) -> bool:
        return self.n > 0 and self.low <= 0.0 <= self.high

    @property
    def seeds_within(self) -> int:
        return sum(s.within for s in self.seeds)

    @property
    def worst(self) -> SeedCount | None:
        """The seed whose difference is farthest from 0 (outside before inside)."""
        counted = [s for s in self.seeds if s.n]
        if not counted:
            return None
        return max(counted, key=lambda s: (not s.within, abs(s.diff)))

    def row(self) -> dict[str, Any]:
        worst = self.worst
        return {"twin": self.twin, "figure": self.figure, "reference k/n": f"{self.ref_k}/{self.ref_n}",
                "twin k/n, pooled": f"{self.k}/{self.n}", "difference": round(self.diff, 3),
                "95% interval": f"[{self.low:+.3f}, {self.high:+.3f}]", "within": self.within,
                "seeds within": f"{self.seeds_within}/{len(self.seeds)}",
                "worst seed": worst.text() if worst else ""}


def _kn(path: Path, where: str, kn: Any) -> tuple[int, int]:
    k, _, n = str(kn).partition("/")
    if not (k.isdigit() and n.isdigit() and 0 <= int(k) <= int(n) > 0):
        raise InputError(f"{path}: {where}: expected k/n counts, got {kn!r}")
    return int(k), int(n)


def load_calibration(path: Path = CALIBRATION_FILE) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    figures = raw.get("figures") or {}
    for twin, refs in (raw.get("references") or {}).items():
        for name, kn in refs.items():
            if name not in figures:
                raise InputError(f"{path}: references.{twin}.{name}: expected one of {sorted(figures)}")
            _kn(path, f"references.{twin}.{name}", kn)
    for name, kn in (raw.get("pooled") or {}).items():
        if name not in figures:
            raise InputError(f"{path}: pooled.{name}: expected one of {sorted(figures)}")
        _kn(path, f"pooled.{name}", kn)
    seeds = raw.get("seeds") or []
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise InputError(f"{path}: seeds: expected a list of integers, got {seeds!r}")
    return raw


def design_seeds(cal: dict[str, Any], design: str) -> list[int]:
    """The design's fitting seed, then the further seeds every design is also checked at."""
    first = int(cal["designs"][design]["seed"])
    return [first] + [int(s) for s in cal.get("seeds") or [] if int(s) != first]


def _cell(design: dict[str, Any], figure: dict[str, Any], route: str) -> Any:
    from workbench.worlds.stigmergy.spec import StigmergyCell

    return StigmergyCell.model_validate({**design["cell"], **(figure.get("cell") or {}), "model": route,
                                         "prompts": str(PROMPTS)})


async def _worlds(cell: Any, seed: int, n: int, profiles: dict[str, Any] | None,
                  start: int = 0) -> list[dict[str, Any]]:
    from workbench.models.factory import make_client
    from workbench.worlds.stigmergy.metrics import world_row
    from workbench.worlds.stigmergy.world import StigmergyWorld

    templates = template_set(PROMPTS)

    def factory(route: str, slot: str, s: int, options: dict[str, Any]) -> Any:  # noqa: ARG001
        return make_client(route, seed=s, profiles=profiles, **options)

    async def one(i: int) -> dict[str, Any]:
        world = StigmergyWorld(cell, world_id=f"calibration-{i:04d}", cell_id="calibration",
                               seed=derive_seed(seed, "world", i), templates=templates, client_factory=factory)
        out = await world.run()
        return world_row(out.world, out.steps)

    return list(await asyncio.gather(*(one(i) for i in range(start, n))))


class _Runs:
    """World rows of a cell at a seed, run once and shared by every figure on that cell.
    World i's seed does not depend on how many worlds run, so a longer run extends a shorter one."""

    def __init__(self, profiles: dict[str, Any] | None) -> None:
        self.profiles = profiles
        self.rows: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def get(self, cell: Any, seed: int, n: int) -> list[dict[str, Any]]:
        key = (cell.model_dump_json(), seed)
        have = self.rows.setdefault(key, [])
        if len(have) < n:
            have.extend(asyncio.run(_worlds(cell, seed, n, self.profiles, start=len(have))))
        return have[:n]


def _cell_worlds(cal: dict[str, Any], twin: str, name: str) -> int:
    """How many worlds a twin's cell of a figure runs (see the module's note)."""
    figure = cal["figures"][name]
    refs = (cal.get("references") or {}).get(twin) or {}
    for other, kn in refs.items():
        f = cal["figures"][other]
        if f["metric"] == "valid" and f["design"] == figure["design"] and not f.get("cell"):
            return int(str(kn).split("/")[1])
    if name not in refs:  # a pooled figure: the twin's cell size must be known
        raise InputError(f"{CALIBRATION_FILE.name}: pooled.{name}: {twin} has no valid reference on design "
                         f"{figure['design']!r} (its cell's number of worlds)")
    ref_n = int(str(refs[name]).split("/")[1])
    return ref_n // 2 if figure.get("per") == "pair-agent" else ref_n


def _count(figure: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[int, int]:
    metric = figure["metric"]
    if metric != "valid":
        rows = [r for r in rows if r["valid"]]
    if figure.get("given"):
        rows = [r for r in rows if r[figure["given"]]]
    k = sum(int(r[metric]) for r in rows)
    return k, 2 * len(rows) if figure.get("per") == "pair-agent" else len(rows)


def _check(cal: dict[str, Any], twins: list[str], label: str, name: str, kn: Any, runs: _Runs) -> Check:
    from workbench.stats import newcombe

    figure = cal["figures"][name]
    design = cal["designs"][figure["design"]]
    ref_k, ref_n = (int(x) for x in str(kn).split("/"))
    per_seed: list[SeedCount] = []
    for seed in design_seeds(cal, figure["design"]):
        k = n = 0
        for twin in twins:
            rows = runs.get(_cell(design, figure, f"sim/{twin}"), seed, _cell_worlds(cal, twin, name))
            tk, tn = _count(figure, rows)
            k, n = k + tk, n + tn
        per_seed.append(SeedCount(seed, k, n, *newcombe(k, n, ref_k, ref_n)))
    k, n = sum(s.k for s in per_seed), sum(s.n for s in per_seed)
    return Check(label, name, k, n, ref_k, ref_n, *newcombe(k, n, ref_k, ref_n), seeds=tuple(per_seed))


def check_twin(twin: str, profiles: dict[str, Any] | None = None,
               calibration: dict[str, Any] | None = None, *, runs: _Runs | None = None) -> list[Check]:
    """Every reference figure of one twin: its count on the figure's design, pooled over the
    seeds, beside the paper's."""
    cal = calibration or load_calibration()
    runs = runs or _Runs(profiles)
    refs = (cal.get("references") or {}).get(twin) or {}
    return [_check(cal, [twin], twin, name, kn, runs) for name, kn in refs.items()]


def check_pooled(profiles: dict[str, Any] | None = None, calibration: dict[str, Any] | None = None, *,
                 runs: _Runs | None = None) -> list[Check]:
    """The figures the paper gives over all its cells: every twin's cell, counts added up."""
    cal = calibration or load_calibration()
    runs = runs or _Runs(profiles)
    twins = list(cal.get("references") or {})
    return [_check(cal, twins, POOLED, name, kn, runs) for name, kn in (cal.get("pooled") or {}).items()]


def check_all(profiles: dict[str, Any] | None = None) -> list[Check]:
    cal = load_calibration()
    runs = _Runs(profiles)
    return ([c for twin in cal.get("references") or {} for c in check_twin(twin, profiles, cal, runs=runs)]
            + check_pooled(profiles, cal, runs=runs))

