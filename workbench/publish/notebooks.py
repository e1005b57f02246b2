"""Executing the project's notebooks with papermill, always with the project's
kernel and an execution timeout (papermill has none by default).

The kernel process's own stdout and stderr (not the notebook's outputs, which
travel over the kernel protocol) go to a temporary file instead of the
caller's terminal. They hold Jupyter's own chatter: a warning at every start
("Kernel is running over TCP without encryption") and, now and then, an
``ERROR | KeyboardInterrupt caught in kernel`` at the end of a notebook that
ran perfectly well. That one comes from shutdown: jupyter_client's
``shutdown_kernel`` always interrupts the kernel (SIGINT) before asking it to
shut down, and if the signal lands while ipykernel is still inside a message
handler (papermill's last ``kernel_info`` request) ipykernel logs it as an
error. So:

- on success, those two known lines are dropped and anything else the kernel
  wrote is passed on to stderr;
- on failure (a cell raised, the kernel died, a timeout), everything the
  kernel wrote is passed on to stderr, unfiltered;
- with ``-v`` (the ``workbench`` logger at INFO or below), everything is passed
  on in every case.

Nothing of the kernel's ever reaches the caller's stdout."""
from __future__ import annotations

import logging
import re
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from workbench.errors import SetupError

DEFAULT_TIMEOUT_S = 900
log = logging.getLogger(__name__)

# Lines a healthy kernel writes to its own stderr (see the module docstring).
KERNEL_NOISE = re.compile(r"KeyboardInterrupt caught in kernel|Kernel is running over TCP without encryption")


class NotebookError(SetupError):
    pass


def notebook_dir() -> Path:
    """The shipped notebooks' folder (the checkout's ``notebooks/``, or the installed package's copy)."""
    from workbench.resources import shipped

    return shipped("notebooks")


def notebook_path(name: str | Path) -> Path:
    """A notebook by name among the shipped ones, or by path (a kind's own notebook)."""
    path = Path(name) if isinstance(name, Path) else notebook_dir() / f"{name}.ipynb"
    if not path.exists():
        raise NotebookError(f"notebook {path} is missing (reinstall the workbench, or restore it from the repository)")
    return path


def _kernel_manager(stream: IO[bytes]) -> type:
    """An AsyncKernelManager (nbclient's default) whose kernel process writes its
    stdout and stderr into ``stream`` (Popen keywords, passed down by ``start_kernel``)."""
    from jupyter_client.manager import AsyncKernelManager

    class CapturedKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
            kw.setdefault("stdout", stream)
            kw.setdefault("stderr", stream)
            await super().start_kernel(**kw)

    return CapturedKernelManager


def kernel_lines_to_show(text: str, *, ok: bool, verbose: bool) -> list[str]:
    """What of a kernel's own output to pass on (see the module docstring)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if verbose or not ok:
        return lines
    return [ln for ln in lines if not KERNEL_NOISE.search(ln)]


def _pass_on(stream: IO[bytes], label: str, *, ok: bool) -> None:
    stream.seek(0)
    text = stream.read().decode("utf-8", errors="replace")
    lines = kernel_lines_to_show(text, ok=ok, verbose=log.isEnabledFor(logging.INFO))
    if lines:
        print(f"-- the kernel running {label} wrote:", file=sys.stderr)
        print("\n".join(lines), file=sys.stderr, flush=True)


def execute(name: str | Path, output: str | Path, parameters: dict[str, Any], *,
            timeout_s: int = DEFAULT_TIMEOUT_S, progress: bool = False) -> Path:
    """Run the shipped ``notebooks/NAME.ipynb`` (or the notebook at a path) with ``parameters``
    into ``output`` (kept); it runs in its own folder, so its relative paths are its folder's.

    ``progress`` shows papermill's own bar (one tick per cell) on stderr, whatever
    stderr is; callers decide whether they want it (the CLI: on a terminal, not
    with ``-q``)."""
    import papermill as pm

    from workbench.publish.kernel import KERNEL_NAME, install_kernel, kernel_installed

    if not kernel_installed():
        install_kernel()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    log.info("executing %s into %s", name, output)
    source = notebook_path(name)
    bar: dict[str, Any] | bool = {"file": sys.stderr, "desc": source.stem, "dynamic_ncols": True} if progress else False
    ok = False
    with tempfile.TemporaryFile() as kernel_output:
        try:
            pm.execute_notebook(
                str(source), str(output), parameters=parameters, kernel_name=KERNEL_NAME,
                cwd=str(source.parent), execution_timeout=timeout_s, progress_bar=bar, log_output=False,
                request_save_on_cell_execute=False, kernel_manager_class=_kernel_manager(kernel_output),
            )
            ok = True
        except pm.PapermillExecutionError as exc:
            raise NotebookError(f"{source.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                                f"(executed notebook kept at {output})") from None
        finally:
            _pass_on(kernel_output, output.name, ok=ok)
    log.info("executed %s", name)
    return output
