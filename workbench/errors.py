"""The errors a user can act on, under one base class.

The command line prints any :class:`WorkbenchError` as one line (``error: ...``)
and exits 2; a notebook shows the same message. Each subclass also derives from
the builtin it used to be (``ValueError`` for bad input, ``RuntimeError`` for a
missing tool), so code that caught those keeps working. Import-free, so every
layer may raise them.
"""
from __future__ import annotations


class WorkbenchError(Exception):
    """Something the user can fix; the message says what, and where."""

    exit_code = 2


class InputError(WorkbenchError, ValueError):
    """A bad file or field: a study, catalogue, template, script, lock."""


class SetupError(WorkbenchError, RuntimeError):
    """Something the machine lacks: a sandbox, a model's weights, a browser asset, a server."""


class UnknownNameError(InputError, KeyError):
    """A name the user gave (a cell, a world, a profile, a model, a task) that is not there;
    the message lists the names that are."""

    def __str__(self) -> str:  # a KeyError would quote its message
        return str(self.args[0]) if self.args else ""


class MissingFileError(WorkbenchError, FileNotFoundError):
    """A file or folder the user named (a run directory, a study's templates) that is not there."""
