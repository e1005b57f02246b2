"""The project's Jupyter kernel spec, installed into the virtual environment with
the offline litellm settings in its environment (see STACK-NOTES)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

KERNEL_NAME = "workbench"
KERNEL_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "PYTHONUNBUFFERED": "1",
}


def kernel_dir(prefix: str | Path = sys.prefix) -> Path:
    return Path(prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME


def install_kernel(prefix: str | Path = sys.prefix) -> Path:
    """Install (or refresh) the kernel spec under ``prefix`` and return its folder."""
    from ipykernel.kernelspec import install

    path = Path(install(kernel_name=KERNEL_NAME, display_name="Python (workbench)", prefix=str(prefix)))
    spec_file = path / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["argv"][0] = sys.executable  # this environment's interpreter, not whatever is first on PATH
    spec["env"] = {**spec.get("env", {}), **KERNEL_ENV}
    spec_file.write_text(json.dumps(spec, indent=1) + "\n")
    return path


def kernel_installed(prefix: str | Path = sys.prefix) -> bool:
    spec = kernel_dir(prefix) / "kernel.json"
    if not spec.exists():
        return False
    env = json.loads(spec.read_text()).get("env", {})
    return all(env.get(k) == v for k, v in KERNEL_ENV.items())
