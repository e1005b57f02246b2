"""Answer matching rules. The source paper's two implementations used different
rules; both are implemented so any run can be re-scored under the other."""
from __future__ import annotations

import re
from typing import Any

from workbench.errors import InputError
from workbench.records import json_text as answer_text  # noqa: F401  (re-exported: how an answer reads)

ANSWER_RULES: tuple[str, ...] = ("one-integer", "exact")
_INT = re.compile(r"-?[0-9]+")  # ASCII digits only: "٤٢" is not the integer 42
MINUS_SIGN = "\u2212"  # "−31" is minus thirty-one, as a model typesetting maths writes it


def is_correct(answer: Any, expected: int, rule: str) -> bool:
    """``one-integer``: the answer holds exactly one run of ASCII digits, with an
    optional minus sign, and it is right ("42.0" holds two, so it is wrong; "[42]"
    and "about 42" hold one). ``exact``: the whole answer, stripped, is the number's
    decimal text ("+42", "42.0" and "042" are not exact). Under both rules U+2212
    MINUS SIGN reads as "-"; non-ASCII digits are not digits. JSON values are read
    as their JSON text (42.0 is "42.0", [42] is "[42]")."""
    text = answer_text(answer).replace(MINUS_SIGN, "-")
    if rule == "one-integer":
        found = _INT.findall(text)
        return len(found) == 1 and int(found[0]) == expected
    if rule == "exact":
        return text.strip() == str(expected)
    raise InputError(f"unknown answer rule {rule!r}; expected one of {ANSWER_RULES}")
