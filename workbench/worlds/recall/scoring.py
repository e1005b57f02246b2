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


def matched_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> str | None:
    """The accepted answer that the exact rule found in ``answer`` (the first, in the
    script's order); None when none was found."""
    from workbench.worlds.recall.scripts import answer_matches

    if not answer:
        return None
    return next((a for a in ground_truth if answer_matches(answer, [a])), None)


def _tokens(text: str) -> list[str]:
    from workbench.worlds.recall.scripts import normalise_answer

    return normalise_answer(text).split()


def partial_score(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> float:
    """The best share, over the accepted answers, of an accepted answer's normalised
    words that occur in the answer (each word counted as often as the accepted answer
    has it): 1.0 when one accepted answer's words are all there (so always when the
    exact rule matches), 0.0 for no answer. "September 30, 2026" against "October 7,
    2026" scores 1/3 (the year)."""
    if not answer:
        return 0.0
    from collections import Counter

    have = Counter(_tokens(answer))
    best = 0.0
    for acc in ground_truth:
        need = Counter(_tokens(acc))
        total = sum(need.values())
        if total:
            best = max(best, sum(min(n, have[w]) for w, n in need.items()) / total)
    return round(best, 6)


def score_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> dict[str, object]:
    """The exact-match fields of one recall record: ``correct_exact``, ``matched``
    (the accepted answer found, or None) and ``partial_score`` (see :func:`partial_score`)."""
    matched = matched_answer(answer, ground_truth)
    score = 1.0 if matched is not None else partial_score(answer, ground_truth)
    return {"correct_exact": matched is not None, "matched": matched, "partial_score": score}


def judge_verdict(reply_text: str | None) -> bool | None:
    """A judge's verdict: the first CORRECT/INCORRECT word; None when there is none."""
    if not reply_text:
        return None
    m = _VERDICT.search(reply_text)
    if m is None:
        return None
    return m.group(1).upper() == "CORRECT"
