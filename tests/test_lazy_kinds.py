"""Loading a study imports only its own world kind: the others (and numpy, which the
recall kind's vector store needs) are imported only when a route names one of their
simulated agents. Run in a fresh interpreter, since this test process has them all."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import MONITOR_PROMPT, study_dict

CODE = """
import json, sys
from workbench.params import load_study
study = load_study(sys.argv[1])
print(json.dumps({"cells": len(study.cells),
                  "loaded": sorted(m for m in ("workbench.worlds.recall", "workbench.worlds.collusion", "numpy")
                                   if m in sys.modules)}))
"""


def _load(tmp_path: Path, name: str, **overrides: object) -> dict:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study_dict(name=name, **overrides)))
    out = subprocess.run([sys.executable, "-c", CODE, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_shared_store_study_imports_no_other_kind(tmp_path: Path) -> None:
    assert _load(tmp_path, "plain") == {"cells": 1, "loaded": []}


def test_another_kinds_simulated_route_is_found_when_named(tmp_path: Path) -> None:
    got = _load(tmp_path, "monitored", monitor={"model": "sim-collusion/steadfast", "prompt": str(MONITOR_PROMPT)})
    assert got["cells"] == 1 and "workbench.worlds.collusion" in got["loaded"]
