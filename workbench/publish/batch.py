"""`workbench batch PARAMS --out DIR`: study.ipynb executed once per cell (papermill
parameters, each executed notebook kept), cells in parallel up to a limit; then the analysis.

Each cell writes its own run directory under DIR/cells/CELL_ID (so parallel
cells never share a file); DIR as a whole loads as one run set. A failed cell
is reported and the others go on; running the same command again resumes
every cell where it stopped; a cell whose worlds are all recorded under its current
design records that run without starting a kernel.

One kernel per parallel slot runs that slot's cells one after another: a fresh
kernel per cell cost about 6.6 s of start-up and imports (plotly, pandas, the
kinds) for runs that take a fraction of a second. Before each notebook the
kernel is put back to what a notebook expects of a new one (empty namespace,
execution count 1, the notebook's folder as working directory, plotly's
renderer unset so that ``setup()`` emits plotly.js into this notebook too);
the modules it imported stay imported, which is the point. A kernel whose
notebook failed, timed out or died is replaced before the next cell, so that
a half-run cell leaves nothing behind.

With ``progress``, a bar on stderr counts finished cells (papermill's per-cell
bars are off here: cells run in parallel) and the report then shows papermill's
own bar; ``-v`` logs each cell as it ends (the ``workbench`` logger)."""
from __future__ import annotations

import json
import logging
import os
import queue
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from workbench.params import load_study
from workbench.publish.notebooks import NotebookError, _kernel_manager, kernel_lines_to_show, notebook_path
from workbench.records import BATCH_CELLS
from workbench.study import infrastructure_failures, run_study

log = logging.getLogger(__name__)

ENGINE = "workbench-shared-kernel"  # papermill engine name of SharedKernel.execute


@dataclass
class BatchResult:
    out_dir: Path
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    report: Path | None = None
    report_error: str | None = None
    infrastructure: dict[str, dict[str, int]] = field(default_factory=dict)  # cell -> cause -> worlds

    def lines(self) -> list[str]:
        out = [f"batch: {len(self.done)} cells done, {len(self.failed)} failed; records in {self.out_dir}"]
        out += [f"  FAILED {cid}: {why}" for cid, why in self.failed.items()]
        for cid, causes in self.infrastructure.items():
            out.append(f"  INCOMPLETE {cid}: {sum(causes.values())} worlds ended in infrastructure failure ("
                       + ", ".join(f"{c} {n}" for c, n in sorted(causes.items()))
                       + "); run the same command again to retry them")
        if self.report:
            out.append(f"report: {self.report}")
        if self.report_error:
            out.append(f"report not written: {self.report_error}")
        return out


def finished(study: Any, cell_id: str, cell_dir: Path) -> bool:
    """Whether every world of the cell is recorded in its run directory, none of them an
    infrastructure failure to run again, all under the cell's design as it is now."""
    from workbench.design import cell_designs
    from workbench.models.failures import INFRASTRUCTURE, failure_class
    from workbench.records import latest_worlds, world_id

    if not (cell_dir / "worlds.jsonl").exists():
        return False
    cell = study.cell(cell_id)
    recorded = latest_worlds(cell_dir)
    wanted = [recorded.get(world_id(cell_id, i)) for i in range(study.worlds_for(cell))]
    if any(w is None or failure_class(w) == INFRASTRUCTURE for w in wanted):
        return False
    fingerprint = cell_designs(study, [cell])[cell_id].fingerprint
    return all(w.get("design") == fingerprint for w in wanted)  # type: ignore[union-attr]


# Run silently before each notebook (see the module docstring). IPython's reset without its
# gc.collect(), which alone took 0.2 s per notebook in a kernel holding the kinds' modules (the
# collector runs on its own later); without a new history session, a sqlite write. plotly's renderer
# is set to a plain one so that the notebook's setup() finds it unset and emits plotly.js into its
# own output, as in a new kernel.
_FRESH = """\
def _workbench_fresh(cwd):
    import gc, os, sys
    os.chdir(cwd)
    if "plotly.io" in sys.modules:
        sys.modules["plotly.io"].renderers.default = "json"
    shell = get_ipython()
    collect, gc.collect = gc.collect, lambda generation=2: 0
    try:
        shell.reset(new_session=False)
    finally:
        gc.collect = collect
    shell.execution_count = 1
_workbench_fresh({cwd!r})
"""


# jsonschema (under nbformat, which papermill and plotly's notebook renderers import) imports the
# optional rfc3987_syntax when it is installed, and that module compiles some 35 Lark grammars on
# import: 1 to 3 s of CPU, in this process and again in every kernel, for IRI format checks that
# nothing here asks for (python-jsonschema/jsonschema#1428). Made unimportable before jsonschema
# is imported, jsonschema goes without that one checker, as it does wherever it is not installed.
SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)


def skip_slow_optional_imports() -> None:
    """In this process (see SLOW_OPTIONAL_IMPORTS); nothing once jsonschema is imported."""
    if "jsonschema" not in sys.modules:
        for name in SLOW_OPTIONAL_IMPORTS:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]


_KERNEL_START = f"""\
import sys
if "jsonschema" not in sys.modules:
    for name in {SLOW_OPTIONAL_IMPORTS!r}:
        sys.modules.setdefault(name, None)
"""  # its names go with the reset before the first notebook


class SharedKernel:
    """One project kernel that executes notebook after notebook through papermill.

    Made, used and closed in one thread: its client's sockets belong to that thread's event
    loop. The kernel process's own stdout and stderr are shown per notebook as
    ``workbench.publish.notebooks.execute`` shows them (known noise dropped after a success)."""

    def __init__(self, cwd: Path, *, timeout_s: int) -> None:
        from jupyter_core.utils import run_sync

        from workbench.publish.kernel import KERNEL_NAME, install_kernel, kernel_installed

        if not kernel_installed():
            install_kernel()
        self.cwd = cwd
        self.timeout_s = timeout_s
        self._output: IO[bytes] = tempfile.TemporaryFile()
        self._shown = 0  # bytes of the kernel's own output already looked at
        self.km = _kernel_manager(self._output)(kernel_name=KERNEL_NAME)
        run_sync(self.km.start_kernel)(cwd=str(cwd))
        import papermill  # noqa: F401 - seconds of imports (nbformat's validator), here while the kernel boots

        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            run_sync(self.kc.wait_for_ready)(timeout=60)
            self.kc.allow_stdin = False
            self._silently(_KERNEL_START)
        except (RuntimeError, TimeoutError, NotebookError):
            self.close()
            raise

    def _silently(self, code: str) -> None:
        from jupyter_core.utils import run_sync

        reply = run_sync(self.kc.execute_interactive)(code, silent=True, store_history=False, timeout=60,
                                                      output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise NotebookError(f"could not prepare the batch kernel: {reply['content'].get('evalue', '')}")

    def _pass_on(self, label: str, *, ok: bool) -> None:
        # pread: the kernel process shares this file's offset and keeps writing at it
        fd = self._output.fileno()
        size = os.fstat(fd).st_size
        text = os.pread(fd, size - self._shown, self._shown).decode("utf-8", errors="replace")
        self._shown = size
        lines = kernel_lines_to_show(text, ok=ok, verbose=log.isEnabledFor(logging.INFO))
        if lines:
            print(f"-- the kernel running {label} wrote:", file=sys.stderr)
            print("\n".join(lines), file=sys.stderr, flush=True)

    def execute(self, name: str | Path, output: Path, parameters: dict[str, Any]) -> Path:
        """Run one notebook with ``parameters`` into ``output`` (kept, failed or not), as
        ``workbench.publish.notebooks.execute`` would in a new kernel; NotebookError if it failed."""
        import papermill as pm
        from nbclient.exceptions import CellControlSignal, DeadKernelError

        _register_engine()
        source = notebook_path(name)
        output.parent.mkdir(parents=True, exist_ok=True)
        log.info("executing %s into %s (shared kernel)", source.name, output)
        ok = False
        try:
            self._silently(_FRESH.format(cwd=str(self.cwd)))
            pm.execute_notebook(
                str(source), str(output), parameters=parameters, engine_name=ENGINE, kernel=self,
                kernel_name=self.km.kernel_name, execution_timeout=self.timeout_s, progress_bar=False,
                log_output=False, request_save_on_cell_execute=False)
            ok = True
        except pm.PapermillExecutionError as exc:
            raise NotebookError(f"{source.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                                f"(executed notebook kept at {output})") from None
        except (CellControlSignal, DeadKernelError, TimeoutError, RuntimeError) as exc:  # a timeout, a dead kernel
            raise NotebookError(f"{source.name} did not finish: {type(exc).__name__}: {exc}") from None
        finally:
            self._pass_on(output.name, ok=ok)
        return output

    def close(self) -> None:
        """Shut the kernel down (gracefully: its atexit hooks run); again, nothing."""
        from jupyter_core.utils import run_sync

        if self._output.closed:
            return
        try:
            self.kc.stop_channels()
            if run_sync(self.km.is_alive)():
                run_sync(self.km.shutdown_kernel)()
            run_sync(self.km.cleanup_resources)()
        finally:
            self._pass_on("the batch", ok=True)
            self._output.close()


def _register_engine() -> None:
    """papermill's nbclient engine, handed a running kernel and its client instead of starting one."""
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.log import logger

    if ENGINE in papermill_engines._engines:
        return

    class SharedKernelEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                     stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                     execution_timeout: int | None = None, **kwargs: Any) -> Any:
            kernel: SharedKernel = kwargs["kernel"]
            client = PapermillNotebookClient(
                nb_man, km=kernel.km, timeout=execution_timeout, startup_timeout=start_timeout,
                kernel_name=kernel_name, log=logger, log_output=log_output)
            client.kc = kernel.kc  # with a client already there nbclient neither starts nor stops one
            return client.execute()

    papermill_engines.register(ENGINE, SharedKernelEngine)


def run_batch(params: str | Path, out_dir: str | Path, *, parallel: int = 2, timeout_s: int = 1800,
              report: bool = True, lock: dict | None = None, progress: bool = False) -> BatchResult:
    study = load_study(params)  # a bad file fails here, before any kernel starts
    # Resolve paths now: the study runs in the kernel, whose working directory is the notebooks' folder.
    params_path = str(Path(params).resolve())
    out = Path(out_dir).resolve()
    (out / BATCH_CELLS).mkdir(parents=True, exist_ok=True)
    result = BatchResult(out)
    if lock is not None:  # the lock each cell ran under, verified once before any kernel started
        (out / "lock.json").write_text(json.dumps(lock, indent=1) + "\n")

    done_lock = threading.Lock()
    pending: queue.SimpleQueue[str] = queue.SimpleQueue()
    for c in study.cells:
        pending.put(c.cell_id)
    ended: queue.SimpleQueue[tuple[str, str | None, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()

    def one(cell_id: str, kernel: SharedKernel | None) -> SharedKernel | None:
        """Run one cell; the slot's kernel after it (started here when the cell needs one)."""
        if finished(study, cell_id, out / BATCH_CELLS / cell_id):
            # every world is recorded under the design the study has now: the run that finds them
            # done is recorded here, without a kernel (the notebook of the run that made them is kept)
            with done_lock:
                run_study(study, out / BATCH_CELLS / cell_id, cell_ids=[cell_id], progress=False, keep_worlds=False)
            return kernel
        kernel = kernel or SharedKernel(notebook_path("study").parent, timeout_s=timeout_s)
        try:
            kernel.execute("study", out / "notebooks" / f"study-{cell_id}.ipynb", {
                "params": params_path, "out": str(out / BATCH_CELLS / cell_id), "cells": cell_id,
                "concurrency": 0})
        except BaseException:
            kernel.close()  # the next cell gets a new kernel: nothing of a half-run cell carries over
            raise
        return kernel

    def slot() -> None:
        kernel: SharedKernel | None = None
        try:
            while not stop.is_set():
                try:
                    cell_id = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    kernel = one(cell_id, kernel)
                    ended.put((cell_id, None, None))
                except NotebookError as exc:  # its kernel is closed
                    kernel = None
                    ended.put((cell_id, str(exc), None))
                except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
                    ended.put((cell_id, None, exc))
                    return
        finally:
            if kernel is not None:
                kernel.close()

    from tqdm import tqdm

    bar = tqdm(total=len(study.cells), unit="cell", desc=f"batch {study.name}", file=sys.stderr,
               dynamic_ncols=True, disable=not progress)
    slots = [threading.Thread(target=slot, name=f"batch-slot-{i}", daemon=True)
             for i in range(max(1, min(parallel, len(study.cells))))]
    with bar:
        for t in slots:
            t.start()
        try:
            for _ in study.cells:
                cid, failure, crash = ended.get()
                if crash is not None:
                    raise crash
                if failure is None:
                    result.done.append(cid)
                    log.info("cell %s done", cid)
                else:
                    result.failed[cid] = failure
                    log.info("cell %s failed: %s", cid, failure)
                if (out / BATCH_CELLS / cid / "manifest.json").exists():
                    causes = infrastructure_failures(out / BATCH_CELLS / cid)
                    if causes:
                        result.infrastructure[cid] = causes
                bar.update(1)
                if result.failed:
                    bar.set_postfix(failed=len(result.failed))
        finally:
            stop.set()
            for t in slots:
                t.join()
    if report and result.done:
        from workbench.publish.report import make_report

        try:
            result.report = make_report(out, progress=progress)
        except (NotebookError, RuntimeError, FileNotFoundError) as exc:
            result.report_error = str(exc)
    return result
