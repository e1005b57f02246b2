"""Scoring a recall: normalised exact (substring) match against the accepted
answers, and reading a judge's verdict. Pure functions of text, so the
metrics can re-score recorded answers without any model."""
from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")
_ANSWER_PREFIX = re.compile(r"(?i)^\s*(final answer|answer)\s*[:\-]\s*")
_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.IGNORECASE)


def normalise(text: str) -> str:
    """Case, accents, punctuation and runs of whitespace removed: "July 22, 2026." -> "july 22 2026"."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = _PUNCT.sub(" ", t)
    return _SPACE.sub(" ", t).strip()


def answer_text(reply_text: str | None) -> str | None:
    """The recall answer in a reply: the text without a leading "Answer:"; None when empty."""
    if reply_text is None:
        return None
    t = _ANSWER_PREFIX.sub("", reply_text.strip()).strip()
    return t or None


def exact_match(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> bool:
    """True when some accepted answer, normalised, occurs in the normalised answer as a
    run of whole words ("5 mg" is not found in "25 mg"). The same rule by which the
    script loader checks that every recall is answerable, so the two never disagree."""
    from workbench.worlds.recall.scripts import answer_matches

    return bool(answer) and answer_matches(answer or "", ground_truth)


def judge_verdict(reply_text: str | None) -> bool | None:
    """A judge's verdict: the first CORRECT/INCORRECT word; None when there is none."""
    if not reply_text:
        return None
    m = _VERDICT.search(reply_text)
    if m is None:
        return None
    return m.group(1).upper() == "CORRECT"
