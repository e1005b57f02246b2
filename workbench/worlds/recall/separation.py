"""What the embedder can tell apart: the similarity between the stale and the current
statements of each recalled fact (issue 42, part 5).

Retrieval ranks by α·similarity + β·authority + γ·recency. When the embedder puts a
superseded statement ("the deadline is July 22, 2026") and its correction ("the deadline
is now July 29, 2026") at cosine 0.99, similarity cannot separate them, and which one an
agent sees rests on recency and authority alone. This module says, per script and
embedder, how close those statements are; the world records its rows (``separation`` in
the world record) so the report, which reads records only, can show them.

:func:`separation_rows` is a pure function of a script and an embedder. For each recall
of the script, the statements about its target fact said before it (the case-file fact
and every statement turn with that ``fact_id``) are split into *current* (states an
accepted answer, by the exact rule) and *stale* (states a value, by the rule, and no
accepted answer); each distinct (stale, current) pair of texts is a row with the cosine
between them and each one's cosine to the recall query."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.worlds.recall.scoring import exact_match
from workbench.worlds.recall.values import rule_value

#: one row of the table (the world record's ``separation`` items)
COLUMNS = ("embedder", "script_id", "domain", "recall_turn", "failure_mode", "fact_id", "stale_turn", "stale",
           "current_turn", "current", "similarity", "query_stale", "query_current")


def stale_current_pairs(script: Any) -> list[dict[str, Any]]:
    """Per recall of the script: (stale, current) statement pairs about its target fact, said
    before it (module docstring); each {recall_turn, failure_mode, fact_id, query, stale_turn,
    stale, current_turn, current}. Distinct text pairs only (repeats of a stale value are one)."""
    facts = {f.id: f.text for f in script.initial_facts}
    out: list[dict[str, Any]] = []
    for recall in (t for t in script.turns if t.is_recall):
        fact = recall.target_fact_id
        said = [(0, facts[fact])] if fact in facts else []
        said += [(t.turn, t.content) for t in script.turns
                 if not t.is_recall and t.fact_id == fact and t.turn < recall.turn]
        truth = list(recall.ground_truth)
        current = [(n, x) for n, x in said if exact_match(x, truth)]
        stale = [(n, x) for n, x in said if not exact_match(x, truth) and rule_value(x) is not None]
        seen: set[tuple[str, str]] = set()
        for sn, s in stale:
            for cn, c in current:
                if (s, c) in seen:
                    continue
                seen.add((s, c))
                out.append({"recall_turn": recall.turn, "failure_mode": recall.failure_mode, "fact_id": fact,
                            "query": recall.recall_query or "", "stale_turn": sn, "stale": s, "current_turn": cn,
                            "current": c})
    return out


def separation_rows(script: Any, embedder: Any) -> list[dict[str, Any]]:
    """:func:`stale_current_pairs` with the embedder's cosines: ``similarity`` (stale against
    current), ``query_stale`` and ``query_current`` (the recall query against each), rounded
    to 6 places; ``embedder`` is the embedder's name."""
    pairs = stale_current_pairs(script)
    if not pairs:
        return []
    texts = list(dict.fromkeys(t for p in pairs for t in (p["query"], p["stale"], p["current"])))
    vecs = np.asarray(embedder.embed(texts), dtype=np.float64)
    at = {t: vecs[i] for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        return round(float(at[a] @ at[b]), 6)

    name = getattr(embedder, "name", type(embedder).__name__)
    return [{"embedder": name, "script_id": script.script_id, "domain": script.domain,
             **{k: p[k] for k in ("recall_turn", "failure_mode", "fact_id", "stale_turn", "stale", "current_turn",
                                  "current")},
             "similarity": cos(p["stale"], p["current"]), "query_stale": cos(p["query"], p["stale"]),
             "query_current": cos(p["query"], p["current"])} for p in pairs]


_CACHE: dict[tuple[str, str, str], list[dict[str, Any]]] = {}


def cached_rows(script: Any, embedder: Any, key: str) -> list[dict[str, Any]]:
    """:func:`separation_rows`, once per (script id, ``key`` (the script file's hash), embedder) per process."""
    k = (script.script_id, key, getattr(embedder, "name", type(embedder).__name__))
    if k not in _CACHE:
        _CACHE[k] = separation_rows(script, embedder)
    return [dict(r) for r in _CACHE[k]]


__all__ = ["COLUMNS", "cached_rows", "separation_rows", "stale_current_pairs"]


class MemoEmbedder:
    """An embedder that remembers the vectors of the texts it has embedded (up to ``limit``
    texts per process). A recall study plays each script many times, so the same texts
    come back in every repetition; MiniLM's numpy forward pass (tens of ms a text on a
    shared core) then runs once per text. The vectors are the inner embedder's, row by row
    (a text's vector depends on the text only)."""

    def __init__(self, inner: Any, limit: int = 50_000) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.dim = getattr(inner, "dim", None)
        self.limit = limit
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            fresh = np.asarray(self.inner.embed(missing))
            if len(self._memo) + len(missing) > self.limit:
                self._memo.clear()
            self._memo.update(zip(missing, fresh))
            if any(t not in self._memo for t in texts):  # more missing texts than the limit holds
                return np.asarray(self.inner.embed(list(texts)))
        if not texts:
            return np.asarray(self.inner.embed([]))
        return np.stack([self._memo[t] for t in texts])
