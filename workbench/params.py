"""Study parameter files: YAML, validated with pydantic, expanded into cells.

A study is a world kind, a list of cells (explicit ``cells`` and/or ``grid``
blocks expanded as cartesian products, each merged over ``defaults``), a
number of worlds per cell and a base seed. Any problem is reported as one
:class:`ParamsError` naming the file, the field path and what was expected.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workbench.errors import InputError, UnknownNameError
from workbench.inputs import InputFileError, confined, first_error, read_yaml_mapping
from workbench.kinds import get_kind, kind_names, load_kinds
from workbench.models.factory import check_request_path, check_route
from workbench.resources import study_path


class ParamsError(InputFileError):
    """A bad parameter file."""


class _StudyModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    world: str
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    seed: int
    worlds_per_cell: int = Field(ge=1, le=100_000)
    concurrency: int = Field(8, ge=1, le=1024)
    defaults: dict[str, Any] = Field(default_factory=dict)
    cells: list[dict[str, Any]] = Field(default_factory=list)
    grid: list[dict[str, Any]] = Field(default_factory=list)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    budget_usd: float | None = Field(None, gt=0, description="no new world starts once this much is spent")
    cache_dir: str | None = Field(None, description="response cache folder (relative to the file); off if absent")
    monitor: MonitorSpec | None = None
    contrasts: list[ContrastModel] = Field(default_factory=list)
    estimability: EstimabilityModel | None = None
    rehearsal: Literal["calibrated", "uncalibrated"] = Field(
        "calibrated", description="calibrated: a cell whose simulated agents cannot read its prompts as they were "
                                  "fitted to is refused; uncalibrated: it runs, and every report says why it is "
                                  "not a calibrated rehearsal")


class EstimabilityModel(BaseModel):
    """When a contrast's difference is called estimable (shown under every contrast table)."""

    model_config = ConfigDict(extra="forbid")
    min_valid: int = Field(10, ge=1, description="valid worlds each arm needs at least")
    min_valid_share: float = Field(0.5, ge=0, le=1, description="share of an arm's worlds that must be valid")


class ContrastModel(BaseModel):
    """A comparison the study is designed for: ``factor`` (a cell field, dotted for a
    nested one, e.g. ``sampling.reasoning_effort``) at ``levels``, the first being the
    reference. Analysed only between cells that differ in that factor alone."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_. -]+$")
    factor: str
    levels: list[Any] | None = Field(None, min_length=2)
    metric: str | None = Field(None, pattern=r"^[a-z0-9_]+$",
                               description="a boolean world metric to compare (default: the kind's headline metric)")


class MonitorSpec(BaseModel):
    """A second model that labels each recorded step afterwards; labels go into the
    step record only, never back to an agent, never into metrics."""

    model_config = ConfigDict(extra="forbid")
    model: str
    params: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0})
    prompt: str = Field("prompts/monitor/default.txt",
                        description="the monitor's template ($step, $labels), relative to the params file; "
                                    "locks hash it like every other template")
    labels: list[str] = Field(default_factory=lambda: ["mentions_other", "none"], min_length=1)
    flag: str = Field("mentions_other", description="the label the report counts on read steps "
                                                   "(the paper's post-hoc intent check)")

    @model_validator(mode="after")
    def _flag_is_a_label(self) -> MonitorSpec:
        if self.flag not in self.labels:
            raise InputError(f"flag: expected one of labels {self.labels} (got {self.flag!r})")
        return self


_StudyModel.model_rebuild()  # resolve the forward references above


@dataclass(frozen=True)
class Cell:
    cell_id: str  # short content hash: stable across edits that leave the cell unchanged
    index: int
    spec: Any  # the world kind's CellSpec
    origin: str  # where in the file it came from, for messages
    label: str = ""  # the kind's short name for the cell (its describe_cell)
    worlds: int | None = None  # this cell's worlds when not the study's worlds_per_cell (a costly cell)


@dataclass
class Study:
    path: Path
    name: str
    world: str
    seed: int
    worlds_per_cell: int
    concurrency: int
    description: str
    cells: list[Cell]
    profiles: dict[str, Any] = field(default_factory=dict)  # the kind's study-defined simulated profiles
    raw: dict[str, Any] = field(default_factory=dict)
    budget_usd: float | None = None
    cache_dir: Path | None = None
    monitor: MonitorSpec | None = None
    contrasts: list[dict[str, Any]] = field(default_factory=list)
    estimability: dict[str, Any] = field(default_factory=dict)  # the study's own rule, or {} (the default)
    rehearsal: str = "calibrated"
    # what its simulated agents cannot read as fitted, by cell label (only under rehearsal: uncalibrated)
    uncalibrated: dict[str, list[str]] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def kind(self):  # noqa: ANN201 - a module
        return get_kind(self.world)

    def variant(self, cell: Cell, spec: Any, origin: str = "explorer") -> Cell:
        """``cell`` with another spec: its id and label recomputed, so a changed cell never keeps the old name."""
        return Cell(cell_hash(spec), cell.index, spec, origin, self.kind.describe_cell(spec))

    def worlds_for(self, cell: Cell) -> int:
        """How many worlds ``cell`` runs: its own ``worlds:`` or the study's worlds_per_cell."""
        return cell.worlds or self.worlds_per_cell

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.cell_id == cell_id or c.label == cell_id:
                return c
        raise UnknownNameError(f"no cell {cell_id!r} in {self.path}; cells: {[c.cell_id for c in self.cells]}")


def _check_route(route: str, profiles: dict[str, Any]) -> None:
    """``check_route``; a route it does not know may be another world kind's simulated
    agent (e.g. a monitor), so every kind is imported, once, and the route asked again.
    Importing them up front cost a study of one kind a quarter second it rarely needs."""
    try:
        check_route(route, profiles)
    except ValueError:
        load_kinds()  # every kind registers its simulated routes on import
        check_route(route, profiles)


def cell_hash(spec: BaseModel) -> str:
    """A cell's id: a hash of its full design. Fields a kind added after cells were
    first recorded (its spec's ``HASH_OMITS_DEFAULT``) count only when set away from
    their default, so an existing study keeps its cell ids, and resumes, when a new
    factor appears."""
    data = spec.model_dump(mode="json")
    fields = type(spec).model_fields
    for name in getattr(type(spec), "HASH_OMITS_DEFAULT", ()):
        if name in data and name in fields and data[name] == fields[name].get_default(call_default_factory=True):
            del data[name]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


def monitor_prompt_path(params_path: Path, monitor: MonitorSpec) -> Path:
    """Where a study's monitor template is: relative to the params file, like the kinds' prompts."""
    return study_path(Path(params_path).parent, monitor.prompt, explicit="prompt" in monitor.model_fields_set)


def load_study(path: str | Path) -> Study:
    path = Path(path)
    raw = read_yaml_mapping(path, ParamsError, "a YAML study file: a mapping of study fields")
    try:
        model = _StudyModel.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(path, *first_error(exc)) from None
    if model.world not in kind_names():
        raise ParamsError(path, "world", f"expected one of {kind_names()} (got {model.world!r})")
    kind = get_kind(model.world)

    profiles: dict[str, Any] = {}
    for name, body in model.profiles.items():
        try:
            profiles[name] = kind.study_profile(name, body)
        except KeyError as exc:
            raise ParamsError(path, f"profiles.{name}.base", str(exc.args[0])) from None
        except ValidationError as exc:
            loc, msg = first_error(exc)
            raise ParamsError(path, f"profiles.{name}.{loc}", msg) from None
        except ValueError as exc:
            raise ParamsError(path, f"profiles.{name}", str(exc)) from None

    if model.monitor is not None:
        try:
            _check_route(model.monitor.model, profiles)
        except (KeyError, ValueError) as exc:
            raise ParamsError(path, "monitor.model", str(exc.args[0])) from None
        prompt = monitor_prompt_path(path, model.monitor)
        if not prompt.is_file():
            raise ParamsError(path, "monitor.prompt", f"expected a template file, {prompt} does not exist")
        if "$step" not in prompt.read_text(encoding="utf-8"):
            raise ParamsError(path, "monitor.prompt", f"{prompt} must contain $step (where the step's text goes)")

    entries: list[tuple[str, dict[str, Any]]] = [(f"cells[{i}]", c) for i, c in enumerate(model.cells)]
    for gi, block in enumerate(model.grid):
        factors = {k: (v if isinstance(v, list) else [v]) for k, v in block.items()}
        for ci, combo in enumerate(itertools.product(*factors.values())):
            entries.append((f"grid[{gi}] (combination {ci})", dict(zip(factors, combo))))
    if not entries:
        raise ParamsError(path, "cells", "expected at least one cell (under cells: or grid:)")

    cells: list[Cell] = []
    seen: dict[str, str] = {}
    uncalibrated: dict[str, list[str]] = {}
    for i, (origin, body) in enumerate(entries):
        if not isinstance(body, dict):
            raise ParamsError(path, origin, f"expected a mapping of cell fields, got {type(body).__name__}")
        body = dict(body)
        worlds = body.pop("worlds", None)  # how many worlds, not part of the design: never in the cell id
        if worlds is not None and (isinstance(worlds, bool) or not isinstance(worlds, int)
                                   or not 1 <= worlds <= 100_000):
            raise ParamsError(path, f"{origin}.worlds", f"expected a whole number of worlds from 1 to 100000, "
                                                        f"got {worlds!r}")
        merged = {**model.defaults, **body}
        try:
            spec = kind.cell_spec.model_validate(merged)
        except ValidationError as exc:
            loc, msg = first_error(exc)
            top = loc.split(".")[0].split("[")[0]
            where = origin if (not loc or top in body) else "defaults"
            raise ParamsError(path, f"{where}.{loc}" if loc else where, msg) from None
        for route in sorted(kind.routes(spec)):
            try:
                _check_route(route, profiles)
            except (KeyError, ValueError) as exc:
                raise ParamsError(path, f"{origin}.model", str(exc.args[0])) from None
            request_path = getattr(spec, "request_path", None)
            if request_path is not None:
                try:
                    check_request_path(route, request_path)
                except (KeyError, ValueError) as exc:
                    where = origin if "request_path" in body else "defaults"
                    raise ParamsError(path, f"{where}.request_path",
                                      str(exc.args[0]).removeprefix("request_path: ")) from None
        try:  # what only the study knows: e.g. enough sequences for its worlds
            kind.check_cell(spec, worlds or model.worlds_per_cell)
        except ValueError as exc:
            field, _, msg = str(exc.args[0]).partition(": ")
            raise ParamsError(path, f"{origin if field in body else 'defaults'}.{field}", msg) from None
        prompts = getattr(spec, "prompts", None)
        if isinstance(prompts, str) and "prompts" in spec.model_fields_set:
            try:  # a template folder the study names stays inside its project (or is absolute)
                confined(path.parent, prompts, "prompts")
            except ValueError as exc:
                raise ParamsError(path, f"{origin if 'prompts' in body else 'defaults'}.prompts",
                                  str(exc.args[0]).removeprefix("prompts: ")) from None
        root = kind.template_root(spec, path.parent)
        if not root.is_dir():
            raise ParamsError(path, f"{origin}.prompts", f"expected a folder of templates, {root} does not exist")
        problems = kind.rehearsal_problems(spec, root, profiles)
        if problems and model.rehearsal == "calibrated":
            more = f" ({len(problems) - 1} more problem(s) in this cell)" if len(problems) > 1 else ""
            raise ParamsError(path, f"{origin}.model", f"{problems[0]}{more}. A rehearsal on it would report the "
                              "simulation's misreading as the wording's effect: map the wording with a study profile "
                              "(cues), or declare rehearsal: uncalibrated to run it labelled as such")
        if problems:
            uncalibrated[kind.describe_cell(spec)] = problems
        try:
            kind.check_inputs(spec, path.parent, worlds or model.worlds_per_cell)
        except ValueError as exc:
            field, _, msg = str(exc.args[0]).partition(": ")
            raise ParamsError(path, f"{origin if field in body else 'defaults'}.{field}", msg) from None
        cid = cell_hash(spec)
        if cid in seen:
            raise ParamsError(path, origin, f"duplicates the cell at {seen[cid]} (every cell must differ)")
        seen[cid] = origin
        cells.append(Cell(cid, i, spec, origin, kind.describe_cell(spec), worlds))
    contrasts = _check_contrasts(path, model.contrasts, cells, kind)
    if model.cache_dir:  # replies are read back from it: it stays inside the study's project (or is absolute)
        try:
            confined(path.parent, model.cache_dir, "cache_dir")
        except ValueError as exc:
            raise ParamsError(path, "cache_dir", str(exc.args[0]).removeprefix("cache_dir: ")) from None
    return Study(path=path, name=model.name, world=model.world, seed=model.seed,
                 worlds_per_cell=model.worlds_per_cell, concurrency=model.concurrency,
                 description=model.description, cells=cells, profiles=profiles, raw=raw,
                 budget_usd=model.budget_usd,
                 cache_dir=(path.parent / model.cache_dir) if model.cache_dir else None,
                 monitor=model.monitor, contrasts=contrasts,
                 estimability=model.estimability.model_dump() if model.estimability else {},
                 rehearsal=model.rehearsal, uncalibrated=uncalibrated)


def _check_contrasts(path: Path, declared: list[ContrastModel], cells: list[Cell], kind: Any
                     ) -> list[dict[str, Any]]:
    """Declared contrasts must name a cell field, levels some cell has, and at least
    one pair of cells that differ in that factor alone."""
    if not declared:
        return []  # nothing to check: the design (pandas) is not built
    from workbench.metrics.contrasts import ContrastSpec, matched_pairs
    from workbench.metrics.design import design_of, level_text

    design = design_of([{"cell_id": c.cell_id, "cell": c.spec.model_dump(mode="json"), "cell_label": c.label}
                        for c in cells])
    out = []
    names: set[str] = set()
    for i, c in enumerate(declared):
        where = f"contrasts[{i}]"
        if c.name in names:
            raise ParamsError(path, f"{where}.name", f"expected a unique name ({c.name!r} is used twice)")
        names.add(c.name)
        top = c.factor.split(".", 1)[0]
        if top not in kind.cell_spec.model_fields or top == "label":
            raise ParamsError(path, f"{where}.factor", f"expected a cell field, one of "
                                                       f"{sorted(f for f in kind.cell_spec.model_fields if f != 'label')} "
                                                       f"(got {c.factor!r})")
        have = sorted({design.level(cid, c.factor) for cid in design.cells})
        for j, lv in enumerate(c.levels or []):
            if level_text(lv) not in have:
                raise ParamsError(path, f"{where}.levels[{j}]", f"expected a level some cell has: {have} (got {lv!r})")
        known = kind.contrast_metrics()
        if c.metric is not None and known is not None and c.metric not in known:
            raise ParamsError(path, f"{where}.metric", f"expected a yes/no metric per unit, one of {sorted(known)} "
                                                       f"(got {c.metric!r})")
        spec = ContrastSpec(c.name, c.factor, tuple(level_text(v) for v in c.levels) if c.levels else None)
        if not matched_pairs(design, spec):
            raise ParamsError(path, where, f"expected two cells that differ in {c.factor} alone; none do, so "
                                           "this contrast could only be made by pooling cells")
        out.append(c.model_dump(mode="json", exclude_none=True))
    return out
