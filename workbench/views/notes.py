"""A note every caption of the report being rendered carries.

A report is one notebook process rendering one run set; when that run set is an
uncalibrated rehearsal (``rehearsal: uncalibrated``: its simulated agents could
not read its prompts as they were fitted to), every table and figure says so under
it, not only the banner at the top, since tables are copied out of reports alone.
:class:`~workbench.views.run_report.RunReport` sets it when it is made."""
from __future__ import annotations

_NOTE = [""]


def set_caption_note(text: str) -> None:
    _NOTE[0] = text


def caption_note() -> str:
    return _NOTE[0]
