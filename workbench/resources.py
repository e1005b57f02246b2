"""The files the workbench ships beside its code: notebooks, report templates, default
prompt templates, model catalogues, example studies and recall scripts.

In a checkout they are the repository's ``notebooks/`` and ``params/`` (where a
researcher edits them); a wheel carries a copy of both under ``workbench/_shipped``
(made by ``setup.py`` at build time), so an installed workbench runs a study,
reports and exports with no checkout. Everything that reads a shipped file asks
:func:`shipped` for it, so both layouts resolve the same names.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

BUNDLE = "_shipped"  # the folder inside the installed package that holds the copies


def shipped_root() -> Path:
    """The folder that holds ``notebooks/`` and ``params/``: the package's bundled copy where
    it was installed from a wheel, else the checkout the package sits in."""
    package = Path(str(files("workbench")))
    bundled = package / BUNDLE
    return bundled if bundled.is_dir() else package.parent


def shipped(*parts: str) -> Path:
    """A shipped file or folder, e.g. ``shipped("params", "prompts", "stigmergy")``."""
    return shipped_root().joinpath(*parts)


def installed_from_wheel() -> bool:
    """Whether the shipped files are the package's bundled copy (no checkout around it)."""
    return (Path(str(files("workbench"))) / BUNDLE).is_dir()


def study_path(base_dir: str | Path, value: str, *, explicit: bool) -> Path:
    """A folder or file a study names relative to its params file (``prompts:``, ``scripts:``).

    A value the study wrote (``explicit``) is taken as written, existing or not, so a typo
    is reported rather than papered over. A default the study never wrote, missing beside
    the study, is the shipped copy of the same name: a study kept outside the repository
    runs on the shipped templates without naming them. Records hash the content either way.
    """
    path = (Path(base_dir) / value).resolve()
    if explicit or path.exists() or Path(value).is_absolute():
        return path
    fallback = shipped("params", value).resolve()
    return fallback if fallback.exists() else path
