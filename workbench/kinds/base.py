"""What a world kind is, in one place: the hooks the engine calls, and what it hands a world.

A kind is a :class:`WorldKind` subclass registered under its name (see
:mod:`workbench.kinds`). Four hooks are required: which routes a cell calls,
where its templates are, how to run one world, and a world's metrics. Every other
hook has a default here that knows no kind: no table, no judges, no extra files,
no preflight problem, no page of its own in the world browser, no subcommand.
A kind that wants more overrides it; the engine never probes for attributes and
never falls back to another kind's code. Every surface of a kind (its world page,
its ``workbench <kind> ...`` commands, its notebooks) is reached through these
hooks, so a kind defined outside this package brings all of them with it.

A world learns its identity from a :class:`WorldContext` (index, seed, run,
ids, the client factory), so no kind needs the study runner to work it out.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

from pydantic import BaseModel

from workbench.errors import InputError
from workbench.models.base import ModelClient
from workbench.records import RowKeeper

ClientFactory = Callable[[str, str, int, dict[str, Any]], ModelClient]  # (route, slot, seed, options) -> client


@dataclass
class WorldOutcome:
    """A finished (or failed) world: its world record and its step records, in order."""

    world: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class WorldContext:
    """Everything a world is told about itself by whoever runs it (study runner, replay, a test)."""

    world_id: str
    cell_id: str
    world_index: int  # the world's number in its cell (world i of every cell shares a seed)
    seed: int
    run: int  # the invocation of `run` that made it (1 = first)
    base_dir: Path  # the params file's folder: templates and data paths are relative to it
    client_factory: ClientFactory
    monitor: Any = None  # a Monitor labelling steps after the world, or None
    # a folder where a kind may keep its own per-world checkpoints, so that a world cut short
    # (killed, crashed) continues from them when the run is resumed; None: no checkpoints
    checkpoint_dir: Path | None = None


@dataclass(frozen=True)
class KindCommand:
    """One ``workbench <kind> <name>`` subcommand a kind brings: ``configure`` adds its
    arguments to the parser the command line made for it; ``run`` does the work and
    returns the exit status (a :class:`~workbench.errors.WorkbenchError` for bad input)."""

    name: str
    help: str
    example: str  # one command line, shown under the command's --help
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


Section = tuple[str, Any]  # a world page's section: (title, HTML text or a plotly figure)


def shipped_notebooks() -> Path:
    """The folder of the notebooks the workbench ships (the checkout's ``notebooks/``, or
    the installed package's copy)."""
    from workbench.resources import shipped

    return shipped("notebooks")


class WorldKind:
    """The interface of a world kind; subclass it, set the class attributes and the four required hooks."""

    name: ClassVar[str]
    cell_spec: ClassVar[type[BaseModel]]  # a pydantic model of one cell (extra fields forbidden)
    # notebooks/<name>.ipynb that `workbench report` runs: by default the kind-free report.ipynb
    # (provenance, locks, summary, metric_tables, describe_world); None: the kind has no report
    report_notebook: ClassVar[str | None] = "report"
    rescoring: ClassVar[bool] = False  # metric_tables accepts parser_rule / answer_rule (re-scoring recorded replies)
    terminal_tables: ClassVar[tuple[str, ...] | None] = None  # the tables `workbench metrics` prints (None: all)
    # `--processes auto` starts another world process for every this many worlds of a study with no
    # real-model route: about as many of the kind's simulated worlds as starting a process costs
    worlds_per_process: ClassVar[int] = 200

    # -- required ------------------------------------------------------------------------
    def routes(self, cell: Any) -> set[str]:
        """Every model route a cell may call (agents, judges, recorders of peers)."""
        raise NotImplementedError

    def template_root(self, cell: Any, base_dir: Path) -> Path:
        """The folder of the cell's prompt templates."""
        raise NotImplementedError

    async def run_world(self, cell: Any, ctx: WorldContext) -> WorldOutcome:
        """Run one world to its end; a failed call ends it with ``world["failed"]`` set, never an exception."""
        raise NotImplementedError

    def world_metrics(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
        """A world's metrics, a pure function of its records."""
        raise NotImplementedError

    # -- optional, with kind-free defaults ------------------------------------------------
    def describe_cell(self, cell: Any) -> str:
        """A cell's short name for tables: its ``label``, else the fields it sets away from their defaults."""
        label = getattr(cell, "label", None)
        if label:
            return str(label)
        fields = cell.model_dump(mode="json", exclude_defaults=True)
        return " · ".join(f"{k}={v}" for k, v in fields.items()) or self.name

    def check_cell(self, cell: Any, worlds_per_cell: int) -> None:
        """Raise ValueError("FIELD: expected ...") for a cell the study cannot run (checked at load)."""

    def opening_messages(self, cell: Any, base_dir: Path, seed: int) -> dict[str, list[dict[str, str]]] | None:
        """Each role's first messages in the world of ``seed``, rendered as a world would send them
        (``workbench prompts`` diffs them between cells); None where the kind cannot say without
        running the world."""
        return None

    def impossible(self, cell: Any, metric: str) -> bool:
        """Whether the cell's design rules the metric out (a world with no store has no
        cross-agent read): a plan then takes its rate of 0 as exact, not as a small sample's 0."""
        return False

    def contrast_metrics(self) -> set[str] | None:
        """The boolean unit metrics a declared contrast may name (``metric:``), checked at load;
        None: not known before the records exist (checked when the contrast table is made)."""
        return None

    def rehearsal_problems(self, cell: Any, root: Path, profiles: dict[str, Any]) -> list[str]:
        """Why the cell's simulated agents could not act on its rendered prompts as they were
        fitted to (checked at load, once the template folder exists): a profile that reads its
        prompt by cue phrases must find them, un-negated, and read its task; a twin must see the
        texts it was calibrated on. The study refuses each, unless it declares
        ``rehearsal: uncalibrated`` (then they are recorded and every report states them)."""
        return []

    def check_inputs(self, cell: Any, base_dir: Path, worlds_per_cell: int) -> None:
        """Raise ValueError("FIELD: expected ...") for a file or folder the cell names that is missing,
        unreadable, outside the study's project or not what the cell needs (checked at load, so
        ``validate`` refuses it instead of every world failing)."""

    def design_files(self, cell: Any, base_dir: Path) -> list[Path]:
        """Inputs a preregistration lock hashes besides params and templates (scenario scripts, task data)."""
        return []

    def code_files(self) -> list[Path]:
        """The kind's code that a preregistration lock hashes: all of it, since scoring can live in any of
        its modules. By default the kind's package folder (a kind defined in one module: that file)."""
        module = sys.modules[type(self).__module__]
        path = Path(module.__file__ or "").resolve()
        return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]

    def unrendered_templates(self, cell: Any) -> set[str]:
        """Templates of the cell's folder (relative paths, ``persistence/none.txt``) that its worlds
        provably never render, left out of its design fingerprint so that editing one does not
        count as a change to this cell. By default none: every file of the folder counts (an
        edit anywhere in it is a change, which errs on the side of refusing)."""
        return set()

    def data_files(self) -> list[Path]:
        """The kind's own data that a world's result can depend on (twin profiles, domain tables):
        hashed into every cell's design fingerprint and its locks. By default every file beside
        the kind's code that is not Python (a kind defined in one module: none)."""
        module = sys.modules[type(self).__module__]
        path = Path(module.__file__ or "").resolve()
        if path.name != "__init__.py":
            return []
        skip = ("__pycache__", ".ipynb_checkpoints")
        return sorted(p for p in path.parent.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
                      and not any(s in p.parts for s in skip))

    def study_profile(self, name: str, body: dict[str, Any]) -> Any:
        """A simulated profile the study defines under ``profiles:``; KeyError or ValueError naming the
        field for a bad one. By default a kind has none to define."""
        raise InputError(f"the {self.name} world kind has no simulated profiles a study can define")

    def preflight(self, cell: Any) -> list[str]:
        """What the cell needs besides its models' keys (a sandbox, a tool), one line per missing thing."""
        return []

    def row_keeper(self, worlds: int) -> RowKeeper | None:
        """How the kind keeps per-world rows beside the records of a study of ``worlds``
        worlds as they are written, for analysis at scale (see
        :class:`workbench.records.RowKeeper`); none by default."""
        return None

    def calibration(self) -> list[dict[str, Any]]:
        """Each simulated twin's figures beside the references it was fitted to, one row
        each with a boolean ``within``; none by default (a kind without twins)."""
        return []

    def profile_text(self, name: str) -> str | None:
        """A simulated profile's parameters and cues as text, or None if the kind has no such profile."""
        return None

    def simulated_profiles(self) -> dict[str, str]:
        """The kind's simulated routes and what each does, for `workbench profiles`."""
        return {}

    def summary_text(self, worlds: list[dict[str, Any]]) -> str:
        """A plain-text table per cell for the terminal; by default, worlds and valid worlds per cell."""
        counts: dict[str, list[int]] = {}
        for w in worlds:
            c = counts.setdefault(str(w.get("cell_label") or w["cell_id"]), [0, 0])
            c[0] += 1
            c[1] += bool(w.get("valid"))
        width = max((len(k) for k in counts), default=4)
        lines = [f"{'cell':<{width}}  worlds  valid"]
        lines += [f"{k:<{width}}  {n:>6}  {v:>5}" for k, (n, v) in counts.items()]
        return "\n".join(lines)

    def summary_display(self, records: Any) -> Any:
        """What a study notebook shows after a run: by default :meth:`summary_text`, escaped."""
        from IPython.display import HTML

        from workbench.views.markup import render

        return HTML(str(render("pre.html", text=self.summary_text(records.worlds))))

    def metric_tables(self, records: Any, *, parser_rule: str | None = None, answer_rule: str | None = None,
                      holm: bool = False) -> dict[str, Any]:
        """The kind's per-cell tables by name (pandas DataFrames), for `workbench metrics`.
        The rules are given only to a kind with ``rescoring``."""
        return {}

    def export_metrics(self, records: Any, out: Path, *, parser_rule: str | None = None,
                       answer_rule: str | None = None, holm: bool = False) -> list[Path]:
        """Write the tables under ``out`` (CSV), exactly as ``metric_tables`` gives them (with
        ``holm``, the Holm column the terminal shows is in the files too); a kind may add
        per-world and per-agent frames."""
        from workbench.metrics.files import write_tables

        if self.rescoring:
            tables = self.metric_tables(records, parser_rule=parser_rule, answer_rule=answer_rule, holm=holm)
        else:
            tables = self.metric_tables(records, holm=holm)
        return list(write_tables(tables, out).values())

    def world_page(self, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
        """The sections of a world's page in ``workbench view`` (title, HTML or a plotly figure),
        drawn from its records; [] (the default): the kind-free page of replies and calls."""
        return []

    def commands(self) -> list[KindCommand]:
        """The kind's own subcommands, offered as ``workbench <kind name> <command>``; none by default."""
        return []

    def notebook_path(self, name: str) -> Path:
        """Where the notebook ``name`` (e.g. :attr:`report_notebook`) of this kind is: by default
        among the shipped notebooks; a kind defined elsewhere points at its own folder."""
        return shipped_notebooks() / f"{name}.ipynb"

    def describe_world(self, records: Any, world_id: str, out: TextIO, full: bool = False) -> None:
        """Print a recorded world step by step (`workbench replay --world`); by default each step's reply."""
        for s in records.steps.get(world_id, []):
            text = (s.get("reply") or {}).get("text") or ""
            out.write(f"[{s.get('seq')}] {s.get('agent')}: {text if full else text[:200]}\n")

    def contrast_units(self, records: Any) -> Any:
        """The units contrasts pair across cells (see :mod:`workbench.metrics.contrasts`); None: no contrasts."""
        return None

    def run_judges(self, records: Any, route: str, **options: Any) -> Any:
        """LLM judges over a run set (`workbench judge`)."""
        raise NotImplementedError(f"the {self.name} world kind has no judges")

    @property
    def has_judges(self) -> bool:
        return type(self).run_judges is not WorldKind.run_judges

    def __repr__(self) -> str:
        return f"<world kind {self.name}>"
