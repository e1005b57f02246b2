"""What every kind's explorer shares above the panel: the preflight a real-route Run
passes first (the one `workbench run` makes), and the way from a recorded world to
its page in `workbench view`.

A module of its own, not part of :mod:`workbench.views.panel`: views never import
model clients (the preflight reads the catalogue and the keys' presence) and the
viewer imports views (a link computed there would be a cycle)."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.routes import is_simulated_route
from workbench.views.panel import CellWorldPicker

VIEW_PORT = 8765  # the port the command below names, so the address is right whatever the default
ROOT = Path(__file__).resolve().parents[2]  # the project folder the shown commands run from


def preflight_problems(study: Any, specs: Iterable[Any], routes: Iterable[str]) -> list[str]:
    """What `workbench run` refuses before any call (:func:`workbench.cli.preflight`), for the
    cells an explorer is about to run: each real route's key and, when the study has a
    budget, its price; and what the kind needs besides models (a sandbox). One line per
    problem; [] when the run may start. Simulated and ``local/`` routes need no key."""
    routes = set(routes)
    problems: list[str] = []
    if any(not is_simulated_route(r) and not r.startswith("local/") for r in routes):
        from workbench.models.preflight import route_problems

        problems = route_problems(routes, budget_usd=study.budget_usd)
    problems += list(dict.fromkeys(p for spec in specs for p in study.kind.preflight(spec)))
    return problems


def shown_path(path: str | Path) -> str:
    """A path as the project's commands take it: relative to the project folder when inside it."""
    full = Path(path).resolve()
    try:
        return str(full.relative_to(ROOT))
    except ValueError:
        return str(full)


def viewer_jump(run_dir: str | Path, world_id: str, port: int = VIEW_PORT) -> tuple[str, str]:
    """(the command that serves ``run_dir`` in the viewer, the address of ``world_id``'s page
    there): the viewer's own URL scheme (the run set given first is ``r0``)."""
    import shlex

    from workbench.viewer.pages import world_href

    command = f".venv/bin/workbench view {shlex.quote(shown_path(run_dir))} --port {port}"
    return command, f"http://127.0.0.1:{port}/{world_href('r0', world_id)}"


class RecordedPicker(CellWorldPicker):
    """The recorded-world picker with the jump to `workbench view` for each world."""

    def _jump(self, world_id: str) -> tuple[str, str] | None:
        return viewer_jump(self.records.dir, world_id)


# -- the cell dropdown of an explorer that re-runs worlds -----------------------------------------
DERIVED = -1  # the cell dropdown's value while the settings are no cell of the study


def design_key(spec: Any) -> str:
    """A cell spec's settings, its label left out: two cells equal in this run the same worlds."""
    return json.dumps(spec.model_dump(mode="json", exclude={"label"}), sort_keys=True)


class StudyCellDropdown:
    """The cell dropdown of a re-running explorer, kept naming the cell the settings make:
    the study's own cell when they are one (its label, its worlds), else an entry for the
    changed cell under the label its worlds are recorded with. A dropdown left on the
    cell the settings came from would name a world that is not the one on show."""

    study: Any
    cell: Any  # the study's cell the settings start from
    controls: dict[str, Any]
    _quiet: bool

    def _as_cell(self, spec: Any) -> Any:
        """The study's cell with these settings (the chosen one first), else ``self.cell`` changed."""
        key = design_key(spec)
        same = [c for c in self.study.cells if design_key(c.spec) == key]
        if same:
            return self.cell if self.cell in same else same[0]
        return self.study.variant(self.cell, spec)

    def _cell_options(self, changed: Any = None, note: str = "") -> list[tuple[str, int]]:
        options = [(f"{c.index}: {c.label}", c.index) for c in self.study.cells]
        if changed is not None:
            options.append((f"{changed.label} (cell {self.cell.index} changed; not a cell of the study)", DERIVED))
        elif note:
            options.append((note, DERIVED))
        return options

    def _sync_cell(self, cell: Any, note: str = "(these settings make no cell)") -> None:
        """The dropdown set, quietly, to ``cell`` (None: the settings make none, ``note`` says so)."""
        ours = cell is not None and any(c is cell for c in self.study.cells)
        self._quiet = True
        try:
            if ours:
                self.cell = cell
                self.controls["cell"].options = self._cell_options()
                self.controls["cell"].value = cell.index
            else:
                self.controls["cell"].options = self._cell_options(cell, note)
                self.controls["cell"].value = DERIVED
        finally:
            self._quiet = False

    def _picked_study_cell(self) -> bool:
        """The dropdown's change is a study cell the user chose (not a quiet refill, not the changed entry)."""
        return not self._quiet and self.controls["cell"].value != DERIVED


    RUN_UNIT = "steps"  # what the run view counts (a kind's explorer names its own)

    def run_index(self) -> int:
        """The world index the controls show (each explorer reads its own controls)."""
        raise NotImplementedError

    def run_what(self, cell: Any, index: int) -> str:
        """The world the controls show, in words, for the run view's head."""
        raise NotImplementedError

    def rerun(self) -> None:
        """Run the world for the current settings and redraw every view, once the
        preflight of `workbench run` passes (it refuses, naming what is missing, before
        any call)."""
        from workbench.aio import run_sync
        from workbench.study import run_one_world

        try:
            cell, index, routes = self.current_cell(), self.run_index(), self.routes()  # type: ignore[attr-defined]
            problems = preflight_problems(self.study, [cell.spec], routes)
        except Exception as exc:  # noqa: BLE001 - a bad setting is shown, not raised into the widget loop
            self._fail("these settings do not make a cell", exc)  # type: ignore[attr-defined]
            return
        what = self.run_what(cell, index)
        if problems:
            self._refuse(what, problems)  # type: ignore[attr-defined]
            return
        source = (f"re-run now from {self.study.path.name}, world #{index}, "
                  f"routes: {', '.join(sorted(routes))}")
        self._run_and_show(what, lambda: run_sync(run_one_world(self.study, cell, index)),  # type: ignore[attr-defined]
                           source, self.RUN_UNIT)
