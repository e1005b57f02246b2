"""The build step pyproject.toml cannot declare: a wheel carries a copy of the checkout's
``notebooks/`` and ``params/`` under ``workbench/_shipped`` (read through
:mod:`workbench.resources`), so an installed workbench runs, reports and exports with no
checkout. An editable install copies nothing: it reads the checkout's own folders."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("notebooks", "params")  # the folders a wheel copies; the names workbench.resources.shipped takes
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


class BuildWithShipped(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SHIPPED:
            source = HERE / name
            if not source.is_dir():  # an sdist made without MANIFEST.in's grafts
                raise SystemExit(f"setup.py: {source} is missing; a wheel must carry it")
            target = Path(self.build_lib) / "workbench" / "_shipped" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=SKIP)


setup(cmdclass={"build_py": BuildWithShipped})
