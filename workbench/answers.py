"""Answer matching rules. The source paper's two implementations used different
rules; both are implemented so any run can be re-scored under the other."""
from __future__ import annotations

import json
import re
from typing import Any

ANSWER_RULES: tuple[str, ...] = ("one-integer", "exact")
_INT = re.compile(r"-?[0-9]+")  # ASCII digits only: "٤٢" is not the integer 42


def answer_text(answer: Any) -> str:
    """How a submitted JSON value reads as text (strings as-is, others as JSON)."""
    if isinstance(answer, str):
        return answer
    try:
        return json.dumps(answer, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(answer)


def is_correct(answer: Any, expected: int, rule: str) -> bool:
    """``one-integer``: the answer holds exactly one integer and it is right.
    ``exact``: the whole answer, stripped, is the number's decimal text.
    A float such as 42.0 is not exact (recorded as-is, decided by the rule)."""
    text = answer_text(answer)
    if rule == "one-integer":
        found = _INT.findall(text)
        return len(found) == 1 and int(found[0]) == expected
    if rule == "exact":
        return text.strip() == str(expected)
    raise ValueError(f"unknown answer rule {rule!r}; expected one of {ANSWER_RULES}")
