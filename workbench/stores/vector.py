"""A shared vector memory: entries with an author's role and authority, ranked by a
composite score, with optional authority-based invalidation.

It knows nothing of models, worlds or scripts: it is given an embedder and weights.

Score (the source study's formula)::

    score   = alpha * similarity + beta * authority + gamma * recency
    recency = 1 / (1 + (current_turn - entry_turn))

``similarity`` is the cosine of the query's and the entry's embeddings (a dot product,
both being unit length). An entry written at the current turn has recency 1; an entry
from a later turn than the search's is a bug in the caller and raises ``ValueError``.
Ties are broken deterministically: higher score, then newer turn, then higher entry id.

Namespaces: an entry may belong to a namespace (e.g. one per role) or to none. A search
with ``namespaces=None`` sees everything; with a list it sees the entries of those
namespaces *and* the shared entries (namespace ``None``) — initial facts are shared.

Invalidation (off unless asked for). The source study says only that "a higher-authority
entry conflicting with a lower-authority one about the same fact" removes the lower one
and never defines conflict, so this is our definition:

- two entries are ABOUT THE SAME FACT when both have a ``fact_id`` and the ids are
  equal; when either ``fact_id`` is None, when the cosine of their embeddings is at least
  ``conflict_similarity``. (Entries with different non-None fact ids never are.) The
  similarity threshold means different things for different embedders: lexical vectors
  put "July 22" and "July 29" at about 0.7, MiniLM at 0.99.
- what an entry SAYS is its ``value`` when the caller gives one (a date, an amount, a
  dose: the caller decides how it is found; compared normalised; several values
  separated by ``VALUE_SEP`` ";" form a set), else its normalised text (case-folded,
  whitespace collapsed, outer punctuation stripped). Two entries about the same fact
  AGREE when they say the same: equal texts, or value sets one of which holds the
  other ("10 mg; 4 hours" and "10 mg"), so two paraphrases stating the same value
  agree. They CONFLICT when both have values and neither set holds the other, or
  neither has a value and the texts differ. An entry with a value and one without
  neither conflict nor agree: nothing decides between them, both are kept. With
  ``compare_wording=False`` wording never decides: two entries without a value
  conflict with nothing (they agree only when their normalised texts are equal).
- when a new entry arrives, it is compared with every live entry. If any conflicting live
  entry has strictly higher authority, the newcomer is refused: it is not stored
  (``AddResult.entry`` is None, ``AddResult.refused_by`` names the winner: the highest
  authority, then the newest) and it removes nothing — a refused entry has no standing.
  Otherwise every conflicting live entry with strictly lower authority is removed; an
  equal-authority conflicting entry is removed only with ``invalidate_stale`` (the newer
  statement supersedes it), else both are kept. Agreeing entries are never removed
  (repetition is anchoring, which invalidation is not meant to hide).
- every removal, the refused newcomer included, is logged in ``removed`` as
  ``(entry, id of the entry that removed it)``; every event is also logged in
  ``conflicts`` (and returned in ``AddResult.conflicts``) as a :class:`Conflict` with its
  type: ``"lower-authority"`` (a refusal or the removal of a lower-authority entry),
  ``"stale"`` (an equal-authority older entry superseded) or ``"duplicate"`` (a stored
  newcomer agrees with a live entry: action ``"kept"``, nothing removed).

A caller may decide conflicts itself (a detector that reads only the entries' text, or a
model): ``add(..., conflicting=ids)`` names the live entries that conflict with the
newcomer, and then neither fact ids, values nor similarity decide; the authority rule
above (refuse, remove, stale) applies to those entries alone, and no duplicates are noted.
``AddResult.conflicting`` lists the live entries found (or given) to conflict, whatever
happened to them.
"""
from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.embeddings import Embedder


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return float(value)


def _turn(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Weights:
    """The composite score's weights; non-negative and finite, at least one positive."""

    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.3

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            value = _number(getattr(self, name), f"Weights.{name}")
            if value < 0:
                raise ValueError(f"Weights.{name} must be >= 0, got {value!r}")
        if self.alpha == self.beta == self.gamma == 0:
            raise ValueError("Weights: at least one of alpha, beta, gamma must be positive (all are 0)")

    def to_record(self) -> dict[str, float]:
        return {"alpha": float(self.alpha), "beta": float(self.beta), "gamma": float(self.gamma)}


@dataclass(frozen=True)
class MemoryEntry:
    entry_id: int
    text: str
    author_role: str
    authority: float
    turn: int
    namespace: str | None = None
    fact_id: str | None = None
    embedding: tuple[float, ...] = field(default=(), repr=False, compare=False)
    value: str | None = None  # what the entry states, when the caller knows (conflicts compare it)

    def to_record(self) -> dict[str, Any]:
        """JSON-safe; the embedding is left out (it is recomputable and large)."""
        return {
            "entry_id": self.entry_id,
            "text": self.text,
            "author_role": self.author_role,
            "authority": self.authority,
            "turn": self.turn,
            "namespace": self.namespace,
            "fact_id": self.fact_id,
            "value": self.value,
        }


@dataclass(frozen=True)
class Hit:
    entry: MemoryEntry
    rank: int  # 1-based
    similarity: float
    authority: float
    recency: float
    score: float

    def to_record(self) -> dict[str, Any]:
        """The entry's record plus the score's terms, floats rounded to 6 places."""
        rec = self.entry.to_record()
        rec["authority"] = round(float(rec["authority"]), 6)
        rec.update(
            rank=self.rank,
            similarity=round(self.similarity, 6),
            recency=round(self.recency, 6),
            score=round(self.score, 6),
        )
        return rec


CONFLICT_TYPES: tuple[str, ...] = ("stale", "lower-authority", "duplicate")


@dataclass(frozen=True)
class Conflict:
    """One invalidation event: ``new`` (the arriving entry) met ``old`` (a live entry about
    the same fact). ``action`` is "refused" (new not stored), "removed" (old removed) or
    "kept" (they agree: nothing removed); ``removed_id`` is the id that went, if any."""

    type: str  # one of CONFLICT_TYPES
    action: str  # "refused", "removed" or "kept"
    new: MemoryEntry
    old: MemoryEntry

    @property
    def removed_id(self) -> int | None:
        return {"refused": self.new.entry_id, "removed": self.old.entry_id}.get(self.action)


@dataclass(frozen=True)
class AddResult:
    entry: MemoryEntry | None  # None when the new entry was invalidated on arrival
    removed: tuple[MemoryEntry, ...]  # live entries this add removed (never the newcomer)
    refused_by: int | None = None  # id of the entry that refused the newcomer, if it was refused
    conflicts: tuple[Conflict, ...] = field(default=(), compare=False)  # this add's events
    entry_id: int | None = field(default=None, compare=False)  # the id given to the newcomer (also when refused)
    conflicting: tuple[int, ...] = field(default=(), compare=False)  # ids of live entries found to conflict


_SPACE = re.compile(r"\s+")
#: Separates the values of an entry that states several ("10 mg every 4 hours": a dose and an interval).
VALUE_SEP = ";"


def normalise_text(text: str) -> str:
    """What "says the same thing" compares: case-folded, whitespace collapsed, outer punctuation stripped."""
    return _SPACE.sub(" ", text.casefold()).strip(" \t\n.,;:!?\"'()[]")


class VectorMemory:
    """An in-process vector memory; see the module docstring for the score and invalidation rule."""

    def __init__(self, embedder: Embedder, weights: Weights, *, invalidation: bool = False,
                 conflict_similarity: float = 0.8, invalidate_stale: bool = False,
                 compare_wording: bool = True) -> None:
        if not isinstance(weights, Weights):
            raise TypeError(f"weights must be a Weights, got {type(weights).__name__}")
        threshold = _number(conflict_similarity, "conflict_similarity")
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"conflict_similarity must be a cosine in [-1, 1], got {conflict_similarity!r}")
        self.embedder = embedder
        self.weights = weights
        self.invalidation = bool(invalidation)
        self.invalidate_stale = bool(invalidate_stale)
        self.compare_wording = bool(compare_wording)
        self.conflict_similarity = threshold
        # Live entries and, parallel to them, columns for vectorised scoring: the embedding
        # matrix grows by doubling (rows [0, len) are live), so adding is amortised O(dim).
        self._entries: list[MemoryEntry] = []
        self._matrix = np.zeros((0, 0), dtype=np.float64)
        self._turns = np.zeros(0, dtype=np.int64)
        self._authority = np.zeros(0, dtype=np.float64)
        self._ids = np.zeros(0, dtype=np.int64)
        self._norm_texts: list[str] = []
        self._removed: list[tuple[MemoryEntry, int]] = []
        self._conflicts_log: list[Conflict] = []
        self._next_id = 1

    # -- reading -------------------------------------------------------------
    @property
    def entries(self) -> list[MemoryEntry]:
        """Live entries, oldest first."""
        return list(self._entries)

    @property
    def removed(self) -> list[tuple[MemoryEntry, int]]:
        """Every invalidated entry with the id of the entry that removed (or refused) it."""
        return list(self._removed)

    @property
    def conflicts(self) -> list[Conflict]:
        """Every invalidation event (refusals, removals, agreements noted), in order."""
        return list(self._conflicts_log)

    def __len__(self) -> int:
        return len(self._entries)

    def snapshot(self) -> list[dict[str, Any]]:
        return [e.to_record() for e in self._entries]

    # -- writing -------------------------------------------------------------
    def add(self, text: str, *, author_role: str, authority: float, turn: int,
            namespace: str | None = None, fact_id: str | None = None, value: str | None = None,
            conflicting: Collection[int] | None = None) -> AddResult:
        """Embed and store one entry (applying invalidation when enabled). ``conflicting``:
        the ids of live entries the caller decided conflict with it (module docstring)."""
        fields = self._check_fields(text, author_role, authority, turn, namespace, fact_id, value)
        return self._insert(fields, self._embed([text])[0], conflicting)

    def add_many(self, items: Sequence[Mapping[str, Any]]) -> list[AddResult]:
        """Several entries, embedded in one batch, then added in order (as ``add`` would).

        Each item holds ``add``'s arguments: text, author_role, authority, turn and
        optionally namespace, fact_id and value. All are checked before anything is stored.
        """
        checked = []
        for i, item in enumerate(items):
            unknown = set(item) - {"text", "author_role", "authority", "turn", "namespace", "fact_id", "value"}
            if unknown:
                raise ValueError(f"add_many: item {i}: unknown field(s) {sorted(unknown)}")
            try:
                checked.append(self._check_fields(item.get("text"), item.get("author_role"), item.get("authority"),
                                                  item.get("turn"), item.get("namespace"), item.get("fact_id"),
                                                  item.get("value")))
            except ValueError as exc:
                raise ValueError(f"add_many: item {i}: {exc}") from None
        vectors: Any = self._embed([f["text"] for f in checked]) if checked else []
        return [self._insert(f, v) for f, v in zip(checked, vectors)]

    @staticmethod
    def _check_fields(text: Any, author_role: Any, authority: Any, turn: Any,
                      namespace: Any, fact_id: Any, value: Any = None) -> dict[str, Any]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not isinstance(author_role, str) or not author_role:
            raise ValueError(f"author_role must be a non-empty string, got {author_role!r}")
        auth = _number(authority, "authority")
        if not 0.0 <= auth <= 1.0:
            raise ValueError(f"authority must be in [0, 1], got {authority!r}")
        for name, v in (("namespace", namespace), ("fact_id", fact_id), ("value", value)):
            if v is not None and (not isinstance(v, str) or not v):
                raise ValueError(f"{name} must be None or a non-empty string, got {v!r}")
        return {"text": text, "author_role": author_role, "authority": auth, "turn": _turn(turn, "turn"),
                "namespace": namespace, "fact_id": fact_id, "value": value}

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed and check the embedder kept its promise (shape, finite, unit rows)."""
        name = getattr(self.embedder, "name", type(self.embedder).__name__)
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts) or (self._entries and vecs.shape[1] != self._matrix.shape[1]):
            raise ValueError(f"embedder {name}: returned shape {vecs.shape} for {len(texts)} texts")
        if not np.isfinite(vecs).all():
            raise ValueError(f"embedder {name}: returned non-finite values")
        norms = np.linalg.norm(vecs, axis=1)
        if not np.allclose(norms, 1.0, atol=1e-3):
            raise ValueError(f"embedder {name}: rows must be L2-normalised, got norms {norms.round(4).tolist()[:5]}")
        return vecs

    @staticmethod
    def _says(value: str | None, norm_text: str) -> tuple[str, frozenset[str]]:
        """What an entry states, for comparison: its values when known (the parts of
        ``value`` split at ``VALUE_SEP``), else its wording."""
        if value is None:
            return ("text", frozenset([norm_text]))
        return ("value", frozenset(p for p in (normalise_text(x) for x in value.split(VALUE_SEP)) if p))

    @staticmethod
    def _agree(a: frozenset[str], b: frozenset[str]) -> bool:
        """Values agree when one entry states all the other does ("10 mg every 4 hours" and "10 mg")."""
        return a <= b or b <= a

    def _about_same(self, fields: dict[str, Any], vector: np.ndarray) -> tuple[list[int], list[int]]:
        """Positions of live entries about the same fact as a would-be entry that conflict
        with it and that agree with it (module docstring)."""
        n = len(self._entries)
        if not n:
            return [], []
        about_same = (self._matrix[:n] @ vector) >= self.conflict_similarity
        fact = fields["fact_id"]
        if fact is not None:  # where both sides have a fact id, the ids decide, not similarity
            known = np.array([e.fact_id is not None for e in self._entries], dtype=bool)
            same = np.array([e.fact_id == fact for e in self._entries], dtype=bool)
            about_same = np.where(known, same, about_same)
        says = self._says(fields["value"], normalise_text(fields["text"]))
        conflicting, agreeing = [], []
        for i in np.nonzero(about_same)[0].tolist():
            other = self._says(self._entries[i].value, self._norm_texts[i])
            if other[0] == says[0] and (other == says or says[0] == "value" and self._agree(other[1], says[1])):
                agreeing.append(i)
            elif other[0] == says[0] and (says[0] == "value" or self.compare_wording):
                conflicting.append(i)  # a value and a wording are never compared
        return conflicting, agreeing

    def _conflicts(self, fields: dict[str, Any], vector: np.ndarray) -> list[int]:
        """Positions of live entries that conflict with a would-be entry (module docstring)."""
        return self._about_same(fields, vector)[0]

    def _insert(self, fields: dict[str, Any], vector: np.ndarray,
                decided: Collection[int] | None = None) -> AddResult:
        entry = MemoryEntry(entry_id=self._next_id, embedding=tuple(vector.tolist()), **fields)
        self._next_id += 1
        if not self.invalidation:
            self._append(entry, vector)
            return AddResult(entry, (), entry_id=entry.entry_id)
        if decided is not None:  # the caller's detector decided: no fact ids, values or similarity here
            ids = set(decided)
            conflicting, agreeing = [i for i, e in enumerate(self._entries) if e.entry_id in ids], list[int]()
        else:
            conflicting, agreeing = self._about_same(fields, vector)
        found = tuple(self._entries[i].entry_id for i in conflicting)
        stronger = [self._entries[i] for i in conflicting if self._entries[i].authority > entry.authority]
        if stronger:
            winner = max(stronger, key=lambda e: (e.authority, e.turn, e.entry_id))
            self._removed.append((entry, winner.entry_id))
            refusal = (Conflict("lower-authority", "refused", entry, winner),)
            self._conflicts_log.extend(refusal)
            return AddResult(None, (), refused_by=winner.entry_id, conflicts=refusal, entry_id=entry.entry_id,
                             conflicting=found)
        events = []
        doomed = []
        for i in conflicting:
            old = self._entries[i]
            if old.authority < entry.authority:
                doomed.append(i)
                events.append(Conflict("lower-authority", "removed", entry, old))
            elif self.invalidate_stale and old.authority == entry.authority:
                doomed.append(i)
                events.append(Conflict("stale", "removed", entry, old))
        events.extend(Conflict("duplicate", "kept", entry, self._entries[i]) for i in agreeing)
        gone = tuple(self._entries[i] for i in doomed)
        if doomed:
            self._delete(doomed)
        self._removed.extend((old, entry.entry_id) for old in gone)
        self._conflicts_log.extend(events)
        self._append(entry, vector)
        return AddResult(entry, gone, conflicts=tuple(events), entry_id=entry.entry_id, conflicting=found)

    def _append(self, entry: MemoryEntry, vector: np.ndarray) -> None:
        n = len(self._entries)
        if n == self._matrix.shape[0]:  # full: double the capacity of every column
            cap = max(16, 2 * n)
            grown = np.zeros((cap, vector.size), dtype=np.float64)
            if n:
                grown[:n] = self._matrix[:n]
            self._matrix = grown
            for name in ("_turns", "_authority", "_ids"):
                col = getattr(self, name)
                new = np.zeros(cap, dtype=col.dtype)
                new[:n] = col[:n]
                setattr(self, name, new)
        self._matrix[n] = vector
        self._turns[n], self._authority[n], self._ids[n] = entry.turn, entry.authority, entry.entry_id
        self._entries.append(entry)
        self._norm_texts.append(normalise_text(entry.text))

    def _delete(self, positions: list[int]) -> None:
        n = len(self._entries)
        keep = np.ones(n, dtype=bool)
        keep[positions] = False
        m = int(keep.sum())
        self._matrix[:m] = self._matrix[:n][keep]
        for col in (self._turns, self._authority, self._ids):
            col[:m] = col[:n][keep]
        self._entries = [e for e, k in zip(self._entries, keep) if k]
        self._norm_texts = [t for t, k in zip(self._norm_texts, keep) if k]

    # -- searching -----------------------------------------------------------
    def search(self, query: str, *, current_turn: int, k: int,
               namespaces: Sequence[str] | None = None) -> list[Hit]:
        """The top-k live entries for a query at a turn, best first (ties: newer turn, higher id)."""
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {type(query).__name__}")
        now = _turn(current_turn, "current_turn")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if namespaces is not None:
            if isinstance(namespaces, str):
                raise ValueError(f"namespaces must be a list of names, not one string ({namespaces!r})")
            allowed = set(namespaces)
        n = len(self._entries)
        turns = self._turns[:n]
        if n and int(turns.max()) > now:
            e = self._entries[int(np.argmax(turns > now))]
            raise ValueError(f"entry {e.entry_id} was written at turn {e.turn}, after current_turn {now}")
        if not n:
            return []
        qvec = self._embed([query])[0]
        sims = self._matrix[:n] @ qvec
        recency = 1.0 / (1.0 + (now - turns))
        w = self.weights
        # Elementwise float64, the same operations in the same order as the formula by hand.
        scores = w.alpha * sims + w.beta * self._authority[:n] + w.gamma * recency
        if namespaces is not None:
            seen = np.array([e.namespace is None or e.namespace in allowed for e in self._entries], dtype=bool)
            candidates = np.nonzero(seen)[0]
        else:
            candidates = np.arange(n)
        # Best first: higher score, then newer turn, then higher id (lexsort's last key is the primary one).
        order = candidates[np.lexsort((-self._ids[candidates], -turns[candidates], -scores[candidates]))][:k]
        return [Hit(entry=self._entries[i], rank=r, similarity=float(sims[i]), authority=self._entries[i].authority,
                    recency=float(recency[i]), score=float(scores[i]))
                for r, i in enumerate(order.tolist(), start=1)]


__all__ = ["CONFLICT_TYPES", "VALUE_SEP", "AddResult", "Conflict", "Hit", "MemoryEntry", "VectorMemory", "Weights", "normalise_text"]
