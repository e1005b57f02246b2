"""``workbench init DIR``: a starter study in a folder of its own, from the studies the
workbench ships (``params/*.yaml``), with every template and script it reads copied
beside it, so the user edits their own copy and the study runs wherever it is kept
(inside a checkout or with only the installed package)."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from workbench.errors import InputError, UnknownNameError
from workbench.resources import shipped

STUDY_FILE = "study.yaml"


def examples() -> dict[str, Path]:
    """The shipped example studies by name (every params/*.yaml that names a world kind or cells)."""
    out = {}
    for path in sorted(shipped("params").glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            continue
        if isinstance(raw, dict) and ("cells" in raw or "grid" in raw):
            out[path.stem] = path
    return out


def _inputs_under(root: Path, example: Path) -> list[Path]:
    """Every shipped file or folder under ``root`` that the example study reads: its cells'
    template folders, the kind's design files (scripts, task data) and a monitor's prompt."""
    from workbench.params import load_study, monitor_prompt_path

    study = load_study(example)
    kind = study.kind
    found: set[Path] = set()
    for cell in study.cells:
        found.add(kind.template_root(cell.spec, study.base_dir))
        found.update(kind.design_files(cell.spec, study.base_dir))
    if study.monitor is not None:
        found.add(monitor_prompt_path(study.path, study.monitor))
    inside = []
    for path in found:
        try:
            path.resolve().relative_to(root)
        except ValueError:
            continue  # package data (domains, profiles): read from the package, not copied
        inside.append(path.resolve())
    return sorted(inside)


def write_starter(folder: str | Path, example: str = "smoke") -> list[Path]:
    """Write ``folder/study.yaml`` (a copy of the example) and the inputs it reads, at the same
    relative paths; refuses a folder that already holds files. Returns what was written."""
    known = examples()
    if example not in known:
        raise UnknownNameError(f"--example {example!r}: no such shipped study; expected one of {', '.join(known)}")
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(f"{folder} already exists and is not an empty folder; init writes only into a new one")
    root = shipped("params").resolve()
    inputs = _inputs_under(root, known[example])
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / STUDY_FILE]
    shutil.copyfile(known[example], written[0])
    for source in inputs:
        target = folder / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, target)
        written.append(target)
    return written
