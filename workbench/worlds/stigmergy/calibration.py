"""Calibration of the simulated twins: each twin run on the designs of the paper's
figures it was fitted to (``profiles/calibration.yaml``), its count held against
the reference with a Newcombe interval of the difference.

This is what makes a twin usable for rehearsal: its parameters are data, the
figures they were set to are data beside them, and a check that anyone can run
(`workbench profiles --check`, and a test) says whether they still agree. Worlds
run here directly through the world and the simulated clients (no records are
written): the check is about the profile, not the runner.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import InputError
from workbench.resources import shipped
from workbench.seeding import derive_seed
from workbench.templates import template_set

PROMPTS = shipped("params", "prompts", "stigmergy")
CALIBRATION_FILE = Path(__file__).with_name("profiles") / "calibration.yaml"


@dataclass(frozen=True)
class Check:
    twin: str
    figure: str
    k: int
    n: int
    ref_k: int
    ref_n: int
    diff: float
    low: float
    high: float

    @property
    def within(self) -> bool:
        return self.low <= 0.0 <= self.high

    def row(self) -> dict[str, Any]:
        return {"twin": self.twin, "figure": self.figure, "twin k/n": f"{self.k}/{self.n}",
                "reference k/n": f"{self.ref_k}/{self.ref_n}", "difference": round(self.diff, 3),
                "95% interval": f"[{self.low:+.3f}, {self.high:+.3f}]", "within": self.within}


def load_calibration(path: Path = CALIBRATION_FILE) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for twin, figures in (raw.get("references") or {}).items():
        for figure, kn in figures.items():
            if figure not in raw.get("figures", {}):
                raise InputError(f"{path}: references.{twin}.{figure}: expected one of {sorted(raw['figures'])}")
            k, _, n = str(kn).partition("/")
            if not (k.isdigit() and n.isdigit() and 0 <= int(k) <= int(n) > 0):
                raise InputError(f"{path}: references.{twin}.{figure}: expected k/n counts, got {kn!r}")
    return raw


def _cell(design: dict[str, Any], figure: dict[str, Any], route: str) -> Any:
    from workbench.worlds.stigmergy.spec import StigmergyCell

    return StigmergyCell.model_validate({**design["cell"], **(figure.get("cell") or {}), "model": route,
                                         "prompts": str(PROMPTS)})


async def _worlds(cell: Any, seed: int, n: int, profiles: dict[str, Any] | None) -> list[dict[str, Any]]:
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

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def check_twin(twin: str, profiles: dict[str, Any] | None = None,
               calibration: dict[str, Any] | None = None) -> list[Check]:
    """Every reference figure of one twin: its count on the figure's design beside the paper's."""
    from workbench.stats import newcombe

    cal = calibration or load_calibration()
    refs = (cal.get("references") or {}).get(twin) or {}
    out: list[Check] = []
    for name, kn in refs.items():
        figure = cal["figures"][name]
        design = cal["designs"][figure["design"]]
        ref_k, ref_n = (int(x) for x in str(kn).split("/"))
        per_agent = figure.get("per") == "pair-agent"
        worlds = ref_n // 2 if per_agent else ref_n
        rows = asyncio.run(_worlds(_cell(design, figure, f"sim/{twin}"), int(design["seed"]), worlds, profiles))
        k = sum(int(r[figure["metric"]]) for r in rows)
        n = 2 * worlds if per_agent else worlds
        diff, low, high = newcombe(k, n, ref_k, ref_n)
        out.append(Check(twin, name, k, n, ref_k, ref_n, diff, low, high))
    return out


def check_all(profiles: dict[str, Any] | None = None) -> list[Check]:
    cal = load_calibration()
    return [c for twin in cal.get("references") or {} for c in check_twin(twin, profiles, cal)]
