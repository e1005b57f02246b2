"""The wheel does the main job outside the checkout: built from the project's files, installed
into a fresh virtual environment in a folder of its own, it writes a starter study, runs it,
reports on it, writes the static viewer and exports Inspect logs, all from the package's own
shipped notebooks, templates and params (nothing of the checkout is on its path).

The fresh environment gets the wheel alone (``--no-deps``); its dependencies are read from the
project's .venv through a path entry (a ``.pth`` line: the .venv's own ``.pth`` files, among them
the editable install's finder, are not run), so the test does not download 1.3 GB of packages.
The data files those packages install beside their code (nbconvert's HTML templates under
``share/jupyter``) are found through ``JUPYTER_PATH``, as a full install would find them in its
own prefix.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT, copy_checkout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; returns its bin folder."""
    base = tmp_path_factory.mktemp("wheel")
    source = copy_checkout(base / "source")  # the wheel is built from what a clone has
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base / "dist"), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    wheel = next((base / "dist").glob("stigmergy_workbench-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    res = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    # written after the install: pip must not see the .venv's editable workbench as this environment's
    # (pip run from the .venv with --prefix uninstalls it there)
    (purelib / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert (Path(sys.prefix) / "bin" / "workbench").exists(), "the checkout's .venv lost its workbench"
    return venv / "bin"


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    data = home / "jupyter-data"  # nbconvert's templates only: not the .venv's kernel specs
    data.mkdir(exist_ok=True)
    if not (data / "nbconvert").exists():
        (data / "nbconvert").symlink_to(Path(sys.prefix) / "share" / "jupyter" / "nbconvert")
    return {**env, "HOME": str(home), "WORKBENCH_KINDS": "", "JUPYTER_PATH": str(data)}


def test_the_wheel_carries_notebooks_templates_params_and_profiles(installed: Path) -> None:
    python = installed / "python"
    probe = ("import workbench, workbench.resources as r, json; print(json.dumps({'file': workbench.__file__, "
             "'wheel': r.installed_from_wheel(), 'root': str(r.shipped_root())}))")
    got = json.loads(subprocess.run([str(python), "-c", probe], check=True, capture_output=True, text=True,
                                    cwd=installed.parent, env=_env(installed.parent)).stdout)
    assert got["wheel"] and not got["file"].startswith(str(ROOT)) and got["file"].startswith(str(installed.parent))
    root = Path(got["root"])
    for name in ("notebooks/report.ipynb", "notebooks/analysis.ipynb", "params/smoke.yaml", "params/models.yaml",
                 "params/prompts/stigmergy/system.txt", "params/prompts/collusion/system.txt"):
        assert (root / name).is_file(), name
    package = Path(got["file"]).parent
    assert (package / "publish/templates/workbench_report/index.html.j2").is_file()
    assert (package / "worlds/stigmergy/profiles/twins.yaml").is_file()


def test_init_run_report_view_export_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    workbench = str(installed / "workbench")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _env(tmp_path / "home")

    def ok(*args: str, timeout: int = 600) -> str:
        res = subprocess.run([workbench, *args], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, f"workbench {' '.join(args)} (rc {res.returncode}):\n{(res.stdout + res.stderr)[-3000:]}"
        return res.stdout + res.stderr

    ok("init", "study")
    assert (work / "study/study.yaml").is_file() and (work / "study/prompts/stigmergy/system.txt").is_file()
    ok("run", "study/study.yaml", "--out", "out", "--max-worlds", "8")
    manifest = json.loads((work / "out/manifest.json").read_text())
    assert str(ROOT) not in json.dumps(manifest["templates"] if "templates" in manifest else manifest)
    ok("report", "out")
    assert "<html" in (work / "out/report.html").read_text(encoding="utf-8")[:2000].lower()
    ok("view", "out", "--static", "site")
    assert (work / "site/index.html").is_file() and list((work / "site/worlds").rglob("*.html"))
    ok("export", "inspect", "out", "--out", "inspect")
    assert list((work / "inspect").glob("*.json")) or list((work / "inspect").glob("*.eval"))

    # a study kept outside any checkout, with no prompts: field and no templates beside it, runs on the
    # shipped templates (the default it never wrote); a prompts: field it did write is taken as written
    (work / "bare").mkdir()
    (work / "bare/study.yaml").write_text((work / "study/study.yaml").read_text())
    ok("run", "bare/study.yaml", "--out", "bare-out", "--max-worlds", "2")
    (work / "typo").mkdir()
    (work / "typo/study.yaml").write_text((work / "study/study.yaml").read_text().replace(
        "defaults:\n", "defaults:\n  prompts: prompt/stigmergy\n"))
    res = subprocess.run([workbench, "validate", "typo/study.yaml"], cwd=work, env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "prompts" in res.stderr and "does not exist" in res.stderr
