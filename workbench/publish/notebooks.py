"""Executing the project's notebooks with papermill, always with the project's
kernel and an execution timeout (papermill has none by default)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import SetupError

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
DEFAULT_TIMEOUT_S = 900


class NotebookError(SetupError):
    pass


def notebook_path(name: str) -> Path:
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if not path.exists():
        raise NotebookError(f"notebook {path} is missing (run from a checkout of the project)")
    return path


def execute(name: str, output: str | Path, parameters: dict[str, Any], *,
            timeout_s: int = DEFAULT_TIMEOUT_S, progress: bool = False) -> Path:
    """Run ``notebooks/NAME.ipynb`` with ``parameters`` into ``output`` (kept)."""
    import papermill as pm

    from workbench.publish.kernel import KERNEL_NAME, install_kernel, kernel_installed

    if not kernel_installed():
        install_kernel()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        pm.execute_notebook(
            str(notebook_path(name)), str(output), parameters=parameters, kernel_name=KERNEL_NAME,
            cwd=str(NOTEBOOK_DIR), execution_timeout=timeout_s, progress_bar=progress, log_output=False,
            request_save_on_cell_execute=False,
        )
    except pm.PapermillExecutionError as exc:
        raise NotebookError(f"{name}.ipynb failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                            f"(executed notebook kept at {output})") from None
    return output
