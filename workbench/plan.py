"""Plan a study before paying for it: calls, tokens and dollars per cell, and the
power of each designed contrast at the planned worlds per cell.

A plan needs, per cell, how many calls a world makes, how many tokens each call
sends and gets, and the rate of the kind's headline metric. It takes them from a
*rehearsal*: the study's own cells run for a few worlds with every real route
replaced by its simulated twin (``sim/twin-NAME`` for catalogue entry ``NAME``),
or from an earlier run set of the same cells (``--from``), or, for rates, from the
user (``--assume CELL=RATE``). What each figure rests on is printed beside it: a
twin's tokens and rates are simulated behaviour (twins do not reason, so a
reasoning model's output tokens are underestimated), a guess to check, never a
measurement. Costs use the catalogue's prices; a route without one says so.

Power and sample sizes are statsmodels' (:mod:`workbench.stats`): for each pair
of cells that differ in a contrast's factor alone, the power of a two-sided test
at the planned worlds per cell, the worlds per cell for 80 % power, and the worlds
per cell for a rate interval of a given half-width in each arm.
"""
from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.params import Cell, Study
from workbench.routes import is_simulated_route


@dataclass
class CellPlan:
    """One cell's expected load and rate, with where each figure came from."""

    cell_id: str
    label: str
    worlds: int
    calls_per_world: float | None = None
    input_tokens_per_call: float | None = None
    output_tokens_per_call: float | None = None
    cost_usd: float | None = None
    cost_note: str = ""
    rate: float | None = None
    rate_k_n: str = ""
    source: str = ""
    k_n: tuple[int, int] | None = None  # the rehearsal's count, when the rate is one

    @property
    def planning_rate(self) -> float | None:
        """The rate power is computed at: a rehearsal's 0/n or n/n is moved half a world
        inwards ((k + 0.5) / (n + 1)), since a few worlds cannot show a rate of exactly 0 or 1
        and such a rate makes any difference look detectable in a handful of worlds."""
        if self.k_n is not None and self.k_n[0] in (0, self.k_n[1]):
            k, n = self.k_n
            return (k + 0.5) / (n + 1)
        return self.rate

    @property
    def calls(self) -> float | None:
        return None if self.calls_per_world is None else self.calls_per_world * self.worlds

    def row(self) -> dict[str, Any]:
        def tokens(per_call: float | None) -> float | None:
            return None if per_call is None or self.calls is None else round(per_call * self.calls)

        return {"cell": self.label, "cell_id": self.cell_id, "worlds": self.worlds,
                "calls": None if self.calls is None else round(self.calls),
                "input_tokens": tokens(self.input_tokens_per_call),
                "output_tokens": tokens(self.output_tokens_per_call),
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4), "cost_note": self.cost_note,
                "rate": None if self.rate is None else round(self.rate, 4), "rate_from": self.rate_k_n,
                "figures_from": self.source}


@dataclass
class ContrastPlan:
    contrast: str
    factor: str
    a: str
    b: str
    rate_a: float | None
    rate_b: float | None
    worlds: int
    power: float | None
    worlds_for_power: int | None
    worlds_for_half_width: int | None
    note: str = ""

    def row(self) -> dict[str, Any]:
        return {"contrast": self.contrast, "factor": self.factor, "A": self.a, "B": self.b,
                "rate A": self.rate_a, "rate B": self.rate_b, "worlds per cell": self.worlds,
                "power": None if self.power is None else round(self.power, 3),
                "worlds for 80% power": self.worlds_for_power,
                "worlds for half-width": self.worlds_for_half_width, "note": self.note}


@dataclass
class Plan:
    study: str
    cells: list[CellPlan]
    contrasts: list[ContrastPlan]
    metric: str
    half_width: float
    power_target: float
    budget_usd: float | None

    @property
    def total_cost(self) -> float | None:
        costs = [c.cost_usd for c in self.cells]
        return None if any(c is None for c in costs) else float(sum(costs))  # type: ignore[arg-type]

    def frames(self) -> tuple[Any, Any]:
        import pandas as pd

        return (pd.DataFrame([c.row() for c in self.cells]), pd.DataFrame([c.row() for c in self.contrasts]))


def short_labels(labels: Sequence[str]) -> dict[str, str]:
    """Each cell label without the parts every label shares (they go in one line above
    the table), so a terminal table shows what differs between cells."""
    parts = [label.split(" · ") for label in labels]
    shared = set.intersection(*(set(p) for p in parts)) if parts else set()
    return {label: " · ".join(x for x in p if x not in shared) or label for label, p in zip(labels, parts)}


# -- routes: which are real, which twin stands in for one, what a call costs ---------------
def twin_for(route: str, simulated_routes: Sequence[str]) -> str | None:
    """The simulated twin of a real route: ``sim/twin-NAME`` (or the kind's own prefix)
    where NAME is the catalogue name or the route's last part."""
    name = route.rsplit("/", 1)[-1]
    for r in simulated_routes:
        if r.rsplit("/", 1)[-1] == f"twin-{name}":
            return r
    return None


def priced_route(route: str, rehearsed_as: Mapping[str, str]) -> str | None:
    """The route whose price applies: the real route a twin stood in for; for a twin
    in the study itself, the catalogue model it is a twin of."""
    for real, twin in rehearsed_as.items():
        if twin == route:
            return real
    if is_simulated_route(route):
        tail = route.rsplit("/", 1)[-1]
        return tail[len("twin-"):] if tail.startswith("twin-") else None
    return route


def call_price(route: str) -> tuple[float, float] | None:
    """(input, output) US dollars per million tokens from the catalogue, if it has them."""
    from workbench.models.catalogue import default_catalogue

    cat = default_catalogue()
    entry = cat.get(route) if route in cat else None
    if entry is None:
        for name in cat.names():
            if cat.get(name).route == route:
                entry = cat.get(name)
                break
    if entry is None or not entry.priced():
        return None
    return float(entry.input_usd_per_mtok or 0.0), float(entry.output_usd_per_mtok or 0.0)


# -- the rehearsal -----------------------------------------------------------------------
def _replace_routes(value: Any, swap: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return swap.get(value, value)
    if isinstance(value, dict):
        return {k: _replace_routes(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_routes(v, swap) for v in value]
    return value


def rehearsal_study(study: Study, worlds: int) -> tuple[Study, dict[str, str], dict[str, str], list[str]]:
    """The study's cells with real routes swapped for their twins, ``worlds`` each.
    Returns it, {rehearsal cell id: study cell id}, {real route: twin} and the cells
    that cannot be rehearsed (a real route with no twin)."""
    kind = study.kind
    sims = sorted(kind.simulated_profiles())
    swap: dict[str, str] = {}
    cells: list[Cell] = []
    back: dict[str, str] = {}
    missing: list[str] = []
    for cell in study.cells:
        real = [r for r in kind.routes(cell.spec) if not is_simulated_route(r)]
        twins = {r: twin_for(r, sims) for r in real}
        if any(t is None for t in twins.values()):
            missing.append(cell.label)
            continue
        found = {r: t for r, t in twins.items() if t}
        swap.update(found)
        body = _replace_routes(cell.spec.model_dump(mode="json"), found)
        spec = kind.cell_spec.model_validate(body)
        rehearsed = study.variant(cell, spec, origin="plan")
        back[rehearsed.cell_id] = cell.cell_id
        cells.append(rehearsed)
    return dataclasses.replace(study, cells=cells, worlds_per_cell=worlds), back, swap, missing


def _per_cell_figures(records: Any, cell_of: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per study cell: worlds, calls, tokens by route, and the headline metric's k/n."""
    from workbench.kinds import kind_of_records
    from workbench.metrics.contrasts import rate

    out: dict[str, dict[str, Any]] = {}
    world_cell = {w["world_id"]: cell_of.get(w["cell_id"]) for w in records.worlds}
    for w in records.worlds:
        cid = world_cell[w["world_id"]]
        if cid is not None:
            out.setdefault(cid, {"worlds": 0, "routes": {}})["worlds"] += 1
    for wid, steps in records.steps.items():
        cid = world_cell.get(wid)
        if cid is None:
            continue
        for s in steps:
            reply = s.get("reply")
            if not isinstance(reply, dict):
                continue
            usage = reply.get("usage") or {}
            r = out[cid]["routes"].setdefault(str(reply.get("route")), [0, 0, 0])
            r[0] += 1
            r[1] += int(usage.get("prompt_tokens") or 0)
            r[2] += int(usage.get("completion_tokens") or 0)
    units = kind_of_records(records).contrast_units(records)
    frame = units.frame
    for run_cid, cid in cell_of.items():
        if cid in out:
            k, n = rate(frame[frame["cell_id"] == run_cid], units.metric)
            out[cid]["k"], out[cid]["n"] = k, n
    out["__metric__"] = {"metric": units.metric}
    return out


def _parse_assume(items: Sequence[str], study: Study) -> dict[str, float]:
    rates: dict[str, float] = {}
    for item in items:
        name, eq, value = item.rpartition("=")  # a label may hold "=" itself (field=value parts)
        if not eq:
            raise InputError(f"--assume {item!r}: expected CELL=RATE, e.g. --assume 'sim/diligent · store=0.4'")
        try:
            cell = study.cell(name.strip())
        except KeyError as exc:
            raise InputError(f"--assume {item!r}: {exc.args[0]}") from None
        try:
            r = float(value)
        except ValueError:
            raise InputError(f"--assume {item!r}: expected a rate between 0 and 1, got {value!r}") from None
        if not 0 <= r <= 1:
            raise InputError(f"--assume {item!r}: expected a rate between 0 and 1, got {r}")
        rates[cell.cell_id] = r
    return rates


def make_plan(study: Study, *, rehearse: int = 20, from_run: str | Path | None = None,
              assume: Sequence[str] = (), half_width: float = 0.1, power: float = 0.8,
              output_tokens_per_call: float | None = None) -> Plan:
    """The plan of ``study``: see the module docstring for what each figure rests on."""
    from workbench.records import load_run
    from workbench.study import run_study

    assumed = _parse_assume(assume, study)
    swap: dict[str, str] = {}
    not_rehearsed: list[str] = []
    if from_run is not None:
        records = load_run(from_run)
        present = {w["cell_id"] for w in records.worlds}
        cell_of = {c.cell_id: c.cell_id for c in study.cells if c.cell_id in present}
        source = f"run set {from_run}"
        figures = _per_cell_figures(records, cell_of) if records.worlds else {}
    else:
        rehearsal, cell_of, swap, not_rehearsed = rehearsal_study(study, rehearse)
        source = f"rehearsal on simulated twins ({rehearse} worlds per cell): simulated behaviour"
        figures = {}
        if rehearsal.cells:
            with tempfile.TemporaryDirectory(prefix="workbench-plan-") as tmp:
                run_study(rehearsal, Path(tmp) / "rehearsal", progress=False)
                figures = _per_cell_figures(load_run(Path(tmp) / "rehearsal"), cell_of)
    metric = (figures.get("__metric__") or {}).get("metric") or "headline metric"

    cells: list[CellPlan] = []
    for cell in study.cells:
        plan = CellPlan(cell.cell_id, cell.label, study.worlds_for(cell))
        fig = figures.get(cell.cell_id)
        if fig and fig["worlds"]:
            calls = sum(v[0] for v in fig["routes"].values())
            plan.calls_per_world = calls / fig["worlds"]
            if calls:
                plan.input_tokens_per_call = sum(v[1] for v in fig["routes"].values()) / calls
                plan.output_tokens_per_call = (output_tokens_per_call if output_tokens_per_call is not None
                                               else sum(v[2] for v in fig["routes"].values()) / calls)
            plan.cost_usd, plan.cost_note = _cost(fig, study.worlds_for(cell), swap, output_tokens_per_call)
            plan.source = source
            if fig.get("n"):
                plan.rate, plan.k_n = fig["k"] / fig["n"], (fig["k"], fig["n"])
                plan.rate_k_n = f"{fig['k']}/{fig['n']} ({source.split(':')[0]})"
        else:
            plan.source = ("not rehearsed: a real route with no simulated twin (give --from RUN_DIR)"
                           if cell.label in not_rehearsed else "no worlds of this cell in the run set")
            plan.cost_note = "unknown: no calls per world"
        if cell.cell_id in assumed:
            plan.rate, plan.k_n, plan.rate_k_n = assumed[cell.cell_id], None, "assumed (--assume)"
        cells.append(plan)
    by_id = {c.cell_id: c for c in cells}
    contrasts = _contrast_plans(study, by_id, half_width, power)
    return Plan(study.name, cells, contrasts, metric, half_width, power, study.budget_usd)


def _cost(fig: Mapping[str, Any], worlds: int, swap: Mapping[str, str],
          output_tokens_per_call: float | None) -> tuple[float | None, str]:
    total = 0.0
    unpriced: list[str] = []
    free: list[str] = []
    for route, (calls, tin, tout) in fig["routes"].items():
        real = priced_route(route, swap)
        if real is None:
            free.append(route)  # a simulated agent in the study itself costs nothing
            continue
        price = call_price(real)
        if price is None:
            unpriced.append(real)
            continue
        out_tokens = output_tokens_per_call * calls if output_tokens_per_call is not None else tout
        total += (tin * price[0] + out_tokens * price[1]) / 1e6 * worlds / fig["worlds"]
    if unpriced:
        return None, f"no price in the catalogue for {', '.join(sorted(set(unpriced)))}"
    priced = sorted({r for r in (priced_route(x, swap) for x in fig["routes"]) if r})
    note = f"catalogue prices of {', '.join(priced)}" if priced else "no real model"
    if free:
        note += f"; {', '.join(sorted(free))} simulated: $0"
    return total, note


def _contrast_plans(study: Study, cells: Mapping[str, CellPlan], half_width: float,
                    power_target: float) -> list[ContrastPlan]:
    from workbench.metrics.contrasts import ContrastSpec, default_contrasts, matched_pairs
    from workbench.metrics.design import design_of
    from workbench.stats import power_at, worlds_for_half_width, worlds_to_detect

    design = design_of([{"cell_id": c.cell_id, "cell": c.spec.model_dump(mode="json"), "cell_label": c.label}
                        for c in study.cells])
    specs = [ContrastSpec.from_mapping(c) for c in study.contrasts] or default_contrasts(design)
    out: list[ContrastPlan] = []
    for spec in specs:
        for a, b in matched_pairs(design, spec):
            pa, pb = cells[a].planning_rate, cells[b].planning_rate
            paired = min(cells[a].worlds, cells[b].worlds)  # worlds pair by index: the smaller cell's count
            plan = ContrastPlan(spec.name, spec.factor, cells[a].label, cells[b].label, cells[a].rate,
                                cells[b].rate, paired, None, None, None)
            moved = [c.label for c in (cells[a], cells[b]) if c.planning_rate != c.rate]
            if pa is None or pb is None:
                plan.note = "no rate for a cell: rehearse it, or give --assume CELL=RATE"
                out.append(plan)
                continue
            plan.worlds_for_half_width = max(worlds_for_half_width(pa, half_width),
                                             worlds_for_half_width(pb, half_width))
            if pa == pb:
                plan.note = "equal rates: no difference to detect"
            else:
                plan.power = power_at(pa, pb, paired)
                plan.worlds_for_power = worlds_to_detect(pa, pb, power=power_target)
            if moved:
                plan.note = "; ".join(filter(None, [plan.note, "rehearsal rate 0 or 1 planned half a world "
                                                    "inwards"]))
            out.append(plan)
    return out


def write_plan(plan: Plan, out_dir: str | Path, params_sha256: str) -> dict[str, Path]:
    """plan.csv (cells), power.csv (contrasts) and plan.json (totals and the params'
    hash, so that `run` shows the estimate only for the same file)."""
    import json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cells, contrasts = plan.frames()
    cells.to_csv(out / "plan.csv", index=False)
    contrasts.to_csv(out / "power.csv", index=False)
    (out / "plan.json").write_text(json.dumps({
        "study": plan.study, "params_sha256": params_sha256, "total_cost_usd": plan.total_cost,
        "budget_usd": plan.budget_usd, "metric": plan.metric, "half_width": plan.half_width,
        "power": plan.power_target}, indent=2))
    return {"cells": out / "plan.csv", "contrasts": out / "power.csv", "totals": out / "plan.json"}


def saved_estimate(out_dir: str | Path, params_sha256: str) -> float | None:
    """The total cost a saved plan of the same params file estimated, if any."""
    import json

    path = Path(out_dir) / "plan.json"
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if body.get("params_sha256") != params_sha256:
        return None
    value = body.get("total_cost_usd")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
