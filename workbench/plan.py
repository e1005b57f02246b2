"""Plan a study before paying for it: calls, tokens and dollars per cell, and the
power of each designed contrast at the planned worlds per cell.

A plan needs, per cell, how many calls a world makes, how many tokens each call
sends and gets, the share of its worlds that are valid, and the rate of the kind's
headline metric. It takes them from a *rehearsal*: the study's own cells run for a
few worlds with every real route replaced by its simulated twin (``sim/twin-NAME``
for catalogue entry ``NAME``), or from an earlier run set of the same cells
(``--from``), or, for rates, from the user (``--assume CELL=RATE``). What each figure
rests on is printed beside it: a twin's tokens and rates are simulated behaviour, a
guess to check, never a measurement. A twin emits no reasoning tokens: where the
model it stands in for reasons, the cell carries a warning with what each 1000
reasoning tokens a call would add to its cost. Costs use the catalogue's prices; a
route without one says so. Where the figures' usage reports prompt tokens read from or
written to a provider's prompt cache (a run set of real calls: ``--from``), those are
priced at the cache prices (:mod:`workbench.models.prices`) and the cost's note says
so; twins report none, so a rehearsal prices every input token at the input price
(an upper figure where the provider caches prompts), and its note says that too.

Power is that of the test the analysis reports (:mod:`workbench.metrics.contrasts`):
world i of cell A paired with world i of cell B, the pairs valid in both, statsmodels'
exact McNemar test, two-sided, rejecting at p <= 0.05, with no multiple-comparison
correction (the analysis shows a Holm column only beside the raw p, on request). It
is enumerated exactly (:func:`workbench.stats.mcnemar_power`) from the chance that a
pair is discordant each way, p10 (A yes, B no) and p01 (B yes, A no): taken from the
rehearsal's (or run set's) own pairs when it has enough of them, else from the two
rates assuming a pair's outcomes independent. Attrition (the rehearsal's share of
valid pairs) lowers the power at the planned worlds and raises the worlds to run.
Interval widths are for the Wilson interval the reports print.
"""
from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.params import Cell, Study
from workbench.routes import is_simulated_route

if TYPE_CHECKING:
    from workbench.metrics.contrasts import ContrastSpec, Estimability
    from workbench.models.catalogue import ModelEntry

LEVEL = 0.95  # the analysis's intervals and its test (reject at p <= 1 - LEVEL)
MIN_PAIRS = 10  # paired rehearsal worlds below which p10/p01 come from the rates instead


def _inwards(k: int, n: int) -> float:
    """k/n, with 0/n and n/n moved half a unit inwards ((k + 0.5) / (n + 1)): a few worlds
    cannot show a chance of exactly 0 or 1, and such a chance makes any difference look
    detectable in a handful of worlds."""
    return (k + 0.5) / (n + 1) if k in (0, n) else k / n


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
    assumed: bool = False  # the rate is the user's (--assume): a marginal, with no pairs behind it
    valid_k_n: tuple[int, int] | None = None  # the rehearsal's valid worlds of its worlds
    reasoning_usd_per_ktok: float | None = None  # cost of 1000 more output tokens a call, where the twin under-counts
    warning: str = ""
    impossible: bool = False  # the metric cannot occur in this cell (no store: no cross-agent read): 0 is exact

    @property
    def planning_rate(self) -> float | None:
        """The rate power is computed at: a rehearsal's 0/n or n/n moved half a world inwards,
        except a 0 the cell's design makes certain (kept at 0)."""
        if self.impossible and not self.assumed:  # the user's --assume is theirs to state
            return 0.0
        if self.k_n is not None and not self.assumed:
            return _inwards(*self.k_n)
        return self.rate

    @property
    def valid_share(self) -> float | None:
        """The rehearsal's share of valid worlds (the analysis counts valid worlds only)."""
        if self.valid_k_n is None or not self.valid_k_n[1]:
            return None
        return self.valid_k_n[0] / self.valid_k_n[1]

    @property
    def calls(self) -> float | None:
        return None if self.calls_per_world is None else self.calls_per_world * self.worlds

    def row(self) -> dict[str, Any]:
        def tokens(per_call: float | None) -> float | None:
            return None if per_call is None or self.calls is None else round(per_call * self.calls)

        share = self.valid_share
        return {"cell": self.label, "cell_id": self.cell_id, "worlds": self.worlds,
                "calls": None if self.calls is None else round(self.calls),
                "input_tokens": tokens(self.input_tokens_per_call),
                "output_tokens": tokens(self.output_tokens_per_call),
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4), "cost_note": self.cost_note,
                "rate": None if self.rate is None else round(self.rate, 4), "rate_from": self.rate_k_n,
                "valid share": None if share is None else round(share, 3),
                "figures_from": self.source, "warning": self.warning}


@dataclass(frozen=True)
class JointOutcome:
    """Two cells' worlds paired as the analysis pairs them (same index and seed, valid in
    both): how many pairs, how many had the metric in A only and in B only, and how many
    pairs were lost because either world was invalid."""

    pairs: int
    only_a: int
    only_b: int
    lost: int = 0

    @property
    def valid_share(self) -> float | None:
        """Share of the pairs present in both cells that were valid in both."""
        total = self.pairs + self.lost
        return self.pairs / total if total else None

    def discordant(self, a_impossible: bool = False, b_impossible: bool = False) -> tuple[float, float, bool]:
        """(p10, p01, moved): the chance a pair is A-only and B-only, a count of 0 (or of every
        pair) moved half a pair inwards as a rehearsal rate of 0/n is; an A-only (B-only) pair
        stays at exactly 0 where the metric cannot occur in A (B)."""
        p10 = 0.0 if a_impossible else _inwards(self.only_a, self.pairs)
        p01 = 0.0 if b_impossible else _inwards(self.only_b, self.pairs)
        moved = ((not a_impossible and self.only_a in (0, self.pairs))
                 or (not b_impossible and self.only_b in (0, self.pairs)))
        return p10, p01, moved


@dataclass
class ContrastPlan:
    """One matched pair of cells: the discordant-pair chances planned, the power of the
    analysis's exact McNemar test at the planned worlds, and the worlds to run for the
    target power and for the interval half-width."""

    contrast: str
    factor: str
    a: str
    b: str
    rate_a: float | None
    rate_b: float | None
    worlds: int
    power_target: float = 0.8
    p10: float | None = None
    p01: float | None = None
    valid_share: float | None = None  # of pairs: both worlds valid
    power: float | None = None
    pairs_for_power: int | None = None  # valid pairs the target needs
    worlds_for_power: int | None = None  # worlds per cell to run for them, attrition included
    worlds_for_half_width: int | None = None
    beyond_cap: bool = False  # the target needs more than the search's cap
    notes: list[str] = field(default_factory=list)

    @property
    def note(self) -> str:
        return "; ".join(n for n in self.notes if n)

    def row(self) -> dict[str, Any]:
        from workbench.stats import WORLDS_CAP

        target = f"{self.power_target:.0%}"
        beyond = f"more than {WORLDS_CAP}" if self.beyond_cap else None

        def rounded(x: float | None, digits: int) -> float | None:
            return None if x is None else round(x, digits)

        return {"contrast": self.contrast, "factor": self.factor, "A": self.a, "B": self.b,
                "rate A": self.rate_a, "rate B": self.rate_b, "p10 (A only)": rounded(self.p10, 4),
                "p01 (B only)": rounded(self.p01, 4), "worlds per cell": self.worlds,
                "valid share": rounded(self.valid_share, 3), "power": rounded(self.power, 3),
                f"valid pairs for {target} power": self.pairs_for_power or beyond,
                f"worlds for {target} power": self.worlds_for_power or beyond,  # per cell, to run: attrition included
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

    @property
    def warnings(self) -> list[str]:
        """Each cell's warning, labelled (the CLI prints them under the cell table)."""
        return [f"{c.label}: {c.warning}" for c in self.cells if c.warning]

    @property
    def reasoning_usd_per_ktok(self) -> float | None:
        """What 1000 reasoning tokens a call would add over every cell whose twin under-counts;
        None when none does or a price is missing."""
        known = [c.reasoning_usd_per_ktok for c in self.cells if c.warning]
        return None if not known or any(x is None for x in known) else float(sum(known))  # type: ignore[arg-type]

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


def catalogue_entry(route: str) -> ModelEntry | None:
    """The catalogue entry of a catalogue name or of the litellm route one names, if any."""
    from workbench.models.catalogue import default_catalogue

    cat = default_catalogue()
    if route in cat:
        return cat.get(route)
    for name in cat.names():
        if cat.get(name).route == route:
            return cat.get(name)
    return None


def call_price(route: str) -> tuple[float, float] | None:
    """(input, output) US dollars per million tokens from the catalogue, if it has them."""
    entry = catalogue_entry(route)
    if entry is None or not entry.priced():
        return None
    return float(entry.input_usd_per_mtok or 0.0), float(entry.output_usd_per_mtok or 0.0)


def cache_price(route: str) -> tuple[float, float, str] | None:
    """(read, write) US dollars per million cached prompt tokens of a catalogue route and where
    they came from: the catalogue's, else litellm's cost map, else the input price."""
    from workbench.models.prices import cache_prices

    entry = catalogue_entry(route)
    if entry is None or not entry.priced():
        return None
    cost_map = None
    if entry.cache_read_usd_per_mtok is None or entry.cache_write_usd_per_mtok is None:
        from workbench.models.litellm_client.loader import get_litellm

        cost_map = get_litellm().model_cost  # imported only for a run set with cached tokens to price
    read, write, source = cache_prices(entry, float(entry.input_usd_per_mtok or 0.0) / 1e6, cost_map)
    return read * 1e6, write * 1e6, source


def reasoning_of(entry: ModelEntry, requested: str | None) -> tuple[bool | None, str]:
    """Whether calls to ``entry`` reason, given the effort a cell requests (None: none), and in
    words why: the effort sent is the cell's, else the entry's default, replaced by the entry's
    ``effort_fallback`` (or omitted) when ``efforts`` does not list it, as the client does.
    None (unknown) when nothing is sent to a model that declares efforts: the provider's
    default applies. An entry that declares no effort at all is taken not to reason."""
    effort = requested if requested is not None else entry.reasoning_effort
    if effort is None:
        return ((None, "no reasoning_effort is sent: the provider's default applies") if entry.efforts is not None
                else (False, ""))
    if entry.efforts is not None and effort not in entry.efforts:
        if entry.effort_fallback is None:
            return None, (f"reasoning_effort {effort} is omitted (catalogue efforts {entry.efforts}): "
                          "the provider's default applies")
        effort = entry.effort_fallback
    if effort == "none":
        return False, ""
    return True, f"reasoning_effort {effort}"


def _reasoning_warning(fig: Mapping[str, Any], worlds: int, swap: Mapping[str, str]) -> tuple[str, float | None]:
    """The warning of a cell whose tokens come from a twin standing in for a model that reasons
    (or may): a twin emits no reasoning tokens, so output tokens and cost are under-counted.
    Returns it and the US dollars that 1000 reasoning tokens a call would add to the cell at
    ``worlds`` worlds (reasoning tokens are billed as output tokens), None where unknown."""
    parts: list[str] = []
    adds: list[float | None] = []
    for route, (calls, _tin, _tout) in fig["routes"].items():
        real = priced_route(route, swap)
        entry = catalogue_entry(real) if real and is_simulated_route(route) else None
        if entry is None:
            continue
        found = [reasoning_of(entry, e) for e in sorted(fig.get("efforts", {}).get(route) or {None}, key=str)]
        if all(r is False for r, _ in found):
            continue
        why = "; ".join(sorted({w for r, w in found if r is not False}))
        sure = "reasons" if any(r for r, _ in found) else "may reason"
        calls_planned = calls * worlds / fig["worlds"]
        if entry.output_usd_per_mtok is None:
            adds.append(None)
            effect = "the cost effect is unknown (no output price in the catalogue)"
        else:
            adds.append(calls_planned * 1000 * entry.output_usd_per_mtok / 1e6)
            effect = (f"each 1000 reasoning tokens a call adds ${adds[-1]:.2f} to the cell ({calls_planned:.0f} "
                      f"calls at ${entry.output_usd_per_mtok:g} per million output tokens)")
        parts.append(f"{entry.name or real} {sure} ({why}) but its twin {route} emits no reasoning tokens: "
                     f"output tokens and cost under-counted; {effect}")
    if not parts:
        return "", None
    usd = None if any(x is None for x in adds) else float(sum(x for x in adds if x is not None))
    return "; ".join(parts) + "; --output-tokens-per-call prices the model's own", usd


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


def _per_cell_figures(records: Any, cell_of: Mapping[str, str], units: Any) -> dict[str, dict[str, Any]]:
    """Per study cell: worlds, calls, tokens and requested reasoning efforts by route, the
    headline metric's k/n over valid worlds and the valid worlds of all (``units``: the kind's
    contrast units, whose ``valid`` the analysis counts)."""
    from workbench.metrics.contrasts import rate

    out: dict[str, dict[str, Any]] = {}
    world_cell = {w["world_id"]: cell_of.get(w["cell_id"]) for w in records.worlds}
    for w in records.worlds:
        cid = world_cell[w["world_id"]]
        if cid is not None:
            out.setdefault(cid, {"worlds": 0, "routes": {}, "efforts": {}, "cache": {}})["worlds"] += 1
    for wid, steps in records.steps.items():
        cid = world_cell.get(wid)
        if cid is None:
            continue
        for s in steps:
            reply = s.get("reply")
            if not isinstance(reply, dict):
                continue
            usage = reply.get("usage") or {}
            route = str(reply.get("route"))
            r = out[cid]["routes"].setdefault(route, [0, 0, 0])
            r[0] += 1
            r[1] += int(usage.get("prompt_tokens") or 0)
            r[2] += int(usage.get("completion_tokens") or 0)
            if usage.get("cached_tokens") or usage.get("cache_write_tokens"):  # of prompt_tokens: priced apart
                c = out[cid]["cache"].setdefault(route, [0, 0])
                c[0] += int(usage.get("cached_tokens") or 0)
                c[1] += int(usage.get("cache_write_tokens") or 0)
            effort = (reply.get("params_requested") or {}).get("reasoning_effort")
            out[cid]["efforts"].setdefault(route, set()).add(None if effort is None else str(effort))
    frame = units.frame
    for run_cid, cid in cell_of.items():
        if cid in out:
            cell_units = frame[frame["cell_id"] == run_cid]
            k, n = rate(cell_units, units.metric)
            out[cid]["k"], out[cid]["n"], out[cid]["units"] = k, n, len(cell_units)
    out["__metric__"] = {"metric": units.metric}
    return out


def _joint_outcomes(units: Any, cell_of: Mapping[str, str], pairs: Sequence[tuple[str, str]]
                    ) -> dict[tuple[str, str], JointOutcome]:
    """Per pair of study cells (A, B): their worlds paired exactly as the analysis pairs them
    (:func:`workbench.metrics.contrasts.paired_test`: same pair keys and seed, valid in both),
    with the discordant counts and the pairs lost to attrition."""
    from workbench.metrics.contrasts import paired_test

    run_of = {cid: run for run, cid in cell_of.items()}
    frame = units.frame
    out: dict[tuple[str, str], JointOutcome] = {}
    for a, b in pairs:
        if a in run_of and b in run_of:
            t = paired_test(frame[frame["cell_id"] == run_of[a]], frame[frame["cell_id"] == run_of[b]], units.metric,
                            units.pair_on, units.seed)
            out[(a, b)] = JointOutcome(int(t["pairs"]), int(t["only A"]), int(t["only B"]), int(t["lost pairs"]))
    return out


def _figures(records: Any, cell_of: Mapping[str, str], pairs: Sequence[tuple[str, str]]
             ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], JointOutcome]]:
    """The per-cell figures and the paired outcomes of a rehearsal or run set."""
    from workbench.kinds import kind_of_records

    if not records.worlds:
        return {}, {}
    units = kind_of_records(records).contrast_units(records)
    return _per_cell_figures(records, cell_of, units), _joint_outcomes(units, cell_of, pairs)


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


def _check_options(rehearse: int, half_width: float, power: float, output_tokens_per_call: float | None) -> None:
    """The options a user sets, checked before a rehearsal is run for nothing."""
    if rehearse < 1:
        raise InputError(f"--rehearse: expected at least 1 world per cell, got {rehearse}")
    if not 0 < half_width < 1:
        raise InputError(f"--half-width: expected a number between 0 and 1, got {half_width}")
    if not 0 < power < 1:
        raise InputError(f"--power: expected a number between 0 and 1, got {power}")
    if output_tokens_per_call is not None and output_tokens_per_call < 0:
        raise InputError(f"--output-tokens-per-call: expected a number of tokens >= 0, got {output_tokens_per_call}")


def make_plan(study: Study, *, rehearse: int = 20, from_run: str | Path | None = None,
              assume: Sequence[str] = (), half_width: float = 0.1, power: float = 0.8,
              output_tokens_per_call: float | None = None) -> Plan:
    """The plan of ``study``: see the module docstring for what each figure rests on."""
    from workbench.records import load_run
    from workbench.study import run_study

    _check_options(rehearse, half_width, power, output_tokens_per_call)
    assumed = _parse_assume(assume, study)
    matched = _matched(study)
    pairs = [(a, b) for _, a, b in matched]
    swap: dict[str, str] = {}
    not_rehearsed: list[str] = []
    if from_run is not None:
        records = load_run(from_run)
        present = {w["cell_id"] for w in records.worlds}
        cell_of = {c.cell_id: c.cell_id for c in study.cells if c.cell_id in present}
        source, origin = f"run set {from_run}", "run set"
        figures, joint = _figures(records, cell_of, pairs)
    else:
        rehearsal, cell_of, swap, not_rehearsed = rehearsal_study(study, rehearse)
        source = f"rehearsal on simulated twins ({rehearse} worlds per cell): simulated behaviour"
        origin = "rehearsal"
        figures, joint = {}, {}
        if rehearsal.cells:
            with tempfile.TemporaryDirectory(prefix="workbench-plan-") as tmp:
                run_study(rehearsal, Path(tmp) / "rehearsal", progress=False)
                figures, joint = _figures(load_run(Path(tmp) / "rehearsal"), cell_of, pairs)
    metric = (figures.get("__metric__") or {}).get("metric") or "headline metric"
    cells = [_cell_plan(study, cell, figures.get(cell.cell_id), source, swap, output_tokens_per_call,
                        cell.label in not_rehearsed, assumed.get(cell.cell_id)) for cell in study.cells]
    for cell, plan in zip(study.cells, cells):
        plan.impossible = study.kind.impossible(cell.spec, metric)
    by_id = {c.cell_id: c for c in cells}
    from workbench.metrics.contrasts import Estimability

    rule = Estimability(**study.estimability)
    contrasts = [plan_contrast(spec, by_id[a], by_id[b], joint.get((a, b)), origin, half_width, power, rule)
                 for spec, a, b in matched]
    return Plan(study.name, cells, contrasts, metric, half_width, power, study.budget_usd)


def _cell_plan(study: Study, cell: Cell, fig: Mapping[str, Any] | None, source: str, swap: Mapping[str, str],
               output_tokens_per_call: float | None, not_rehearsed: bool, assumed: float | None) -> CellPlan:
    """One cell's plan from its rehearsal (or run-set) figures and the user's assumed rate."""
    plan = CellPlan(cell.cell_id, cell.label, study.worlds_for(cell))
    if fig and fig["worlds"]:
        calls = sum(v[0] for v in fig["routes"].values())
        plan.calls_per_world = calls / fig["worlds"]
        if calls:
            plan.input_tokens_per_call = sum(v[1] for v in fig["routes"].values()) / calls
            plan.output_tokens_per_call = (output_tokens_per_call if output_tokens_per_call is not None
                                           else sum(v[2] for v in fig["routes"].values()) / calls)
        plan.cost_usd, plan.cost_note = _cost(fig, plan.worlds, swap, output_tokens_per_call)
        if output_tokens_per_call is None:
            plan.warning, plan.reasoning_usd_per_ktok = _reasoning_warning(fig, plan.worlds, swap)
        plan.source = source
        if fig.get("units"):
            plan.valid_k_n = (fig["n"], fig["units"])
        if fig.get("n"):
            plan.rate, plan.k_n = fig["k"] / fig["n"], (fig["k"], fig["n"])
            plan.rate_k_n = f"{fig['k']}/{fig['n']} ({source.split(':')[0]})"
    else:
        plan.source = ("not rehearsed: a real route with no simulated twin (give --from RUN_DIR)"
                       if not_rehearsed else "no worlds of this cell in the run set")
        plan.cost_note = "unknown: no calls per world"
    if assumed is not None:
        plan.rate, plan.k_n, plan.rate_k_n, plan.assumed = assumed, None, "assumed (--assume)", True
    return plan


def _cost(fig: Mapping[str, Any], worlds: int, swap: Mapping[str, str],
          output_tokens_per_call: float | None) -> tuple[float | None, str]:
    total = 0.0
    unpriced: list[str] = []
    free: list[str] = []
    cached_notes: list[str] = []
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
        read, written = (fig.get("cache") or {}).get(route, (0, 0))
        cprice = cache_price(real) if read or written else None
        if cprice is not None:  # the usage says which prompt tokens the provider's cache served or stored
            fresh = max(0, tin - read - written)
            input_usd = fresh * price[0] + read * cprice[0] + written * cprice[1]
            share = read / tin if tin else 0.0
            cached_notes.append(f"{real}: {share:.0%} of input tokens read from the provider's prompt cache, priced "
                                f"at {cprice[0]:g} (written: {cprice[1]:g}) USD per million ({cprice[2]})")
        else:
            input_usd = tin * price[0]
        total += (input_usd + out_tokens * price[1]) / 1e6 * worlds / fig["worlds"]
    if unpriced:
        return None, f"no price in the catalogue for {', '.join(sorted(set(unpriced)))}"
    priced = sorted({r for r in (priced_route(x, swap) for x in fig["routes"]) if r})
    note = f"catalogue prices of {', '.join(priced)}" if priced else "no real model"
    if cached_notes:
        note += "; " + "; ".join(cached_notes)
    elif priced:
        note += ("; no cached-token figures: every input token at the input price (an upper figure where the "
                 "provider caches prompts)")
    if free:
        note += f"; {', '.join(sorted(free))} simulated: $0"
    return total, note


def _matched(study: Study) -> list[tuple[ContrastSpec, str, str]]:
    """(contrast, A cell id, B cell id) for every pair of the study's cells that differ in a
    contrast's factor alone: the study's declared contrasts, else one per varying factor."""
    from workbench.metrics.contrasts import ContrastSpec, default_contrasts, matched_pairs
    from workbench.metrics.design import design_of

    design = design_of([{"cell_id": c.cell_id, "cell": c.spec.model_dump(mode="json"), "cell_label": c.label}
                        for c in study.cells])
    specs = [ContrastSpec.from_mapping(c) for c in study.contrasts] or default_contrasts(design)
    return [(spec, a, b) for spec in specs for a, b in matched_pairs(design, spec)]


def planned_discordance(a: CellPlan, b: CellPlan, joint: JointOutcome | None, origin: str
                        ) -> tuple[float, float, str] | None:
    """(p10, p01, where from) for a pair of cells: the rehearsal's (or run set's) own pairs when
    it has at least :data:`MIN_PAIRS` and neither rate is assumed; else the two planning rates
    with a pair's outcomes assumed independent (p10 = pA (1 - pB), p01 = pB (1 - pA)), which
    is all an assumed rate, a marginal, can say. None without a rate for both cells."""
    if joint is not None and joint.pairs >= MIN_PAIRS and not (a.assumed or b.assumed):
        p10, p01, moved = joint.discordant(a.impossible, b.impossible)
        where = (f"p10/p01 from {joint.pairs} {origin} pairs ({joint.only_a} A only, {joint.only_b} B only"
                 + ("; a count of 0 or of every pair planned half a pair inwards)" if moved else ")"))
        return p10, p01, where
    pa, pb = a.planning_rate, b.planning_rate
    if pa is None or pb is None:
        return None
    why = ("--assume gives marginal rates" if a.assumed or b.assumed
           else f"only {joint.pairs} {origin} pairs, fewer than {MIN_PAIRS}" if joint is not None
           else f"no {origin} pairs")
    return pa * (1 - pb), pb * (1 - pa), f"p10/p01 from the rates, a pair's outcomes assumed independent ({why})"


def _pair_share(a: CellPlan, b: CellPlan, joint: JointOutcome | None) -> float | None:
    """The share of planned pairs expected valid in both worlds: the rehearsal's own pairs'
    share, else the product of the cells' valid shares; None when nothing says."""
    if joint is not None and joint.valid_share is not None and not (a.assumed or b.assumed):
        return joint.valid_share
    sa, sb = a.valid_share, b.valid_share
    return None if sa is None or sb is None else sa * sb


def plan_contrast(spec: ContrastSpec, a: CellPlan, b: CellPlan, joint: JointOutcome | None, origin: str,
                  half_width: float, power_target: float, rule: Estimability) -> ContrastPlan:
    """The plan of one matched pair: see :class:`ContrastPlan`. Valid pairs are what the test
    counts; with a share s of pairs valid (attrition at random), the power at N planned worlds
    is that of N pairs with discordant chances s p10 and s p01, exactly (the binomial thinning
    of the pairs), and the worlds to run are the smallest N reaching the target that way,
    about the valid pairs needed divided by s."""
    from workbench.stats import mcnemar_power, mcnemar_worlds

    worlds = min(a.worlds, b.worlds)  # worlds pair by index: the smaller cell's count
    plan = ContrastPlan(spec.name, spec.factor, a.label, b.label, a.rate, b.rate, worlds, power_target)
    plan.worlds_for_half_width = _half_width_worlds(a, b, half_width)
    found = planned_discordance(a, b, joint, origin)
    if found is None:
        plan.notes.append("no rate for a cell: rehearse it, or give --assume CELL=RATE")
        return plan
    plan.p10, plan.p01, where = found
    plan.notes.append(where)
    share = _pair_share(a, b, joint)
    plan.valid_share = share
    s = 1.0 if share is None else share
    if share is None:
        plan.notes.append("no valid share known: no attrition assumed")
    elif share < 1:
        plan.notes.append(f"{share:.0%} of pairs valid: power over the expected {worlds * share:.0f} valid pairs, "
                          "worlds to run raised to match")
    if any(c.k_n is not None and not c.assumed and c.planning_rate != c.rate for c in (a, b)):
        plan.notes.append("rehearsal rate 0 or 1 planned half a world inwards")
    for c in (a, b):
        if c.impossible and not c.assumed:
            plan.notes.append(f"{c.label}: the metric cannot occur in this cell's design, so its 0 is planned as exact")
    plan.notes.extend(_estimability_notes(a, b, worlds, rule))
    if plan.p10 == plan.p01:
        plan.notes.insert(0, "equal chances each way (p10 = p01): no difference to detect")
        return plan
    if s == 0:
        plan.notes.append("no valid pairs: no power at any size")
        return plan
    plan.power = mcnemar_power(s * plan.p10, s * plan.p01, worlds, LEVEL)
    plan.pairs_for_power = mcnemar_worlds(plan.p10, plan.p01, power_target, LEVEL)
    plan.worlds_for_power = mcnemar_worlds(s * plan.p10, s * plan.p01, power_target, LEVEL)
    plan.beyond_cap = plan.worlds_for_power is None
    return plan


def _half_width_worlds(a: CellPlan, b: CellPlan, half_width: float) -> int | None:
    """Worlds per cell to run so that each arm's Wilson interval (over its valid worlds, at its
    planning rate) is at most ±half_width: the valid worlds needed over the arm's valid share."""
    from workbench.stats import worlds_for_half_width

    need: list[int] = []
    for c in (a, b):
        p = c.planning_rate
        if p is None:
            return None
        share = 1.0 if c.valid_share is None else c.valid_share
        if share == 0:
            return None
        need.append(math.ceil(worlds_for_half_width(p, half_width, LEVEL) / share - 1e-9))
    return max(need)


def _estimability_notes(a: CellPlan, b: CellPlan, worlds: int, rule: Estimability) -> list[str]:
    """What the analysis's estimability rule will say of an arm at the planned worlds, given the
    rehearsal's valid share: an arm below the rule's share is never estimable; one expected to
    have fewer valid worlds than the rule's minimum needs more worlds."""
    notes: list[str] = []
    for name, c in (("A", a), ("B", b)):
        share = c.valid_share
        if share is None:
            continue
        if share < rule.min_valid_share:
            notes.append(f"{name}: {share:.0%} of worlds valid, below the estimability rule's "
                         f"{rule.min_valid_share:.0%}: its difference would not be estimable at any size")
        elif worlds * share < rule.min_valid:
            notes.append(f"{name}: about {worlds * share:.0f} valid worlds expected, fewer than the estimability "
                         f"rule's {rule.min_valid}: run at least {math.ceil(rule.min_valid / share - 1e-9)} worlds")
    return notes


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
        "power": plan.power_target, "warnings": plan.warnings,
        "reasoning_usd_per_1000_tokens_a_call": plan.reasoning_usd_per_ktok}, indent=2))
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
