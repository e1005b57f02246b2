"""The command line: what notebooks do in batch, so that studies also run
without Jupyter. Errors in input are printed as one line and exit with 2.

Options every command takes (before or after the command's name):

- ``--version``: the installed package's version (importlib.metadata), exit 0.
- ``-q``/``--quiet``: no progress bars, no notes, no per-cell table after
  ``run``; a command's result lines (what was written where, listings, metric
  tables), warnings and errors still print.
- ``-v``/``--verbose``: the ``workbench`` logger at INFO (``-vv``: DEBUG, and
  papermill's own log at INFO), on stderr: each batch cell as it ends, each
  notebook executed with everything its kernel process wrote, each judgment,
  each model part joined.
- ``--progress``: progress bars even when stderr is not a terminal.

Progress bars (tqdm, which papermill already brings; never hand-drawn) go to
stderr only, so stdout stays what scripts parse. By default they are shown
only when stderr is a terminal: a bar redrawn with carriage returns makes a
log file or a CI transcript unreadable, and a test capturing stderr would see
it. ``run`` (worlds), ``report`` (papermill's own bar, one tick per notebook
cell), ``batch`` (cells, then the report's bar), ``judge`` (judgments) and
``models fetch`` (bytes: pip's download bars, then the join) show one."""
from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from pathlib import Path
from typing import Any

from workbench.errors import InputError, WorkbenchError
from workbench.kinds import kind_of_records
from workbench.params import ParamsError, load_study
from workbench.routes import all_worlds_simulated, is_simulated_route

log = logging.getLogger("workbench")
DIST = "stigmergy-workbench"


def package_version() -> str:
    """The installed distribution's version (importlib.metadata), the one ``--version`` prints."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DIST)
    except PackageNotFoundError:
        return "unknown (not installed; pip install -e .)"


class VersionAction(argparse.Action):
    """``--version``: print ``stigmergy-workbench X.Y.Z`` on stdout and exit 0 (looked up
    only when asked, so other commands do not pay for the metadata lookup)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the package version and exit", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{DIST} {package_version()}")
        parser.exit(0)


def show_progress(args: argparse.Namespace) -> bool:
    """Whether this command draws progress bars (on stderr): never with ``-q``; always
    with ``--progress``; otherwise only when stderr is a terminal (see the module docstring)."""
    if getattr(args, "quiet", False):
        return False
    if getattr(args, "progress", False):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def inform(args: argparse.Namespace, message: str) -> None:
    """An informational line on stderr; ``-q`` silences it (never use this for errors or warnings)."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (main() may run
    many times in one process, each with its own stderr, e.g. under pytest)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(verbose: int, quiet: bool) -> None:
    """The ``workbench`` logger on stderr: WARNING by default, INFO with ``-v``, DEBUG
    with ``-vv`` (which also shows papermill's INFO log), ERROR with ``-q`` (papermill's
    warnings too, such as a parameter a notebook does not declare)."""
    if quiet:
        level = logging.ERROR
    else:
        level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(level)
    if quiet:
        logging.getLogger("papermill").setLevel(logging.ERROR)
    elif verbose >= 2:
        logging.getLogger("papermill").setLevel(logging.INFO)


class JudgeProgress:
    """A judgments bar for ``workbench judge`` (its total is known only once the judges
    know what is not yet cached, so the bar starts at the first report); at DEBUG each
    judgment is also logged."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def update(self, done: int, total: int) -> None:
        log.debug("judgment %d of %d done", done, total)
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="judgment", desc="judge", file=sys.stderr, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> JudgeProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def lock_dir_for(params: str, given: str | None) -> str:
    """Where a study's locks are: ``--locks`` when given, else found from the study file
    (never from the shell's directory): the nearest folder above it that holds
    ``locks/``, else ``locks/`` at the git root of the study file's folder."""
    if given:
        return given
    here = Path(params).resolve().parent
    for folder in (here, *here.parents):
        if (folder / "locks").is_dir():
            return str(folder / "locks")
        if (folder / ".git").exists():
            return str(folder / "locks")
    return str(here / "locks")


def lock_gate(params: str, lock_dir: str | None, deviation: str | None) -> tuple[dict | None, int]:
    """Verify a locked study before it runs: (what the manifest records, exit code).
    A mismatch refuses the run unless a deviation with its reason is given, which
    is then added to the lock chain."""
    from workbench.locks import LockError, check_study, record_deviation

    lock_dir = lock_dir_for(params, lock_dir)

    state = check_study(params, lock_dir)
    if state is None:
        if deviation:
            print(f"note: {params} is not locked in {lock_dir}; --deviation ignored", file=sys.stderr)
        return None, 0
    if state["chain_problems"]:
        for p in state["chain_problems"]:
            print(f"lock chain broken: {p}", file=sys.stderr)
        print(f"refused: the lock chain in {lock_dir} is broken", file=sys.stderr)
        return None, 2
    state["lock_dir"] = str(Path(lock_dir).resolve())
    if not state["changes"]:
        return {**state, "matched": True, "deviation": None}, 0
    if not deviation:
        print(f"refused: {params} no longer matches lock {state['lock']}:", file=sys.stderr)
        for c in state["changes"]:
            print(f"  {c}", file=sys.stderr)
        print('run again with --deviation "why" to record a deviation and run anyway', file=sys.stderr)
        return None, 2
    try:
        path = record_deviation(params, deviation, state["changes"], lock_dir)
    except LockError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 2
    print(f"deviation recorded as {path}", file=sys.stderr)
    after = check_study(params, lock_dir) or {}
    return {**after, "lock_dir": state["lock_dir"], "matched": False, "deviation": deviation, "deviation_lock": path.stem,
            "changes_at_run": state["changes"], "locked_as": state["lock"]}, 0


def warn_damage(records: Any) -> list[str]:
    """Say on stderr what is wrong with a run set's records (torn or corrupt lines, worlds
    missing steps): a damaged record is never left out in silence. Returns the lines."""
    from workbench.records import damage

    found = damage(records)
    if found:
        print(f"warning: {records.dir}: {len(found)} damaged record(s); what they hold is left out of every table "
              "(`workbench run` again reruns a world whose steps are damaged):", file=sys.stderr)
        for line in found[:10]:
            print(f"  {line}", file=sys.stderr)
        if len(found) > 10:
            print(f"  ... and {len(found) - 10} more", file=sys.stderr)
    return found


def _finished(run_dir: str):  # noqa: ANN202 - RunRecords | None
    """A run directory's records, or None (with the reason on stderr) when it holds no world."""
    from workbench.records import load_run

    records = load_run(run_dir)
    warn_damage(records)
    # the records live as long as the command: the cyclic collector need not walk them again
    gc.freeze()
    if not records.light_worlds():
        print(f"error: {run_dir} holds no finished world", file=sys.stderr)
        return None
    return records


def preflight(study, out: str | None = None, concurrency: int | None = None) -> int:  # noqa: ANN001 - a Study
    """Check every real-model route of a study before any call, and what the machine can give the
    run (open files for its connections, disk for its records); 2 (with the reasons) if not ready."""
    routes = {r for c in study.cells for r in study.kind.routes(c.spec)}
    if study.monitor is not None:
        routes.add(study.monitor.model)
    # routes that need keys or prices (route_problems passes over simulated and local ones; a
    # study with none of them need not import the model clients just to learn that)
    needs_check = any(not is_simulated_route(r) and not r.startswith("local/") for r in routes)
    problems: list[str] = []
    if needs_check:
        from workbench.models.preflight import route_problems

        problems = route_problems(routes, budget_usd=study.budget_usd)
    # what a kind needs besides models, e.g. a sandbox for agent code
    problems += list(dict.fromkeys(p for c in study.cells for p in study.kind.preflight(c.spec)))
    from workbench.machine import disk_problem, file_limit_problem

    if needs_check or any(r.startswith("local/") for r in routes):  # connections: only real-model calls hold them
        problems += [p for p in [file_limit_problem(concurrency or study.concurrency)] if p]
    if out is not None:
        problems += [p for p in [disk_problem(out, sum(study.worlds_for(c) for c in study.cells))] if p]
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        print(f"refused: {study.path} is not ready to run ({len(problems)} problems above); no call was made",
              file=sys.stderr)
    return 2 if problems else 0


def allow_unsafe_code_tasks(args: argparse.Namespace) -> None:
    """--unsafe-code-tasks: agent-written tests may run unconfined where bubblewrap cannot.

    Passed on as the environment variable the sandbox reads, so papermill's kernels
    see it too; the manifest records it for every run it was set in."""
    if getattr(args, "unsafe_code_tasks", False):
        os.environ["WORKBENCH_UNSAFE_CODE_TASKS"] = "1"
        print("warning: --unsafe-code-tasks: where bubblewrap is unavailable, agent-written tests run "
              "unconfined (recorded in the manifest)", file=sys.stderr)


def _processes_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 or 'auto', got {text!r}")
    return n


def _cmd_run(args: argparse.Namespace) -> int:
    from workbench.study import run_study

    allow_unsafe_code_tasks(args)
    if args.ray_address and args.executor != "ray":
        raise InputError(f"--ray-address {args.ray_address}: only with --executor ray")
    study = load_study(args.params)
    if preflight(study, args.out, args.concurrency):
        return 2
    lock, code = lock_gate(args.params, args.locks, args.deviation)
    if code:
        return code
    line = _plan_line(study)
    if line:
        print(line, file=sys.stderr)
    _warn_uncalibrated(study)
    if isinstance(args.processes, int) and args.processes > 1:
        from workbench.probe import probe_routes_of

        if probe_routes_of(study):
            print(f"warning: --processes {args.processes} not taken: this study calls real models, whose budget, "
                  "rate limits and call ledger live in one process; running in one", file=sys.stderr)
    cells = [c for c in args.cells.split(",") if c] if args.cells else None
    try:
        summary = run_study(study, args.out, cell_ids=cells, concurrency=args.concurrency,
                            progress=show_progress(args) and not args.no_progress, max_worlds=args.max_worlds, lock=lock,
                            retry_failed=not args.no_retry_failed, probe=args.probe, processes=args.processes,
                            keep_worlds=not (args.no_summary or args.quiet),  # only the summary reads them
                            accept_changes=args.accept_changes, executor=args.executor, ray_address=args.ray_address)
    except KeyboardInterrupt:
        print(f"interrupted; finished worlds are kept in {args.out}; run the same command again to resume",
              file=sys.stderr)
        return 130
    for name, n in summary.repaired_bytes.items():
        inform(args, f"note: dropped a half-written last line ({n} bytes) from {name}")
    print(summary.line())
    if summary.probe_failed:
        print("refused: a probed route did not answer (above); no world was run", file=sys.stderr)
        return 2
    if not (args.no_summary or args.quiet):
        ids = {c.cell_id for c in study.cells}
        order = {c.cell_id: i for i, c in enumerate(study.cells)}  # tables in the order of the params file
        # the run's worlds as it holds them: what was just written is not read again
        worlds = sorted((w for w in summary.worlds.values() if w["cell_id"] in ids),
                        key=lambda w: (order[w["cell_id"]], w.get("world_index") or 0))
        if worlds:
            simulated = any(is_simulated_route(r) for c in study.cells for r in study.kind.routes(c.spec))
            note = " (SIMULATED behaviour, not real models)" if simulated else ""
            print(f"\nPer cell{note}:")
            print(study.kind.summary_text(worlds))
    if summary.infrastructure_failed:
        print(f"error: {summary.infrastructure_failed} worlds of this run ended for reasons that are not the "
              "model's (see above); the study is not complete", file=sys.stderr)
        return 1
    return 0


def _cmd_prompts(args: argparse.Namespace) -> int:
    from workbench.prompt_diff import describe, prompt_diffs

    diffs = prompt_diffs(load_study(args.params), args.factor, args.world)
    if not diffs:
        print("no two cells differ in " + (args.factor or "a declared contrast's factor") + " alone")
        return 0
    print(describe(diffs))
    return 0


def _warn_uncalibrated(study: Any) -> None:
    """Say, before anything runs, which cells rehearse on agents that cannot read their prompts as fitted."""
    if not study.uncalibrated:
        return
    print(f"warning: rehearsal: uncalibrated: in {len(study.uncalibrated)} cell(s) simulated agents cannot read the "
          "prompts as they were fitted to; every report will say so:", file=sys.stderr)
    for cell, problems in study.uncalibrated.items():
        print(f"  {cell}: {problems[0]}" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
              file=sys.stderr)


def _cmd_validate(args: argparse.Namespace) -> int:
    allow_unsafe_code_tasks(args)
    study = load_study(args.params)
    print(f"{study.path}: study {study.name!r}, world kind {study.world}, {len(study.cells)} cells × "
          f"{study.worlds_per_cell} worlds, seed {study.seed}")
    for c in study.cells:
        print(f"  {c.cell_id}  {c.label}" + (f"  ({c.worlds} worlds)" if c.worlds else ""))
    _warn_uncalibrated(study)
    code = preflight(study)
    if code or not args.probe:
        return code
    return _probe(study, Path(args.probe_dir))


def _probe(study, folder: Path) -> int:  # noqa: ANN001 - a Study
    """validate --probe: one request per real route, recorded in FOLDER/calls.jsonl, charged to a budget of the study's size."""
    from workbench.aio import run_sync
    from workbench.models.budget import budget_from
    from workbench.models.ledger import CallLedger
    from workbench.probe import probe_routes, probe_routes_of

    routes = probe_routes_of(study)
    if not routes:
        print("probe: the study uses no real-model route; nothing to probe")
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    ledger = CallLedger(folder / "calls.jsonl")
    budget = budget_from(study.budget_usd)

    async def go():  # noqa: ANN202
        try:
            return await probe_routes(routes, budget=budget, ledger=ledger)
        finally:
            from workbench.models.litellm_client import aclose_clients

            await aclose_clients()
            if "workbench.local.server" in sys.modules:
                from workbench.local.server import stop_all

                stop_all()

    try:
        results = run_sync(go())
    finally:
        ledger.close()
    for r in results:
        print(r.line())
    spent = sum(r.cost_usd or 0.0 for r in results)
    print(f"probe: {len(results)} requests, {spent:.6f} USD, recorded in {folder / 'calls.jsonl'}")
    return 0 if all(r.ok for r in results) else 2


def _cmd_replay(args: argparse.Namespace) -> int:
    from workbench.records import load_run

    records = load_run(args.dir)
    warn_damage(records)
    if args.world is None:
        for w in records.worlds:
            print(f"{w['world_id']}  {w.get('cell_label', '')}  valid={w['valid']}")
        return 0
    if args.verify:
        from workbench.replay import verify_world

        diffs = verify_world(records, args.world)
        for d in diffs:
            print(f"mismatch: {d}")
        n = len(records.steps.get(args.world, []))
        print(f"replay of {args.world} through the engine: " + ("identical to the records" if not diffs
              else f"{len(diffs)} differences") + f" ({n} steps)")
        return 1 if diffs else 0
    kind_of_records(records).describe_world(records, args.world, sys.stdout, full=args.full)
    return 0


def print_table(name: str, table, note: str = "") -> None:  # noqa: ANN001 - a DataFrame
    """A table for the terminal: its title, rules and constant factors, then its rows
    (intervals dropped for width), or why it is empty."""
    import pandas as pd

    from workbench.metrics.design import constant_text

    print(f"\n== {name}{note} ==")
    for key in ("title", "rules"):
        if table.attrs.get(key):
            print(table.attrs[key])
    if constant_text(table):
        print(f"same in every row: {constant_text(table)}")
    if table.empty:
        print(f"(empty: {table.attrs.get('empty_reason') or 'no rows in this run set'})")
        return
    sparse = set(table.attrs.get("sparse") or ())
    cols = [c for c in table.columns if not c.endswith((":low", ":high", " low", " high"))
            and c not in ("low", "high", "lost pair keys", "estimable", "comparison")
            and not (c in sparse and not table[c].astype(bool).any())]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 48,
                           "display.precision", 3):
        print(table[cols].to_string(index=False))


def _cmd_metrics(args: argparse.Namespace) -> int:
    from workbench.metrics.files import rules_folder

    records = _finished(args.dir)
    if records is None:
        return 2
    simulated = all_worlds_simulated(records.light_worlds())
    note = " (SIMULATED behaviour, not real models)" if simulated else ""
    kind = kind_of_records(records)
    rules: dict[str, Any] = {}
    if kind.rescoring:
        rules = {"parser_rule": args.parser, "answer_rule": args.answer_rule}
    elif args.parser or args.answer_rule:
        print(f"error: --parser and --answer-rule re-score recorded replies; the {kind.name} world "
              "kind has no such rules", file=sys.stderr)
        return 2
    # re-scored tables go to a folder named after their rules: never over the recorded ones
    out = Path(args.out) if args.out else Path(args.dir) / "metrics" / (
        rules_folder(args.parser, args.answer_rule) if kind.rescoring else "")
    written = kind.export_metrics(records, out, **rules, holm=args.holm)
    tables = kind.metric_tables(records, **rules, holm=args.holm)
    for name in kind.terminal_tables or tuple(tables):
        print_table(name, tables[name], note)
    print(f"\nwrote {len(written)} files under {out}")
    return 0


def parse_maps(items: list[str] | None) -> dict[str, dict[str, str]]:
    """``--map FIELD=OLD:NEW`` (repeatable) as {field: {old: new}}."""
    maps: dict[str, dict[str, str]] = {}
    for item in items or []:
        field, eq, pair = item.partition("=")
        old, colon, new = pair.partition(":")
        if not (eq and colon and field and old and new):
            raise InputError(f"--map {item!r}: expected FIELD=OLD:NEW, e.g. parser=lenient:strict")
        maps.setdefault(field, {})[old] = new
    return maps


def _cmd_compare(args: argparse.Namespace) -> int:
    from workbench.metrics.contrasts import Estimability, compare_run_sets
    from workbench.metrics.design import design_of_records

    a, b = _finished(args.a), _finished(args.b)
    if a is None or b is None:
        return 2
    kind_a, kind_b = kind_of_records(a), kind_of_records(b)
    if kind_a is not kind_b:
        print(f"error: {args.a} holds {kind_a.name} worlds and {args.b} {kind_b.name} worlds; compare "
              "run sets of one world kind", file=sys.stderr)
        return 2
    maps = parse_maps(args.map)
    table = compare_run_sets(kind_a.contrast_units(a), design_of_records(a), kind_b.contrast_units(b),
                             design_of_records(b), metric=args.metric, ignore=args.ignore or [], maps=maps,
                             names=(args.a, args.b), holm=args.holm, rule=Estimability.of(a))
    print_table("compare", table)
    unmatched = table[table["status"] != "matched"]
    if len(unmatched):
        print(f"\n{len(unmatched)} cells not matched (listed above with the reason); "
              "declare an intended difference with --ignore FIELD or --map FIELD=OLD:NEW")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from workbench.publish.report import make_report
    from workbench.records import load_run

    try:
        warn_damage(load_run(args.dir))  # the report shows them too (what was run, attrition, provenance)
    except WorkbenchError:
        pass  # not a run directory: make_report says so
    path = make_report(args.dir, compare_dir=args.compare, output=args.out, timeout_s=args.timeout,
                       figures_dir=args.figures, progress=show_progress(args))
    print(f"report written: {path}")
    return 0


def _cmd_batch(args: argparse.Namespace) -> int:
    from workbench.publish.batch import run_batch, skip_slow_optional_imports

    skip_slow_optional_imports()  # this process is the batch's own: seconds saved importing papermill
    allow_unsafe_code_tasks(args)
    if preflight(load_study(args.params)):
        return 2
    lock, code = lock_gate(args.params, args.locks, args.deviation)
    if code:
        return code
    result = run_batch(args.params, args.out, parallel=args.parallel, timeout_s=args.timeout,
                       report=not args.no_report, lock=lock, progress=show_progress(args))
    print("\n".join(result.lines()))
    return 1 if result.failed or result.report_error or result.infrastructure else 0


def _cmd_setup(args: argparse.Namespace) -> int:
    from workbench.publish.kernel import install_kernel

    print(f"kernel spec: {install_kernel()}")
    return 0


def _cmd_lock(args: argparse.Namespace) -> int:
    from workbench import locks

    if args.lock_command == "create":
        print(f"lock written: {locks.create_lock(args.name, args.params, args.locks)}")
        return 0
    if args.lock_command == "data":
        print(f"data lock written: {locks.create_data_lock(args.name, args.run_dir, args.locks)}")
        return 0
    ok, lines = locks.verify(args.locks)
    print("\n".join(lines))
    print("all locks verified" if ok else "verification FAILED")
    return 0 if ok else 1


def _cmd_models(args: argparse.Namespace) -> int:
    from workbench.local.catalogue import load_local_catalogue
    from workbench.local.fetch import FetchError, cache_dir, fetch, installed
    from workbench.local.runtime import RuntimeBuildError, build, choose, cpu_key, installed_version

    if args.models_command == "build-runtime":
        print(f"compiling xllamacpp {installed_version()} for this CPU ({cpu_key()}); about 6 minutes on 2 cores",
              file=sys.stderr)
        try:
            folder = build(force=args.force, jobs=args.jobs)
        except RuntimeBuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"native llama.cpp build for this CPU: {folder} (local models use it where their catalogue "
              f"entry says runtime: auto or native)")
        return 0
    cache = Path(args.cache) if args.cache else None
    if args.models_command == "list":
        print(f"local models (cache: {cache or cache_dir()}):")
        for name, m in load_local_catalogue().items():
            state = "installed" if installed(name, cache) else "not installed"
            print(f"  local/{name:<22} {m.size / 2**20:7.0f} MiB  {state:<13} {m.description}"
                  + ("" if m.agent else "  (too weak to act as an agent)"))
        chosen = choose("auto")
        print(f"llama.cpp runtime: xllamacpp {installed_version() or '(not installed)'}, {chosen.kind} build"
              f" ({chosen.why})")
        return 0
    try:
        path = fetch(args.name, cache=cache, force=args.force, progress=show_progress(args))
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"installed {args.name}: {path} ({path.stat().st_size} bytes, SHA-256 verified)")
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from workbench.starter import STUDY_FILE, examples, write_starter

    if args.list:
        for name, path in examples().items():
            print(f"{name:<22} {path}")
        return 0
    if not args.dir:
        raise InputError("init: expected a folder to write the study into (or --list)")
    written = write_starter(args.dir, args.example)
    folder = Path(args.dir)
    print(f"wrote {written[0]} and {len(written) - 1} template or script folder(s) it reads beside it")
    if not args.quiet:
        print(f"next:\n  workbench validate {folder / STUDY_FILE}\n  workbench run {folder / STUDY_FILE} --out "
              f"{folder / 'outputs' / args.example}\n  workbench report {folder / 'outputs' / args.example}",
              file=sys.stderr)
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from workbench.kinds import get_kind, kind_names

    if args.show:
        for name in kind_names():
            text = get_kind(name).profile_text(args.show)
            if text is not None:
                print(f"{args.show} ({name} world; simulated behaviour, not a model):\n{text}", end="")
                return 0
        print(f"error: --show {args.show!r}: no simulated profile of that name (see `workbench profiles`)",
              file=sys.stderr)
        return 2
    if args.check:
        import numpy as np
        import pandas as pd

        rows = [{"kind": name, **row} for name in kind_names() for row in get_kind(name).calibration()]
        if not rows:
            print("no world kind has calibrated twins")
            return 0
        table = pd.DataFrame(rows)
        bad = table[~table["within"]]
        summary = f"{len(table) - len(bad)} of {len(table)} figures within their reference's interval"
        if args.markdown:
            shown = table.drop(columns="kind") if table["kind"].nunique() == 1 else table

            def md(v: Any) -> str:
                if isinstance(v, (bool, np.bool_)):
                    return "yes" if v else "**no**"
                if isinstance(v, float):
                    return f"{v:+.3f}"
                return str(v).replace("|", "\\|")

            print("| " + " | ".join(shown.columns) + " |")
            print("|" + "|".join("---" for _ in shown.columns) + "|")
            for rec in shown.itertuples(index=False):
                print("| " + " | ".join(md(v) for v in rec) + " |")
            print(f"\n{summary}")
            return 1 if len(bad) else 0
        with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60):
            print("Simulated twins on the designs of the figures they were fitted to (difference: twin - reference, "
                  "Newcombe 95 %; the twin's count pooled over every seed it is checked at, and the seed farthest "
                  "from the reference):")
            print(table.to_string(index=False))
        print(f"\n{summary}")
        return 1 if len(bad) else 0
    print("Simulated profiles (simulated behaviour, not real models):")
    for name in kind_names():
        profiles = get_kind(name).simulated_profiles()
        if profiles:
            print(f"{name} world:")
            for route, description in profiles.items():
                print(f"  {route:<28} {description}")
    return 0


def plan_dir(study_name: str) -> Path:
    return Path("outputs") / "plan" / study_name


def _cmd_plan(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.plan import make_plan, short_labels, write_plan
    from workbench.records import sha256_file

    study = load_study(args.params)
    try:  # make_plan checks the options (InputError naming each) before it rehearses
        plan = make_plan(study, rehearse=args.rehearse, from_run=args.from_run, assume=args.assume,
                         half_width=args.half_width, power=args.power,
                         output_tokens_per_call=args.output_tokens_per_call)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cells, contrasts = plan.frames()
    short = short_labels([c.label for c in study.cells])
    shared = sorted(set(study.cells[0].label.split(" · ")) - set(next(iter(short.values())).split(" · ")))
    shown = cells.drop(columns=["cell_id", "figures_from", "warning"]).assign(cell=cells["cell"].map(short))
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
        print(f"Plan of {study.name}: {len(study.cells)} cells x {study.worlds_per_cell} worlds; "
              f"rates of {plan.metric}" + (f"; every cell: {' · '.join(shared)}" if shared else ""))
        print(f"figures from: {'; '.join(sorted(set(cells['figures_from'])))}")
        print(shown.to_string(index=False))
        for cell in plan.cells:
            if cell.warning:
                print(f"warning: {short[cell.label]}: {cell.warning}")
        print(f"\nContrasts: power of the analysis's test, exact McNemar over worlds paired by index and valid in "
              f"both, two-sided, p <= 0.05, no multiple-comparison correction; valid pairs and worlds per cell to "
              f"run for {args.power:.0%} power (attrition included: about valid pairs / valid share); worlds per "
              f"cell for a Wilson interval of +/-{args.half_width} in each arm. Notes below the table.")
        if len(contrasts):
            table = contrasts.assign(A=contrasts["A"].map(short), B=contrasts["B"].map(short))
            table.index = range(1, len(table) + 1)
            print(table.drop(columns=["worlds per cell", "note"]).to_string())
            for i, note in zip(table.index, table["note"]):
                print(f"  [{i}] {note}")
        else:
            print("  none: no two cells differ in one factor alone")
    total = plan.total_cost
    budget = f"; budget_usd {study.budget_usd:.2f}" if study.budget_usd else ""
    extra = plan.reasoning_usd_per_ktok
    reasoning = ("" if not plan.warnings else "; reasoning tokens not counted (see warnings): "
                 + (f"+${extra:.2f} per 1000 reasoning tokens a call" if extra is not None else "effect unknown"))
    print(f"\nexpected cost: {'unknown (see cost_note)' if total is None else f'${total:.2f}'}{budget}{reasoning}")
    written = write_plan(plan, Path(args.out) if args.out else plan_dir(study.name), sha256_file(study.path))
    print(f"wrote {written['cells']}, {written['contrasts']} and {written['totals']}")
    return 0


def _plan_line(study) -> str | None:  # noqa: ANN001 - a Study
    """Before a run with real models or a budget: the saved plan's estimate beside the budget."""
    real = [r for c in study.cells for r in study.kind.routes(c.spec) if not is_simulated_route(r)]
    if not real and not study.budget_usd:
        return None
    from workbench.plan import saved_estimate
    from workbench.records import sha256_file

    estimate = saved_estimate(plan_dir(study.name), sha256_file(study.path))
    budget = f"budget_usd ${study.budget_usd:.2f}" if study.budget_usd else "no budget_usd"
    if estimate is None:
        return f"plan: no estimate for this params file ({budget}); `workbench plan {study.path}` gives one"
    return f"plan: expected cost ${estimate:.2f} (workbench plan, same params file); {budget}"


def _cmd_export(args: argparse.Namespace) -> int:
    """export inspect: one Inspect eval log per cell, then read back with Inspect's reader and checked."""
    from workbench.export.inspect_log import check_export, export_run
    from workbench.records import load_run

    warn_damage(load_run(args.dir))
    paths = export_run(args.dir, args.out)
    for p in paths:
        print(p)
    got = check_export(args.dir, paths)
    print(f"{got['logs']} Inspect logs, {got['samples']} samples: read back with inspect_ai.log.read_eval_log, "
          f"samples and {got['scores']} scores equal to the records (inspect view --log-dir {args.out})")
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    from workbench.export.runs import format_rows, index_runs, rows_json

    rows = index_runs(args.dir)
    print(rows_json(rows) if args.json else (format_rows(rows) if rows else f"no run sets under {args.dir}"))
    return 0


def _cmd_judge(args: argparse.Namespace) -> int:
    records = _finished(args.dir)
    if records is None:
        return 2
    kind = kind_of_records(records)
    if not kind.has_judges:
        print(f"error: the {kind.name} world kind has no judges", file=sys.stderr)
        return 2
    options = {"limit": args.limit} if args.limit else {}
    if args.judges:
        options["judges"] = tuple(j for j in args.judges.split(",") if j)
    with JudgeProgress(show_progress(args)) as bar:
        if bar.enabled or log.isEnabledFor(logging.DEBUG):  # a kind's run_judges need not take it otherwise
            options["progress"] = bar.update
        frame = kind.run_judges(records, args.route, **options)
    counts = frame.groupby(["judge", "status"]).size() if len(frame) else frame
    print(f"{len(frame)} judgments by {args.route} (kept beside the records; a rerun reuses them)")
    if len(frame):
        print(counts.to_string())
    return 0


def _unsafe_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unsafe-code-tasks", action="store_true",
                   help="where bubblewrap is unavailable, run agent-written tests unconfined (recorded in the manifest)")


def _cmd_view(args: argparse.Namespace) -> int:
    from workbench.viewer.command import run_view

    return run_view(args)


EXAMPLES = {
    "run": "workbench run params/smoke.yaml --out outputs/smoke --max-worlds 4",
    "validate": "workbench validate params/smoke.yaml",
    "prompts": "workbench prompts params/open-questions.yaml --factor vocabulary",
    "replay": "workbench replay outputs/smoke --world WORLD_ID --verify",
    "metrics": "workbench metrics outputs/smoke --parser strict",
    "compare": "workbench compare outputs/lenient outputs/strict --ignore parser",
    "judge": "workbench judge outputs/collusion --judges agreement --limit 20",
    "report": "workbench report outputs/smoke --figures outputs/smoke/figures",
    "batch": "workbench batch params/smoke.yaml --out outputs/smoke-batch --parallel 2",
    "lock": "workbench lock create e1-L1 params/e1.yaml",
    "lock create": "workbench lock create e1-L1 params/e1.yaml",
    "lock data": "workbench lock data e1-data outputs/e1",
    "lock verify": "workbench lock verify --locks locks",
    "setup": "workbench setup",
    "init": "workbench init my-study --example smoke",
    "models": "workbench models fetch qwen2.5-coder-0.5b",
    "models list": "workbench models list",
    "models fetch": "workbench models fetch qwen2.5-coder-0.5b",
    "models build-runtime": "workbench models build-runtime",
    "profiles": "workbench profiles",
    "export": "workbench export inspect outputs/demo --out outputs/demo/inspect",
    "export inspect": "workbench export inspect outputs/demo --out outputs/demo/inspect",
    "runs": "workbench runs outputs",
    "view": "workbench view outputs/smoke outputs/demo --port 8765",
    "plan": "workbench plan params/main.yaml --rehearse 20 --half-width 0.1",
}


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """-q, -v and --progress, accepted before the command and after it. On the
    commands the defaults are SUPPRESS, so an option given before the command is
    not reset by the command's parser."""
    keep: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bars or notes (results, warnings and errors still print)", **keep)
    p.add_argument("-v", "--verbose", action="count",
                   help="more detail on stderr: -v the workbench log at INFO, -vv at DEBUG", **keep)
    p.add_argument("--progress", action="store_true",
                   help="show progress bars even when stderr is not a terminal (default: only on a terminal)",
                   **keep)
    return p


def _subparser(sub: Any, name: str, path: str = "", **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser: the common options and one example in its --help."""
    key = f"{path} {name}".strip()
    return sub.add_parser(name, parents=[_common_options(False)], formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=f"Example:\n  {EXAMPLES[key]}", **kwargs)


def build_parser(kinds: list[Any] | None = None) -> argparse.ArgumentParser:
    """The parser; ``kinds`` (WorldKind instances) add their own ``workbench <kind> <command>`` groups."""
    ap = argparse.ArgumentParser(prog="workbench", description="stigmergy-workbench: shared-state studies of LLM agents",
                                 parents=[_common_options(True)], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Example:\n  workbench run params/smoke.yaml --out outputs/smoke\n\n"
                                        "Progress bars go to stderr, on a terminal only (--progress: always; -q: never).")
    ap.add_argument("--version", action=VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    p = _subparser(sub, "run", help="run (or resume) a study into a run directory")
    p.add_argument("params", help="study YAML file")
    p.add_argument("--out", required=True, help="run directory (created; reused to resume)")
    p.add_argument("--cells", help="comma-separated cell ids or labels to run (default: all)")
    p.add_argument("--concurrency", type=int, help="worlds in flight at once (default: the study's)")
    p.add_argument("--max-worlds", type=int, help="stop after this many new worlds")
    p.add_argument("--processes", type=_processes_arg, default="auto",
                   help="world processes, each running a share of the worlds (default auto: one per core, at most one "
                        "per 200 worlds, per collusion world; only for studies with no real-model route, else 1)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where worlds run: local (default: forked world processes or this process) or ray (Ray "
                        "tasks on a cluster; this process stays the only writer; needs the extra 'ray')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster to join (host:port, or auto); default: a local Ray runtime")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-summary", action="store_true", help="do not print the per-cell table")
    p.add_argument("--locks", help="lock folder (default: the nearest locks/ above the study file, "
                                   "else locks/ at its git root)")
    p.add_argument("--deviation", help="run a locked study that changed, recording this reason in the chain")
    p.add_argument("--accept-changes", metavar="WHY",
                   help="resume a run directory whose worlds ran under other inputs (seed, templates, profiles, "
                        "catalogue, kind code): record the changes and WHY as a deviation and run the remaining worlds "
                        "under the new inputs (analysis keeps the two designs of a cell apart)")
    p.add_argument("--no-retry-failed", action="store_true",
                   help="keep worlds that ended in an infrastructure failure as recorded (default: run them again)")
    p.add_argument("--probe", action="store_true",
                   help="first send one minimal request per real-model route (recorded, charged); stop if one fails")
    _unsafe_flag(p)
    p.set_defaults(func=_cmd_run)
    p = _subparser(sub, "validate", help="check a study file, its routes' keys and prices, and list its cells")
    p.add_argument("params")
    p.add_argument("--probe", action="store_true",
                   help="also send one minimal request per real-model route (recorded, charged to the study's budget)")
    p.add_argument("--probe-dir", default="outputs/probes", help="where --probe records its calls (calls.jsonl)")
    _unsafe_flag(p)
    p.set_defaults(func=_cmd_validate)
    p = _subparser(sub, "prompts", help="diff the rendered prompts of cells that differ in one factor alone "
                                        "(a design should change only the factor's own text)")
    p.add_argument("params")
    p.add_argument("--factor", help="the factor whose levels to diff (default: every declared contrast)")
    p.add_argument("--world", type=int, default=0, help="which world's tasks to render (default 0)")
    p.set_defaults(func=_cmd_prompts)
    p = _subparser(sub, "replay", help="print a recorded world step by step (no model is called)")
    p.add_argument("dir", help="run directory")
    p.add_argument("--world", help="world id (omit to list the worlds)")
    p.add_argument("--full", action="store_true", help="also print prompts and raw replies")
    p.add_argument("--verify", action="store_true",
                   help="rerun the world through the engine from its recorded replies and compare")
    p.set_defaults(func=_cmd_replay)
    p = _subparser(sub, "metrics", help="write per-world, per-agent and cell tables of a run directory")
    p.add_argument("dir", help="run directory")
    p.add_argument("--out", help="where to write (default: DIR/metrics)")
    p.add_argument("--parser", choices=["strict", "lenient"], help="re-score under this parser rule")
    p.add_argument("--answer-rule", choices=["one-integer", "exact"], help="re-score under this answer rule")
    p.add_argument("--holm", action="store_true", help="add Holm-adjusted p values beside the raw ones")
    p.set_defaults(func=_cmd_metrics)
    p = _subparser(sub, "compare", help="compare two run sets cell by cell, cells matched on their factors "
                                       "(Newcombe; exact McNemar where seeds pair)")
    p.add_argument("a", help="run directory A")
    p.add_argument("b", help="run directory B")
    p.add_argument("--metric", help="a boolean unit metric (default: the world kind's headline metric)")
    p.add_argument("--ignore", action="append", metavar="FIELD",
                   help="a cell field that is the difference under test (repeatable), e.g. --ignore parser")
    p.add_argument("--map", action="append", metavar="FIELD=OLD:NEW",
                   help="A's level OLD of FIELD corresponds to B's NEW (repeatable)")
    p.add_argument("--holm", action="store_true", help="add Holm-adjusted p values beside the raw ones")
    p.add_argument("--csv", help="also write the table here")
    p.set_defaults(func=_cmd_compare)
    p = _subparser(sub, "view", help="browse every world of one or more run sets in a browser, offline "
                                    "(a server on 127.0.0.1, or --bundle: static files)")
    p.add_argument("dirs", nargs="+", metavar="RUN_DIR", help="run directories (several: side by side, cells matched)")
    p.add_argument("--bundle", "--static", dest="bundle", metavar="OUT",
                   help="write the viewer as static files here instead of serving (works from file://)")
    p.add_argument("--examples", type=int, default=3, help="world pages per cell in a bundle (default 3)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port to serve on (0: any free port)")
    p.add_argument("--ignore", action="append", metavar="FIELD",
                   help="a cell field ignored when matching cells across run sets (repeatable)")
    p.set_defaults(func=_cmd_view)
    p = _subparser(sub, "judge", help="run a world kind's LLM judges over a run set (collusion: agreement, relaxation)")
    p.add_argument("dir", help="run directory")
    p.add_argument("--route", default="sim-collusion-judge/lexical",
                   help="judge model route (default: the simulated judge; any litellm route given a key)")
    p.add_argument("--judges", help="comma-separated subset, e.g. agreement,relaxation")
    p.add_argument("--limit", type=int, help="judge at most this many items (a trial)")
    p.set_defaults(func=_cmd_judge)
    p = _subparser(sub, "report", help="execute the analysis notebook on a run set and write offline HTML")
    p.add_argument("dir", help="run directory (or batch directory)")
    p.add_argument("--compare", help="a second run set of the same design to compare with")
    p.add_argument("--out", help="HTML file (default: DIR/report.html)")
    p.add_argument("--timeout", type=int, default=900, help="execution timeout per notebook cell, seconds")
    p.add_argument("--figures", metavar="OUT",
                   help="also write every figure the report shows into this folder (SVG, PDF and PNG)")
    p.set_defaults(func=_cmd_report)
    p = _subparser(sub, "batch", help="run study.ipynb per cell through papermill (a kernel per parallel slot, "
                                      "reused from cell to cell), then the report")
    p.add_argument("params")
    p.add_argument("--out", required=True)
    p.add_argument("--parallel", type=int, default=2, help="cells run at once, each slot on its own kernel")
    p.add_argument("--timeout", type=int, default=1800, help="execution timeout per notebook cell, seconds")
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--locks", help="lock folder (default: the nearest locks/ above the study file, "
                                   "else locks/ at its git root)")
    p.add_argument("--deviation", help="run a locked study that changed, recording this reason in the chain")
    _unsafe_flag(p)
    p.set_defaults(func=_cmd_batch)
    p = _subparser(sub, "lock", help="preregistration: hash locks of designs and data, in a chain")
    lsub = p.add_subparsers(dest="lock_command", required=True)
    q = _subparser(lsub, "create", "lock", help="lock a study: params, templates, rules, models, analysis, metric code")
    q.add_argument("name")
    q.add_argument("params")
    q.add_argument("--locks", default="locks")
    q = _subparser(lsub, "data", "lock", help="lock the finished records of a run directory")
    q.add_argument("name")
    q.add_argument("run_dir")
    q.add_argument("--locks", default="locks")
    q = _subparser(lsub, "verify", "lock", help="check the chain and every hashed file; print what changed")
    q.add_argument("--locks", default="locks")
    p.set_defaults(func=_cmd_lock)
    p = _subparser(sub, "setup", help="install the Jupyter kernel spec (offline litellm settings in its env)")
    p.set_defaults(func=_cmd_setup)
    p = _subparser(sub, "models", help="local open-weight models: list, fetch, build-runtime")
    msub = p.add_subparsers(dest="models_command", required=True)
    q = _subparser(msub, "list", "models", help="what is catalogued and what is installed")
    q.add_argument("--cache", help="model cache folder (default: $WORKBENCH_MODEL_CACHE or ~/.cache/...)")
    q = _subparser(msub, "fetch", "models", help="download, join and verify a catalogued model")
    q.add_argument("name")
    q.add_argument("--cache")
    q.add_argument("--force", action="store_true", help="fetch again even if installed")
    q = _subparser(msub, "build-runtime", "models",
                   help="compile llama.cpp (the installed xllamacpp release) for this CPU: faster local models")
    q.add_argument("--force", action="store_true", help="compile again even if built")
    q.add_argument("--jobs", type=int, default=None, help="compiler jobs (default: the CPU count)")
    p.set_defaults(func=_cmd_models)
    p = _subparser(sub, "profiles", help="list the simulated profiles; check the twins' calibration")
    p.add_argument("--check", action="store_true",
                   help="run each twin on its reference designs at every calibration seed; exit 1 if a figure's "
                        "count pooled over the seeds is outside its reference's interval")
    p.add_argument("--markdown", action="store_true",
                   help="with --check: print the table as Markdown (docs/calibration.md is this output)")
    p.add_argument("--show", metavar="NAME", help="print one profile's parameters and cues")
    p.set_defaults(func=_cmd_profiles)
    p = _subparser(sub, "init", help="write a starter study (params and the templates it reads) into a new folder")
    p.add_argument("dir", nargs="?", help="the new folder")
    p.add_argument("--example", default="smoke", help="which shipped study to start from (default smoke; --list)")
    p.add_argument("--list", action="store_true", help="list the shipped studies and exit")
    p.set_defaults(func=_cmd_init)
    p = _subparser(sub, "export", help="write a run set in another tool's format (inspect: Inspect eval logs)")
    esub = p.add_subparsers(dest="export_command", required=True)
    q = _subparser(esub, "inspect", "export", help="one Inspect eval log per cell, a sample per world (needs the [inspect] extra)")
    q.add_argument("dir", help="run directory (or batch directory)")
    q.add_argument("--out", required=True, help="log directory for inspect view / inspect_ai.analysis")
    p.set_defaults(func=_cmd_export)
    p = _subparser(sub, "runs", help="list the run sets under a folder: study, kind, cells, worlds, agents, cost, revision, dates")
    p.add_argument("dir", nargs="?", default="outputs", help="folder to search (default: outputs)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.set_defaults(func=_cmd_runs)
    p = _subparser(sub, "plan", help="expected calls, tokens, cost and power per cell, from a rehearsal on twins")
    p.add_argument("params")
    p.add_argument("--rehearse", type=int, default=20, metavar="N",
                   help="worlds per cell of the rehearsal on simulated twins (default 20)")
    p.add_argument("--from", dest="from_run", metavar="RUN_DIR",
                   help="take steps, tokens and rates from this earlier run set of the same cells instead")
    p.add_argument("--assume", action="append", default=[], metavar="CELL=RATE",
                   help="a cell's rate of the headline metric (cell id or label; repeatable)")
    p.add_argument("--half-width", type=float, default=0.1, help="target half-width of each arm's interval")
    p.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    p.add_argument("--output-tokens-per-call", type=float, default=None,
                   help="output tokens per call to price (twins do not reason: give a reasoning model's own)")
    p.add_argument("--out", help="where to write plan.csv, power.csv, plan.json (default outputs/plan/STUDY)")
    p.set_defaults(func=_cmd_plan)
    for kind in kinds or []:
        _kind_commands(sub, kind)
    return ap


def _kind_commands(sub: Any, kind: Any) -> None:
    """``workbench <kind> <command>`` for each command the kind brings (its ``commands`` hook)."""
    commands = kind.commands()
    if not commands:
        return
    if kind.name in sub.choices:
        raise WorkbenchError(f"world kind {kind.name!r}: its name is a workbench command; its subcommands cannot be offered")
    p = sub.add_parser(kind.name, parents=[_common_options(False)], help=f"{kind.name} world tools: "
                       + "; ".join(c.name for c in commands))
    ksub = p.add_subparsers(dest=f"{kind.name}_command", required=True)
    for command in commands:
        q = ksub.add_parser(command.name, parents=[_common_options(False)], help=command.help,
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=f"Example:\n  {command.example}")
        command.configure(q)
        q.set_defaults(func=command.run)


def _kinds_for(argv: list[str]) -> list[Any]:
    """The kinds whose subcommands the parser must offer: none when the command is one of the
    workbench's own (importing every kind would slow every command), the named kind when it is a
    kind's name, all of them for --help or an unknown word (so help and errors list them)."""
    from workbench.kinds import get_kind, kind_names

    word = next((a for a in argv if not a.startswith("-")), None)
    if word in BUILTIN_COMMANDS:
        return []
    names = kind_names()
    if word in names:
        return [get_kind(word)]
    return [get_kind(n) for n in names]


BUILTIN_COMMANDS = frozenset(c.split()[0] for c in EXAMPLES)


def _failure_dir(args: argparse.Namespace) -> Path | None:
    """The run directory a failed command was working on (where its traceback is kept), if one exists."""
    if getattr(args, "command", None) in ("run", "batch"):
        candidates: list[Any] = [getattr(args, "out", None)]
    else:
        candidates = [getattr(args, "dir", None), getattr(args, "run_dir", None), *(getattr(args, "dirs", None) or [])]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


def _internal_error(exc: BaseException, args: argparse.Namespace | None, verbose: int) -> int:
    """A bug, not bad input: say so, keep the traceback in a file, show it with -v; exit 1."""
    import tempfile
    import time
    import traceback

    text = "".join(traceback.format_exception(exc))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    where = _failure_dir(args) if args is not None else None
    folder = (where / "internal-errors") if where else Path(tempfile.gettempdir())
    command = " ".join(sys.argv[1:]) if args is None else getattr(args, "command", "") or ""
    path = folder / f"{stamp}-{os.getpid()}-{command.split(' ')[0] or 'workbench'}.txt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(f"workbench {package_version()} · {' '.join(sys.argv)}\n{text}", encoding="utf-8")
        kept = f"traceback kept in {path}"
    except OSError as write_exc:  # never hide the bug behind a failure to record it
        kept = f"traceback not kept ({write_exc})"
    if verbose:
        print(text, file=sys.stderr, end="")
    print(f"internal error: {type(exc).__name__}: {exc} (a bug in the workbench, not in your input; {kept}; "
          f"-v shows it)", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args: argparse.Namespace | None = None
    try:
        args = build_parser(_kinds_for(argv)).parse_args(argv)
        configure_logging(args.verbose or 0, args.quiet)
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `workbench replay DIR | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ParamsError as exc:  # names the file and the field
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except WorkbenchError as exc:  # something the user can fix: one line, no traceback
        msg = exc.args[0] if exc.args else str(exc)
        print(f"error: {msg}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - everything else is a bug, said as one
        return _internal_error(exc, args, (getattr(args, "verbose", 0) or 0) if args else 0)


if __name__ == "__main__":
    sys.exit(main())
