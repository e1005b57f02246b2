"""A dependency-free lexical embedder (numpy only): hashed word and character features.

Why this shape: the recall world needs similarity that tracks shared *content words*
("deadline", "penicillin") and keeps numbers and dates distinct ("July 22, 2026" and
"July 29, 2026" share the month and year but not the day). So:

- tokens are lowercase words and numbers (``2026``, ``22``, ``3.5``); common function
  words are dropped (unless nothing else is left), and a crude suffix stripper folds
  "deadlines"/"deadline" and "corrected"/"correct";
- features are word unigrams (weight 1), adjacent-word bigrams (0.5) and character
  trigrams of each word (0.25 in total per word), so that word order and morphology
  count a little without swamping the words themselves;
- each feature goes to a bucket by CRC-32 of its text (stable across processes and
  machines, unlike Python's salted ``hash()``), counts are damped (1 + log tf) and the
  vector is L2-normalised. Every entry is non-negative, so cosines lie in [0, 1].
"""
from __future__ import annotations

import math
import re
import zlib
from collections import defaultdict

import numpy as np

_TOKEN = re.compile(r"\d+(?:[.,:/]\d+)*|[^\W\d_]+(?:['\u2019][^\W\d_]+)*")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves let lets us""".split()
)

_SUFFIXES = ("ies", "ing", "ed", "es", "ly", "s")

UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
TRIGRAM_WEIGHT = 0.25  # shared by all the trigrams of one word


def stem(word: str) -> str:
    """Strip one common English suffix, keeping at least three letters; numbers untouched."""
    if word[0].isdigit():
        return word
    word = word.replace("'", "").replace("\u2019", "")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "ies":
                return word[:-3] + "y"
            if suffix == "es" and not word.endswith(("ses", "xes", "zes", "ches", "shes")):
                continue  # "deadlines" -> "deadline" (by the "s" rule), but "boxes" -> "box"
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word  # "class", "status", "analysis"
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Content tokens of a text, stemmed; all tokens when the text is only function words.

    Numbers keep their inner separators ("3.5", "10:30", "22/07/2026") and a thousands
    comma ("1,000"); a trailing comma ("22, 2026") ends the number.
    """
    words = [m.group(0) for m in _TOKEN.finditer(text.lower())]
    content = [w for w in words if w not in STOPWORDS]
    return [stem(w) for w in (content or words)]


def features(text: str) -> dict[str, float]:
    """Weighted feature counts: ``w:`` unigrams, ``b:`` bigrams, ``c:`` character trigrams."""
    toks = tokens(text)
    feats: defaultdict[str, float] = defaultdict(float)
    for tok in toks:
        feats[f"w:{tok}"] += UNIGRAM_WEIGHT
        padded = f"<{tok}>"
        grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
        for gram in grams:
            feats[f"c:{gram}"] += TRIGRAM_WEIGHT / len(grams)
    for left, right in zip(toks, toks[1:]):
        feats[f"b:{left} {right}"] += BIGRAM_WEIGHT
    if not feats:
        feats["w:<empty>"] = UNIGRAM_WEIGHT  # every empty text is the same (unit) vector
    return feats


def bucket(feature: str, dim: int) -> int:
    return zlib.crc32(feature.encode("utf-8")) % dim


class LexicalEmbedder:
    """Hashed lexical features; see the module docstring for why each choice was made."""

    def __init__(self, dim: int = 1024) -> None:
        if not isinstance(dim, int) or dim < 16:
            raise ValueError(f"dim must be an integer >= 16, got {dim!r}")
        self.dim = dim
        self.name = "lexical-v1" if dim == 1024 else f"lexical-v1-d{dim}"

    def embed_one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float64)
        for feat, weight in sorted(features(text).items()):
            # Damped counts: a word said five times is not five times as relevant.
            # Weights below 1 (trigram shares) are kept linear, which log would make negative.
            vec[bucket(feat, self.dim)] += 1.0 + math.log(weight) if weight > 1.0 else weight
        return vec / np.linalg.norm(vec)

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, text in enumerate(texts):
            out[i] = self.embed_one(text)
        return out

    def __repr__(self) -> str:
        return f"LexicalEmbedder(dim={self.dim})"
