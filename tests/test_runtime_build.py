"""The one test that compiles: `workbench models build-runtime` builds llama.cpp for this CPU
(about 6 minutes on 2 idle cores) into the runtime cache, and the build it leaves is whole,
says what it was built from, is chosen by `runtime: auto`, and imports in a fresh process from
the build's own folder. Marked slow: `make bench` runs it (before the local-model benchmark,
which is measured on this build); `make test` does not, so no cache decides whether the suite
passes. Where the build is already cached the command returns at once and the checks still hold."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_build_runtime_compiles_a_native_build_that_is_chosen_and_imports():
    pytest.importorskip("xllamacpp", reason="the [local] extra is not installed")
    from workbench.local import runtime as R

    res = subprocess.run([sys.executable, "-m", "workbench", "models", "build-runtime"], capture_output=True, text=True,
                         timeout=3600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    folder = R.native_build()
    assert folder is not None and str(folder) in res.stdout
    built = json.loads((folder / R.MARKER).read_text())
    assert built["version"] == R.installed_version() and built["cpu_key"] == R.cpu_key() and built["ggml_native"]
    assert R.choose("auto").kind == "native"
    probe = (f"import sys; sys.path.insert(0, {str(folder)!r}); import {R.PACKAGE} as x; "
             f"print(x.__file__)")
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert got.returncode == 0 and got.stdout.strip().startswith(str(folder)), got.stderr[-2000:]
