"""Shared helpers: studies written into tmp_path that use the shipped templates."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "params" / "prompts" / "stigmergy"
MONITOR_PROMPT = ROOT / "params" / "prompts" / "monitor" / "default.txt"


def study_dict(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "world": "stigmergy", "name": "t", "seed": 11, "worlds_per_cell": 2,
        "defaults": {"prompts": str(PROMPTS)}, "cells": [{"model": "sim/diligent"}],
    }
    base.update(overrides)
    return base


@pytest.fixture
def write_study(tmp_path: Path):
    def _write(spec: dict[str, Any] | str, name: str = "study.yaml") -> Path:
        path = tmp_path / name
        path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
        return path
    return _write


def scripted(agents: dict[str, Any], **cell: Any) -> dict[str, Any]:
    """A one-world study whose single cell is scripted per role."""
    return study_dict(cells=[{"model": "scripted", "agents": agents, **cell}], worlds_per_cell=1)


def make_study(tmp_path: Path, cells: list[dict[str, Any]], *, defaults: dict[str, Any] | None = None,
               worlds: int = 1, seed: int = 7, name: str = "study"):
    """Write a study with the shipped templates into tmp_path and load it."""
    from workbench.params import load_study

    doc = {"world": "stigmergy", "name": name, "seed": seed, "worlds_per_cell": worlds,
           "defaults": {"prompts": str(PROMPTS), **(defaults or {})}, "cells": cells}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_study(path)


def run_world(study_path: Path, cell_index: int = 0, world_index: int = 0):
    from workbench.params import load_study
    from workbench.study import run_one_world

    study = load_study(study_path)
    return asyncio.run(run_one_world(study, study.cells[cell_index], world_index))


def copy_checkout(dest: Path) -> Path:
    """The checkout's files as a clone would have them (tracked and new, not ignored) under ``dest``."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def run_closing(coro: Any) -> Any:
    """Run ``coro`` on a fresh event loop, closing the litellm clients it opened (their
    connections belong to that loop) however it ends."""
    from workbench.models.litellm_client import aclose_clients

    async def go() -> Any:
        try:
            return await coro
        finally:
            await aclose_clients()

    return asyncio.run(go())


@pytest.fixture(scope="session")
def shipped_report(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``shipped_report("params/demo.yaml")``: the path of that shipped study's report, run
    and published once per session (each takes 5-15 s; the findings and browser tests read
    the same reports). A test that publishes one again writes its output elsewhere."""
    from workbench.params import load_study
    from workbench.publish.report import make_report
    from workbench.study import run_study

    made: dict[str, Path] = {}

    def report(params: str) -> Path:
        if params not in made:
            out = tmp_path_factory.mktemp("shipped") / Path(params).stem
            run_study(load_study(ROOT / params), out, progress=False)
            made[params] = make_report(out, timeout_s=600)
        return made[params]

    return report
