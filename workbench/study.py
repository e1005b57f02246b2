"""Running a study: every (cell, world index) not yet finished, with bounded
concurrency, a progress bar, and records appended as each world finishes.

World seeds depend on the base seed and the world index only, not on the cell,
so world i of every cell has the same tasks and role assignment: cells can be
compared pairwise over the same seeds (McNemar)."""
from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import forked
from workbench.design import cell_designs
from workbench.errors import InputError
from workbench.kinds.base import WorldContext
from workbench.models.budget import Budget, budget_from, is_budget_cut
from workbench.models.factory import make_client
from workbench.models.failures import INFRASTRUCTURE, annotate_failure, failure_class
from workbench.models.ledger import CALLS, CallLedger, close_lost, spent
from workbench.params import Cell, Study, monitor_prompt_path
from workbench.records import (  # noqa: F401  (ids live with the records)
    DAMAGE_CHECK_WORLDS,
    RunWriter,
    decode_items,
    decode_record,
    encode_world,
    environment_facts,
    incomplete_worlds,
    latest_worlds,
    now_iso,
    read_manifest,
    sha256_file,
    world_id,
    write_manifest,
)
from workbench.routes import is_simulated_route
from workbench.seeding import derive_seed

CHECKPOINTS = "checkpoints"  # per-world checkpoints a kind keeps in a run directory (kinds name their files)


def world_seed(base_seed: int, world_index: int) -> int:
    return derive_seed(base_seed, "world", world_index)


@dataclass
class RunSummary:
    out_dir: Path
    run: int
    planned: int
    skipped: int
    finished: int = 0
    failed: int = 0
    invalid: int = 0
    interrupted: bool = False
    cut: int = 0  # worlds whose calls the budget refused: recorded in cut.jsonl, run again on resume
    not_started: int = 0  # worlds left when the budget was reached
    budget: dict[str, Any] | None = None
    wall_s: float = 0.0
    repaired_bytes: dict[str, int] = field(default_factory=dict)
    retried: int = 0  # earlier infrastructure failures run again by this run
    kept: int = 0  # earlier infrastructure failures left as they are (--no-retry-failed)
    causes: dict[tuple[str, str], int] = field(default_factory=dict)  # (class, cause) -> worlds, this run
    probes: list[Any] = field(default_factory=list)  # ProbeResult per route when run with probe=True
    # the latest record of every world in the run directory (those found at the start and
    # those this run wrote), so a summary needs no second reading of what was just written;
    # empty when the run was asked not to keep them (keep_worlds=False)
    worlds: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    syncs: int = 0  # fsync calls the writer made this run

    @property
    def probe_failed(self) -> bool:
        """A probed route did not answer, so no world was started."""
        return any(not p.ok for p in self.probes)

    @property
    def infrastructure_failed(self) -> int:
        """Worlds this run leaves unfinished for reasons that are not the model's: failed
        calls of the infrastructure class, budget cuts, worlds the budget kept from starting,
        and earlier infrastructure failures kept by --no-retry-failed."""
        return (sum(n for (cls, _), n in self.causes.items() if cls == INFRASTRUCTURE) + self.cut
                + self.not_started + self.kept)

    def line(self) -> str:
        probes = "".join(p.line() + "\n" for p in self.probes)
        if self.probe_failed:
            return probes + f"run {self.run} stopped before any world: a probed route did not answer; records in {self.out_dir}"
        state = "interrupted" if self.interrupted else "complete"
        line = probes + (f"run {self.run} {state}: {self.finished} worlds finished this run, {self.skipped} already done, "
                f"{self.failed} failed, {self.invalid} invalid; records in {self.out_dir}")
        if self.retried:
            line += f"\n{self.retried} worlds were infrastructure failures of an earlier run and were run again"
        for cls in (INFRASTRUCTURE, "model"):
            causes = {cause: n for (c, cause), n in sorted(self.causes.items()) if c == cls}
            if causes:
                what = ", ".join(f"{cause} {n}" for cause, n in causes.items())
                line += f"\nfailed ({cls}): {sum(causes.values())} worlds: {what}"
                if cls == INFRASTRUCTURE:
                    line += "; run the same command again to retry them"
        if self.kept:
            line += f"\n{self.kept} earlier infrastructure failures kept as recorded (--no-retry-failed)"
        if self.budget is not None and (self.cut or self.not_started):
            line += (f"\nbudget of {self.budget['limit_usd']} USD reached: {self.cut} worlds cut, "
                     f"{self.not_started} not started; run again (with a larger budget_usd) to resume")
        return line


def _real_options(study: Study, budget: Budget | None) -> dict[str, Any]:
    """Options every real-model client of a study shares (simulated ones ignore them)."""
    options: dict[str, Any] = {}
    if budget is not None:
        options["budget"] = budget
    if study.cache_dir is not None:
        options["cache_dir"] = study.cache_dir
    return options


def _is_real(route: str) -> bool:
    return not is_simulated_route(route)


def client_factory_for(study: Study, recorded: dict[str, list[dict[str, Any]]] | None = None,
                       budget: Budget | None = None, ledger: CallLedger | None = None,
                       tags: dict[str, Any] | None = None):  # noqa: ANN201
    """The kinds' client factory. Real-model clients share the study's budget and cache,
    and write every call to the run's ledger tagged with ``tags`` and the agent's slot."""
    shared = _real_options(study, budget)

    def factory(route: str, slot: str, seed: int, options: dict[str, Any]):  # noqa: ANN202
        extra = dict(shared) if _is_real(route) else {}
        if _is_real(route) and ledger is not None:
            extra["ledger"] = ledger.bind(**(tags or {}), slot=slot)
        return make_client(route, seed=seed, profiles=study.profiles, recorded=(recorded or {}).get(slot),
                           **options, **extra)
    return factory


def monitor_for(study: Study, seed: int, budget: Budget | None = None, ledger: CallLedger | None = None,
                tags: dict[str, Any] | None = None):  # noqa: ANN201
    if study.monitor is None:
        return None
    from workbench.models.monitor import make_monitor

    opts = _real_options(study, budget) if _is_real(study.monitor.model) else {}
    if _is_real(study.monitor.model) and ledger is not None:
        opts["ledger"] = ledger.bind(**(tags or {}), slot="monitor")
    return make_monitor(study.monitor.model, template=monitor_prompt_path(study.path, study.monitor).read_text(
        encoding="utf-8"), labels=study.monitor.labels, seed=seed, params=dict(study.monitor.params), **opts)


def monitor_facts(study: Study) -> dict[str, Any] | None:
    """What a world's monitor labels mean: model, prompt (path and hash), labels and the
    label the report counts; in every world record and the manifest, so a metric reads it."""
    if study.monitor is None:
        return None
    prompt = monitor_prompt_path(study.path, study.monitor)
    return {"model": study.monitor.model, "params": dict(study.monitor.params), "prompt": str(prompt),
            "prompt_sha256": sha256_file(prompt), "labels": list(study.monitor.labels), "flag": study.monitor.flag}


async def run_one_world(study: Study, cell: Cell, world_index: int, run: int = 1,
                        recorded: dict[str, list[dict[str, Any]]] | None = None,
                        budget: Budget | None = None, ledger: CallLedger | None = None,
                        checkpoint_dir: Path | None = None, design: str | None = None):  # noqa: ANN201
    """Build and run one world of a cell; returns the kind's WorldOutcome with metrics
    attached and its failure, if any, classed (see :mod:`workbench.models.failures`).
    ``checkpoint_dir`` is handed to the kind (a kind may checkpoint a world there).
    ``design`` is the cell's design fingerprint the world is stamped with (computed
    here when not given: see :mod:`workbench.design`)."""
    kind = study.kind
    seed = world_seed(study.seed, world_index)
    wid = world_id(cell.cell_id, world_index)
    tags = {"world_id": wid, "run": run}
    extra = ({"monitor": monitor_for(study, derive_seed(seed, "monitor"), budget, ledger, tags)}
             if study.monitor else {})
    ctx = WorldContext(world_id=wid, cell_id=cell.cell_id, world_index=world_index, seed=seed, run=run,
                       base_dir=study.base_dir, client_factory=client_factory_for(study, recorded, budget, ledger, tags),
                       monitor=extra.get("monitor"), checkpoint_dir=checkpoint_dir)
    outcome = await kind.run_world(cell.spec, ctx)
    annotate_failure(outcome.world)
    if study.monitor is not None:
        outcome.world["monitor"] = monitor_facts(study)
    outcome.world["world_index"] = world_index
    outcome.world["design"] = design or cell_designs(study, [cell])[cell.cell_id].fingerprint
    outcome.world["cell_label"] = cell.label
    outcome.world["study"] = study.name
    outcome.world["metrics"] = kind.world_metrics(outcome.world, outcome.steps)
    return outcome


def processes_for(study: Study, worlds: int, asked: int | str = "auto") -> int:
    """How many world processes a run of ``worlds`` worlds uses (1: this process only).

    Only a study with no real-model route (agents and monitor) runs in several: real
    calls share a budget, rate limits and the call ledger, which live in one process.
    "auto" takes one process per usable core, at most one per the kind's
    ``worlds_per_process`` worlds (200 shared-store worlds: starting a process costs about
    as much as a few dozen of them; one collusion world); a number asks for that many,
    never more than there are worlds."""
    from workbench.probe import probe_routes_of

    if asked == "auto":
        want = min(forked.usable_cpus(), worlds // max(1, study.kind.worlds_per_process))
    elif isinstance(asked, int) and not isinstance(asked, bool) and asked >= 1:
        want = min(asked, worlds)
    else:
        raise InputError(f"processes: expected a whole number >= 1 or 'auto', got {asked!r}")
    if want <= 1 or probe_routes_of(study) or not forked.can_fork():
        return 1
    return want


RECORD_GC_THRESHOLD = 10_000  # allocations between young-generation collections while worlds run


def _collector_for_worlds() -> Callable[[], None]:
    """Set the cyclic garbage collector up for a run; returns what undoes it.

    What exists when the worlds start (modules, the study, earlier records) outlives
    them, so it is frozen: no collection walks it again. And a world allocates many
    containers that are freed by reference counting (its step and world records are
    trees of dicts and lists), so young collections are spaced RECORD_GC_THRESHOLD
    allocations apart instead of the default 700: most of them found nothing to
    collect. Cycles are still collected, less often."""
    was_frozen = gc.get_freeze_count() > 0
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], RECORD_GC_THRESHOLD), *threshold[1:])

    def restore() -> None:
        gc.set_threshold(*threshold)
        if not was_frozen:  # a caller's own freeze is left as it was
            gc.unfreeze()
    return restore


def _manifest_for(study: Study, existing: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest a run appends its entry to. Append-only: the fields written by the
    first run stay as it wrote them (what each later run used is in its own entry,
    :func:`_run_inputs`); a cell a later run adds is added, never one rewritten."""
    if existing:
        manifest = existing
        for c in study.cells:
            manifest["cells"].setdefault(c.cell_id, _cell_entry(c))
        return manifest
    inputs = _run_inputs(study)
    return {"study": study.name, "world_kind": study.world, "created": now_iso(), "runs": [],
            "cells": {c.cell_id: _cell_entry(c) for c in study.cells},
            "params": inputs["params"], "templates": inputs["templates"], "description": study.description,
            "contrasts": study.contrasts,  # what the analysis compares (matched cells only)
            "estimability": study.estimability,  # when a contrast is called estimable ({}: the default rule)
            "seed": study.seed, "monitor": monitor_facts(study), "worlds_per_cell": study.worlds_per_cell,
            "profiles": inputs["profiles"], "rehearsal": inputs["rehearsal"]}


def _cell_entry(c: Cell) -> dict[str, Any]:
    return {"label": c.label, "spec": c.spec.model_dump(mode="json"), **({"worlds": c.worlds} if c.worlds else {})}


def _run_inputs(study: Study) -> dict[str, Any]:
    """What one run used, for its own manifest entry: the params file, the templates' hashes,
    the seed and the study's own profiles (their contents: in the run directory's design store)."""
    from workbench.templates import template_set

    roots = sorted({study.kind.template_root(c.spec, study.base_dir) for c in study.cells})
    return {"params": {"path": str(study.path), "sha256": sha256_file(study.path)},
            "templates": {str(r): template_set(r).hashes() for r in roots}, "seed": study.seed,
            # profiles the study defines (cues for reworded templates among them): what its simulated agents were
            "profiles": {name: p.model_dump(mode="json") if hasattr(p, "model_dump") else repr(p)
                         for name, p in sorted(study.profiles.items())},
            "monitor": monitor_facts(study),
            # calibrated, or uncalibrated with what its simulated agents cannot read as fitted (per cell)
            "rehearsal": {"status": study.rehearsal, "problems": study.uncalibrated}}


class DesignChanged(InputError):
    """A rerun into a run directory whose recorded worlds ran under other inputs."""


def recorded_fingerprints(recorded: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each cell's fingerprint as its latest recorded world has it (cells of worlds from
    before fingerprints, which carry none, are left out: nothing to compare them with)."""
    latest: dict[str, tuple[int, str]] = {}
    for w in recorded.values():
        fp = w.get("design")
        if fp and (w["cell_id"] not in latest or int(w.get("run") or 0) >= latest[w["cell_id"]][0]):
            latest[w["cell_id"]] = (int(w.get("run") or 0), fp)
    return {cell: fp for cell, (_, fp) in latest.items()}


def design_check(out: Path, cells: list[Cell], designs: dict[str, Any],
                 recorded: dict[str, dict[str, Any]]) -> list[str]:
    """What changed, one line per changed input of each cell whose recorded worlds ran
    under another design than the one this run would use; [] when none did."""
    from workbench.design import by_change, design_changes, recorded_content, recorded_design

    before = recorded_fingerprints(recorded)
    per_cell: dict[str, list[str]] = {}
    for c in cells:
        old = before.get(c.cell_id)
        new = designs[c.cell_id]
        if old is None or old == new.fingerprint:
            continue
        per_cell[f"{c.label or c.cell_id} ({c.cell_id})"] = (
            design_changes(recorded_design(out, old), new, lambda digest: recorded_content(out, digest))
            or [f"design {old[:12]} -> {new.fingerprint[:12]}"])
    return by_change(per_cell, sum(1 for c in cells if c.cell_id in before))


def _refusal(out: Path, lines: list[str]) -> str:
    shown = "; ".join(lines[:12]) + (f"; and {len(lines) - 12} more" if len(lines) > 12 else "")
    return (f"{out} holds worlds run under other inputs than this study now has ({shown}). Nothing was run. "
            f"Run into another --out, or pass --accept-changes \"why\" to record a deviation and run the remaining "
            f"worlds under the new inputs (analysis keeps the two designs of a cell apart)")


async def run_study_async(study: Study, out_dir: str | Path, *, cell_ids: Iterable[str] | None = None,
                          concurrency: int | None = None, progress: bool = True,
                          max_worlds: int | None = None, lock: dict[str, Any] | None = None,
                          retry_failed: bool = True, probe: bool = False, keep_worlds: bool = True,
                          processes: int | str = 1, accept_changes: str | None = None,
                          executor: str = "local", ray_address: str | None = None) -> RunSummary:
    """Run every world of the study not yet finished. A world recorded as an
    infrastructure failure is not finished: it runs again (same seed) unless
    ``retry_failed`` is False. Model failures are outcomes and stay as recorded.
    With ``probe``, each real-model route first gets one minimal request (recorded
    in the ledger and the manifest, charged to the budget); if one fails, no world
    starts. With ``keep_worlds`` False the summary holds no world records (its
    ``worlds`` stays empty): a caller that prints no per-cell summary need not keep
    every world of the run in memory. ``processes`` (a number, or "auto") runs the
    worlds in that many forked world processes where the study allows it (see
    :func:`processes_for`); the manifest's run entry records how many ran.

    Every input of a cell is hashed into its design fingerprint (:mod:`workbench.design`),
    stamped on each world. Where worlds already recorded in ``out_dir`` ran under another
    fingerprint, nothing runs (:class:`DesignChanged` names each changed input) unless
    ``accept_changes`` gives the reason, which the run's entry records as a deviation.

    ``executor="ray"`` runs the worlds as Ray tasks on the cluster at ``ray_address`` (a
    local Ray runtime when None; see :mod:`workbench.ray_executor`): this process stays
    the only writer, and the run's entry records the executor and the cluster's nodes."""
    out = Path(out_dir)
    cells = [study.cell(c) for c in cell_ids] if cell_ids else study.cells
    keeper = study.kind.row_keeper(sum(study.worlds_for(c) for c in cells))
    writer = RunWriter(out, rows=keeper)
    existing = read_manifest(out)
    if existing and existing.get("study") not in (None, study.name):
        raise InputError(f"{out} holds records of study {existing.get('study')!r}, not {study.name!r}; "
                         "use another --out directory")
    recorded = latest_worlds(out)
    # a world whose steps are not all readable (a torn or corrupt line) is not finished: it runs again
    damaged: dict[str, tuple[int, int]] = {}
    if recorded and (len(recorded) <= DAMAGE_CHECK_WORLDS or any(writer.repaired.values())):
        damaged = incomplete_worlds(out, recorded)
        for wid in damaged:
            recorded.pop(wid, None)
        if damaged:
            print(f"warning: {len(damaged)} recorded world(s) in {out} miss steps (torn or corrupt lines); they run "
                  f"again: " + ", ".join(f"{w} ({g} of {n})" for w, (g, n) in list(damaged.items())[:5]), file=sys.stderr)
    failed_infra = {wid for wid, w in recorded.items() if failure_class(w) == INFRASTRUCTURE}
    done = {wid: w for wid, w in recorded.items() if wid not in failed_infra or not retry_failed}
    ids = {world_id(c.cell_id, i) for c in cells for i in range(study.worlds_for(c))}
    todo = [(c, i) for c in cells for i in range(study.worlds_for(c)) if world_id(c.cell_id, i) not in done]
    if max_worlds is not None:
        todo = todo[:max_worlds]
    from workbench.design import store_designs

    designs = cell_designs(study, cells)
    fingerprints = {cid: d.fingerprint for cid, d in designs.items()}
    changed = design_check(out, cells, designs, recorded)
    if changed and not (accept_changes or "").strip():
        raise DesignChanged(_refusal(out, changed))
    manifest = _manifest_for(study, existing)
    store_designs(out, designs)
    cluster = None
    if executor != "local":
        from workbench import ray_executor

        ray_executor.check_executor(executor)
        cluster = ray_executor.connect(ray_address, forked.usable_cpus())
    run = len(manifest["runs"]) + 1
    entry = {"run": run, "started": now_iso(), "finished": None, "params_sha256": sha256_file(study.path),
             "cells": [c.cell_id for c in cells], "planned": len(todo), "skipped": len(done),
             "environment": environment_facts(), "argv": sys.argv[1:], "lock": lock,
             "retry_failed": retry_failed,
             "damaged_rerun": {wid: {"steps_readable": g, "steps_recorded": n} for wid, (g, n) in list(damaged.items())[:1000]},
             # each earlier attempt a world had: what ended it, so the manifest holds every attempt
             "retried": [{"world_id": wid, "run": recorded[wid].get("run"), **_failure_facts(recorded[wid])}
                         for wid in sorted(failed_infra & ids) if wid not in done][:10_000],
             "unsafe_code_tasks": os.environ.get("WORKBENCH_UNSAFE_CODE_TASKS") == "1",
             "processes": 1 if cluster is not None else processes_for(study, len(todo), processes),
             # what this run used (append-only: an earlier run's entry is never rewritten)
             **_run_inputs(study), "designs": fingerprints,
             "deviation": {"reason": accept_changes, "changes": changed} if changed else None}
    # where the worlds ran: this machine (forked world processes or this process) or a Ray cluster's nodes
    entry["executor"] = cluster.facts() if cluster is not None else {
        "name": "forked" if entry["processes"] > 1 else "single-process"}
    manifest["runs"].append(entry)
    write_manifest(out, manifest)

    summary = RunSummary(out, run, len(todo), sum(1 for wid in ids if wid in done),
                         repaired_bytes={k: v for k, v in writer.repaired.items() if v},
                         retried=len(entry["retried"]), kept=0 if retry_failed else len(failed_infra & ids),
                         worlds=recorded if keep_worlds else {})
    ledger = CallLedger(out / CALLS)
    bar = None
    if progress:
        from tqdm.auto import tqdm  # a widget in a notebook, a bar on a terminal

        bar = tqdm(total=len(todo), desc=study.name, unit="world", file=sys.stderr, dynamic_ncols=True)
    started = time.perf_counter()
    queue = iter(todo)
    budget = budget_from(study.budget_usd)
    # calls a crash cut off in an earlier invocation: closed as lost, their worst case charged
    lost = close_lost(ledger, out, run)
    entry["lost_calls"] = len(lost)
    if budget is not None:  # one budget per study: what earlier invocations spent counts
        before = spent(out)
        budget.carry(before)
        entry["budget_before_usd"] = round(before, 8)
        if progress or before:
            print(f"budget: {before:.6f} of {budget.limit_usd:.6f} USD spent by earlier runs of this study; "
                  f"{budget.remaining:.6f} left", file=sys.stderr)
    coordinator = None
    if cluster is not None and _has_real_route(study):
        # budget and ledger stay global: one actor on this node that every worker's client asks
        from workbench import ray_executor

        coordinator = ray_executor.coordinator(cluster, budget, str(ledger.path))
        if budget is not None:
            budget = ray_executor.RemoteBudget(coordinator, budget.limit_usd)
    summary.budget = budget.snapshot() if budget else None

    def account(valid: bool, failed: dict[str, Any]) -> None:
        """Count a world just handed to the writer in the summary."""
        summary.finished += 1
        if failed:
            key = (failed["class"], failed["cause"])
            summary.causes[key] = summary.causes.get(key, 0) + 1
            summary.failed += 1
        summary.invalid += not valid
        if bar is not None:
            bar.update(1)

    async def worker() -> None:
        for cell, i in queue:
            if budget is not None and budget.exhausted:
                summary.not_started += 1
                continue
            outcome = await run_one_world(study, cell, i, run, budget=budget, ledger=ledger,
                                          checkpoint_dir=out / CHECKPOINTS, design=fingerprints[cell.cell_id])
            failed = outcome.world.get("failed") or {}
            if is_budget_cut(failed.get("error")):
                writer.append_cut(outcome.world)  # not a finished world: resume runs it again
                summary.cut += 1
                continue
            writer.append_world(outcome.world, outcome.steps)
            if keep_worlds:
                summary.worlds[outcome.world["world_id"]] = outcome.world
            account(outcome.world["valid"], failed)

    rows_pending: list[tuple[bytes, bytes]] = []  # in a world process: worlds sent whose rows are not yet made

    def rows_of_pending() -> bytes | None:
        """In a world process: the kept rows of the worlds sent since the last call
        (made here, on this process's core; the parent only writes them)."""
        if keeper is None or not rows_pending:
            return None
        lines = rows_pending[:]
        rows_pending.clear()
        try:
            return keeper.pack(decode_items(lines))
        except Exception as exc:  # noqa: BLE001 - the worlds are recorded; analysis computes these rows
            print(f"warning: a world process could not keep per-world rows ({type(exc).__name__}: {exc}); "
                  "analysis computes them from the records instead", file=sys.stderr)
            return None

    async def play_forked(item: tuple[Cell, int]) -> bytes:
        """In a world process: one world, encoded for the parent's writer (no budget and
        no ledger: only studies without a real-model route run in world processes),
        with the kept rows of the last ``writer.rows_batch`` worlds when that many are sent."""
        outcome = await run_one_world(study, item[0], item[1], run, checkpoint_dir=out / CHECKPOINTS,
                                      design=fingerprints[item[0].cell_id])
        world = outcome.world
        failed = world.get("failed") or {}
        world_line, step_lines = encode_world(world, outcome.steps)
        if keeper is not None:
            rows_pending.append((world_line, step_lines))
        rows = rows_of_pending() if len(rows_pending) >= writer.rows_batch else None
        return forked.encode(world["world_id"], bool(world["valid"]),
                             {k: failed[k] for k in ("class", "cause") if k in failed}, world_line, step_lines, rows)

    def rows_left() -> bytes | None:
        rows = rows_of_pending()
        return None if rows is None else forked.encode(None, None, None, None, None, rows)

    def forked_result(msg: bytes) -> None:
        wid, valid, failed, world_line, step_lines, rows = forked.decode(msg)
        if world_line is not None:
            writer.append_lines(world_line, step_lines, rows=False)
        if rows is not None:
            writer.append_rows(rows)
        if world_line is None:
            return
        if keep_worlds:
            summary.worlds[wid] = decode_record(world_line)
        account(valid, failed)

    recorded_now: set[str] = set()  # world ids this run wrote: a world comes back from the cluster once

    def ray_result(key: tuple[str, int], msg: bytes) -> bool:
        """A world a Ray worker finished: recorded by this process, once (False: a duplicate)."""
        wid, valid, failed, world_line, step_lines, cut = forked.decode(msg)
        if wid in recorded_now:
            return False
        recorded_now.add(wid)
        if cut:
            writer.append_cut(decode_record(world_line))  # not a finished world: resume runs it again
            summary.cut += 1
            return True
        writer.append_lines(world_line, step_lines)
        if keep_worlds:
            summary.worlds[wid] = decode_record(world_line)
        account(valid, failed)
        return True

    restore_collector = _collector_for_worlds()
    try:
        if probe:
            from workbench.probe import probe_routes, probe_routes_of

            summary.probes = await probe_routes(probe_routes_of(study), budget=budget, ledger=ledger, run=run)
            entry["probes"] = [p.to_record() for p in summary.probes]
            if summary.probe_failed:
                queue = iter(())  # no world starts on a route that cannot answer
        n = max(1, min(concurrency or study.concurrency, len(todo) or 1))
        if cluster is not None and not summary.probe_failed:
            from workbench import ray_executor

            plays = RayWorlds(study, run, out, fingerprints, budget,
                              None if coordinator is None else ray_executor.RemoteLedger(coordinator), coordinator)
            per_share = 1 if coordinator is not None or study.kind.worlds_per_process <= 1 else 0
            facts = await ray_executor.run_ray(
                [(c.cell_id, i) for c, i in todo], plays, cluster=cluster, concurrency=n, on_result=ray_result,
                may_start=None if budget is None else (lambda: not budget.exhausted), per_share=per_share)
            summary.not_started += facts.not_started
            entry["executor"].update(facts.to_record())
        elif entry["processes"] > 1 and not summary.probe_failed:
            await forked.run_forked([todo[k::entry["processes"]] for k in range(entry["processes"])], play_forked,
                                    concurrency=n, on_result=forked_result, finish=rows_left)
        else:
            await asyncio.gather(*(worker() for _ in range(n)))
    except (asyncio.CancelledError, KeyboardInterrupt):
        summary.interrupted = True
        raise
    finally:
        close_error: Exception | None = None
        try:
            writer.close()  # finished worlds still pending are written and synced, also on Ctrl-C
        except Exception as exc:  # noqa: BLE001 - raised once the rest is closed and the manifest written
            close_error = exc
        summary.syncs = writer.syncs
        if bar is not None:
            bar.close()
        if "workbench.models.litellm_client" in sys.modules:
            from workbench.models.litellm_client import aclose_clients, drain_detached

            # requests of calls cancelled when their world ended finish and record themselves;
            # after Ctrl-C they get a moment, then are recorded as cancelled mid-request
            await drain_detached(2.0 if summary.interrupted else 300.0)
            await aclose_clients()
        if "workbench.local.server" in sys.modules:
            from workbench.local.server import served, stop_all

            if servers := served():
                entry["local_servers"] = servers  # settings, llama.cpp build and CPU of each
            stop_all()  # the study's local model servers end with it (also on error or Ctrl-C)
        ledger.close()
        if cluster is not None:
            from workbench import ray_executor

            summary.budget = budget.snapshot() if budget else None  # a remote budget: read before the actor ends
            if coordinator is not None:
                ledger.lines += ray_executor.ray_module().get(coordinator.lines.remote())
                ray_executor.ray_module().get(coordinator.close.remote())
            ray_executor.disconnect(cluster)
        else:
            summary.budget = budget.snapshot() if budget else None
        restore_collector()
        summary.wall_s = time.perf_counter() - started
        entry.update(finished=now_iso(), finished_worlds=summary.finished, interrupted=summary.interrupted,
                     wall_s=round(summary.wall_s, 3), budget=summary.budget, cut_worlds=summary.cut,
                     not_started_for_budget=summary.not_started,
                     failures=[{"class": c, "cause": k, "worlds": n} for (c, k), n in sorted(summary.causes.items())],
                     ledger_calls=ledger.lines, record_syncs=summary.syncs)
        write_manifest(out, manifest)
        if close_error is not None:
            raise close_error
    return summary


def _has_real_route(study: Study) -> bool:
    from workbench.probe import probe_routes_of

    return bool(probe_routes_of(study))


@dataclass
class RayWorlds:
    """What a Ray worker runs: one world of the study by (cell id, world index), encoded for
    the driver's writer, stamped with the node that ran it (``ran_on``: comparisons ignore it).
    Sent to the cluster once (pickled); ``budget`` and ``ledger`` are the coordinator actor's
    proxies when the study has a real-model route, so every call asks the one budget first."""

    study: Study
    run: int
    out: Path
    fingerprints: dict[str, str]
    budget: Budget | None = None
    ledger: CallLedger | None = None
    coordinator: Any = None  # the actor holding budget, ledger and rate-limit windows (real routes)
    _cells: dict[str, Cell] = field(default_factory=dict, repr=False)

    async def __call__(self, key: tuple[str, int]) -> bytes:
        from workbench import ray_executor
        from workbench.ray_executor import node_facts

        if not self._cells:
            self._cells.update({c.cell_id: c for c in self.study.cells})
            if self.coordinator is not None:  # once per worker process: rpm and tpm windows are the actor's
                ray_executor.install_global_limits(self.coordinator)
        cell, i = self._cells[key[0]], key[1]
        outcome = await run_one_world(self.study, cell, i, self.run, budget=self.budget, ledger=self.ledger,
                                      checkpoint_dir=self.out / CHECKPOINTS, design=self.fingerprints[cell.cell_id])
        world = outcome.world
        world["ran_on"] = node_facts()
        failed = world.get("failed") or {}
        world_line, step_lines = encode_world(world, outcome.steps)
        return forked.encode(world["world_id"], bool(world["valid"]),
                             {k: failed[k] for k in ("class", "cause") if k in failed}, world_line, step_lines,
                             is_budget_cut(failed.get("error")))


def _failure_facts(world: dict[str, Any]) -> dict[str, Any]:
    failed = annotate_failure(dict(world, failed=dict(world.get("failed") or {})))["failed"]
    return {"class": failed.get("class"), "cause": failed.get("cause"), "error": str(failed.get("error"))[:300]}


def infrastructure_failures(out_dir: str | Path) -> dict[str, int]:
    """Worlds of a run directory that are unfinished for reasons not the model's, by
    cause: the latest record of each world that failed for the infrastructure, plus
    the worlds the last run's budget cut or kept from starting."""
    counts: dict[str, int] = {}
    for w in latest_worlds(Path(out_dir)).values():
        if failure_class(w) == INFRASTRUCTURE:
            cause = _failure_facts(w)["cause"]
            counts[cause] = counts.get(cause, 0) + 1
    last = ((read_manifest(Path(out_dir)) or {}).get("runs") or [{}])[-1]
    budget = int(last.get("cut_worlds") or 0) + int(last.get("not_started_for_budget") or 0)
    if budget:
        counts["budget"] = counts.get("budget", 0) + budget
    return counts


def run_study(study: Study, out_dir: str | Path, **kwargs: Any) -> RunSummary:
    from workbench.aio import run_sync

    return run_sync(run_study_async(study, out_dir, **kwargs))
