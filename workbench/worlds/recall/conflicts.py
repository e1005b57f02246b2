"""Conflict detection without the script's fact ids (the cell field ``conflicts``).

Invalidation removes a lower-authority entry that *conflicts* with a higher-authority
one. The shipped scripts give every statement a ``fact_id``, and the ``oracle`` detector
(the store's own rule, :mod:`workbench.stores.vector`) decides by those ids: a detector
no real memory system has. The detectors here see only what a memory system would: each
entry's text, the value extracted from its text (by rule, or by the judge model under
``values: judge``; never the script's declared value) and its embedding. A
:class:`Statement` has no fact id, so no detector can read one.

The rules (also in :data:`RULES`, which the report shows):

- **different value** (every detector but the judge): both statements state a value, the
  values share a kind (a date with a date, an amount with an amount of the same unit, a
  name with a name) and neither's set of values holds the other's.
- ``lexical``: the statements are about the same fact when the *topic words* they share
  are at least ``conflict_overlap`` of the shorter one's topic words (topic words: content
  words of three letters or more, crudely stemmed, less stop words, value words such as
  numbers, months and capitalised names, and update cues such as "now", "revised",
  "updated"); they conflict when, besides, their values differ.
- ``embedding``: the cell's embedder puts the two at cosine >= ``conflict_similarity``,
  and their values differ.
- ``judge``: the judge model is asked, for each of the ``conflict_candidates`` live
  entries most similar to the newcomer (by the cell's embedder), whether the two
  statements give different values for the same fact (templates ``conflict_system`` and
  ``conflict``); YES conflicts, anything else does not. The simulated judge
  (``sim-recall/judge``) answers by :func:`simulated_judge_rule`.

Each decision is recorded with the script's truth (:func:`truth`): both entries carry
the same fact id and their recorded values conflict (the oracle's rule), so
precision and recall against the ids can be computed from the records
(:func:`workbench.worlds.recall.invalidation.detection_table`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.stores.vector import VALUE_SEP, normalise_text
from workbench.worlds.recall.values import _MONTHS, content_words, value_tokens

DETECTORS: tuple[str, ...] = ("oracle", "lexical", "embedding", "judge")

RULES: dict[str, str] = {
    "oracle": "the script's fact ids: two entries with the same fact id whose values (declared by the script, else "
              "found by rule) conflict; without a fact id, cosine >= conflict_similarity and a different value",
    "lexical": "shared topic words >= conflict_overlap of the shorter statement's, and a different value of the "
               "same kind (extracted from the text)",
    "embedding": "the cell's embedder's cosine >= conflict_similarity, and a different value of the same kind "
                 "(extracted from the text)",
    "judge": "the judge model answers YES to 'do these two statements give different values for the same fact?', "
             "asked about the conflict_candidates most similar live entries",
}

#: words that announce a change rather than name a topic ("now", "revised", "updated", ...)
_CUES = frozenset("""now instead correct corrected correction change changed moved revise revised update updated
amend amended replace replaced supersed superseding superseded lower lowered raise raised increase increased reduce
reduced new latest current earlier previou previous note memory shared saving noting""".split())


@dataclass(frozen=True)
class Statement:
    """What a detector may read of an entry: no fact id, by construction."""

    entry_id: int
    text: str
    value: str | None  # extracted from the text (rule or judge), canonical; never the script's declaration
    vector: Any  # its embedding (a unit vector: a sequence of floats)


_POSSESSIVE = re.compile(r"'s?$")


def topic_words(text: str) -> frozenset[str]:
    """The words that say what a statement is about (module docstring); possessives read
    as their noun ("counsel's" as "counsel")."""
    values = {_POSSESSIVE.sub("", v) for v in value_tokens(text)}
    words = {_POSSESSIVE.sub("", w) for w in content_words(text)}
    return frozenset(w for w in words if len(w) >= 3 and w not in values and w not in _MONTHS and w not in _CUES)


def overlap(a: str, b: str) -> float:
    """The share of the shorter statement's topic words that the other holds (0 when either has none)."""
    ta, tb = topic_words(a), topic_words(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / min(len(ta), len(tb))


def _parts(value: str | None) -> frozenset[str]:
    if not value:
        return frozenset()
    return frozenset(p for p in (normalise_text(x) for x in value.split(VALUE_SEP)) if p)


def value_kind(part: str) -> str:
    """``date``, ``num|UNIT`` (an amount and its unit) or ``name``: what a value can be compared with."""
    kind, _, rest = part.partition(":")
    if kind == "num":
        return "num|" + rest.partition("|")[2]
    return kind


def values_differ(a: str | None, b: str | None) -> bool:
    """Both state a value, of a common kind, and neither's values hold the other's."""
    pa, pb = _parts(a), _parts(b)
    if not pa or not pb or not {value_kind(p) for p in pa} & {value_kind(p) for p in pb}:
        return False
    return not (pa <= pb or pb <= pa)


def lexical(new: Statement, old: Statement, threshold: float) -> tuple[bool, float]:
    """(conflict, overlap) by the lexical rule."""
    share = overlap(new.text, old.text)
    return share >= threshold and values_differ(new.value, old.value), share


def embedding(new: Statement, old: Statement, threshold: float) -> tuple[bool, float]:
    """(conflict, cosine) by the embedding rule."""
    cos = cosine(new.vector, old.vector)
    return cos >= threshold and values_differ(new.value, old.value), cos


def cosine(a: Any, b: Any) -> float:
    """Cosine of two embeddings (unit length, so a dot product)."""
    return float(np.dot(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)))


def truth(fact_a: str | None, value_a: str | None, fact_b: str | None, value_b: str | None) -> bool:
    """The script's answer: the same fact id, and recorded values that conflict (both stated,
    neither set holding the other: the store's oracle rule)."""
    if fact_a is None or fact_b is None or fact_a != fact_b:
        return False
    pa, pb = _parts(value_a), _parts(value_b)
    return bool(pa) and bool(pb) and not (pa <= pb or pb <= pa)


# -- the judge ---------------------------------------------------------------------------
_YES = re.compile(r"(?i)^\W*(yes|no)\b")


def judge_answer(reply: str | None) -> bool | None:
    """YES -> True, NO -> False, anything else -> None (counted as no conflict)."""
    m = _YES.match(reply or "")
    return None if m is None else m.group(1).lower() == "yes"


def judge_messages(t: Any, *, first: str, second: str) -> list[dict[str, str]]:
    """The judge's prompt for one pair (templates ``conflict_system`` and ``conflict``);
    the rendered text is recorded with the step."""
    one = " ".join(str(first).split())
    two = " ".join(str(second).split())
    return [{"role": "system", "content": t.render("conflict_system").rstrip("\n")},
            {"role": "user", "content": t.render("conflict", first=one, second=two).rstrip("\n")}]


_BIGRAM_SPLIT = re.compile(r"[^A-Za-z'-]+")


def _topic_bigrams(text: str) -> set[tuple[str, str]]:
    """Adjacent pairs of topic words in the text's word order ("settlement offer")."""
    topics = topic_words(text)
    seq = [w for w in (x.lower().strip("'-") for x in _BIGRAM_SPLIT.split(text)) if w]
    from workbench.worlds.recall.values import _stem

    stems = [_stem(w) for w in seq]
    kept = [s for s in stems if s in topics]
    return set(zip(kept, kept[1:]))


def simulated_judge_rule(first: str, second: str) -> bool:
    """The simulated judge's reading (sim-recall/judge): the same fact when the statements
    share a topic phrase (two topic words adjacent in both, "settlement offer") or half the
    shorter's topic words; different values as :func:`values_differ` on the values the rule
    finds (a correction's new value). Simulated behaviour, not a model's."""
    from workbench.worlds.recall.values import rule_value

    same = bool(_topic_bigrams(first) & _topic_bigrams(second)) or overlap(first, second) >= 0.5
    return same and values_differ(rule_value(first), rule_value(second))


__all__ = ["DETECTORS", "RULES", "Statement", "cosine", "embedding", "judge_answer", "judge_messages", "lexical",
           "overlap", "simulated_judge_rule", "topic_words", "truth", "value_kind", "values_differ"]
