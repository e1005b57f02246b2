"""The shared vector memory behind a real vector database: ChromaDB's local persistent
client, with the same interface, scores and results as :class:`~workbench.stores.vector.VectorMemory`.

Which one to use (``vector_backend`` of a recall cell): ``memory`` (the default) is the
in-process store, exact and fast, the right one for studies; ``chroma`` puts the entries
in a ChromaDB collection and asks Chroma's HNSW index for nearest neighbours, then
re-ranks them by the composite score; it is for checking that results do not depend on
the store, and for memories too large for a brute-force scan. It needs the optional
extra ``chroma`` (``pip install -e '.[chroma]'``).

What Chroma does and what stays here:

- Chroma stores every live entry (id, embedding, text, and metadata: role, authority,
  turn, namespace, fact id) and answers the nearest-neighbour query, namespaces applied
  as a metadata filter. Our embedder's vectors are passed in, both for entries and for
  queries; the collection has no embedding function, so Chroma never loads (nor
  downloads) its default ONNX model. Telemetry is off (``anonymized_telemetry=False``).
- The composite score (alpha·similarity + beta·authority + gamma·recency) re-ranks the
  neighbours Chroma returns, with similarity recomputed in float64 from our embeddings
  and the same tie-break as the in-memory store (newer turn, then higher id).
- The candidate pool grows until it provably holds the top k: every entry Chroma did
  not return is at least as far as the farthest one it did, so its score is at most
  ``alpha·(its similarity bound) + beta·(highest authority) + gamma·(highest recency)``;
  while the k-th best score found is not above that bound, the pool doubles (up to every
  visible entry, which is the exact scan). So the top k equals the in-memory store's
  as long as Chroma's index returns true nearest neighbours. HNSW is approximate: at
  Chroma's default settings (:data:`HNSW`) it does on the memories measured (2,000
  entries of a recall world's memory, tested), with a narrow index (few neighbours, a
  small ``ef_search``) it does not. :func:`recall_at_k` runs the same queries on the
  index and on an exact scan of the same entries and says how much of the exact top k
  came back. Chroma's index build is not seeded: with narrow settings two builds of the
  same entries answer differently, so such a cell does not replay exactly.
- Invalidation (which entries conflict, which is removed or refused) is the in-memory
  store's rule, run on the copy of the live entries this class inherits; the collection
  is kept in step with it (additions and removals) before every search.

Each memory is one collection (a unique name) in a Chroma database folder: ``path``, or
by default one temporary folder per process, removed at exit. ``close()`` drops the
collection; a memory that is garbage collected drops it too.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import InputError, SetupError
from workbench.stores.vector import AddResult, Hit, MemoryEntry, VectorMemory

BACKENDS: tuple[str, ...] = ("memory", "chroma")

#: The HNSW settings a collection is built with (Chroma's configuration API, chromadb 1.x:
#: ``configuration={"hnsw": {...}}``; the legacy metadata keys were ``hnsw:space``,
#: ``hnsw:M``, ``hnsw:construction_ef``, ``hnsw:search_ef``). The defaults are Chroma's own
#: (``populate_create_hnsw_defaults``: 16 neighbours, ef 100 at construction and search),
#: except the space: cosine, the similarity the composite score uses (Chroma's default, l2,
#: ranks unit vectors the same). Only these four change what the index returns: Chroma
#: 1.x's local index drops ``num_threads`` and ``batch_size`` from the configuration.
HNSW_SPACES: tuple[str, ...] = ("cosine", "l2", "ip")
HNSW: dict[str, Any] = {"space": "cosine", "max_neighbors": 16, "ef_construction": 100, "ef_search": 100}
#: Chroma computes distances in float32: the slack allowed when bounding unseen entries.
_DISTANCE_SLACK = 1e-5


def hnsw_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``settings`` over :data:`HNSW`, checked: a known space and positive integers
    (an unknown key or a bad value raises InputError naming it)."""
    out = dict(HNSW)
    for key, value in (settings or {}).items():
        if key not in HNSW:
            raise InputError(f"hnsw.{key}: unknown HNSW setting; expected some of: {', '.join(HNSW)}")
        if key == "space":
            if value not in HNSW_SPACES:
                raise InputError(f"hnsw.space: expected one of {', '.join(HNSW_SPACES)} (got {value!r})")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"hnsw.{key}: expected a positive integer (got {value!r})")
        out[key] = value
    return out


def _similarity_bound(distance: float, space: str) -> float:
    """The largest cosine an entry at ``distance`` (Chroma's, in ``space``) can have, for
    unit vectors: cosine and ip distances are 1 − cos, l2 is the squared distance 2 − 2·cos."""
    if space == "l2":
        return 1.0 - distance / 2.0 + _DISTANCE_SLACK
    return 1.0 - distance + _DISTANCE_SLACK

_CLIENTS: dict[str, Any] = {}
_TEMP_DIR: str | None = None


def chroma_available() -> bool:
    """Whether the optional ``chromadb`` package is installed."""
    import importlib.util

    return importlib.util.find_spec("chromadb") is not None


def _remove_temp_dir() -> None:
    if _TEMP_DIR is not None:
        shutil.rmtree(_TEMP_DIR, ignore_errors=True)


def _default_path() -> str:
    global _TEMP_DIR
    if _TEMP_DIR is None:
        _TEMP_DIR = tempfile.mkdtemp(prefix="workbench-chroma-")
        atexit.register(_remove_temp_dir)
    return _TEMP_DIR


def chroma_client(path: str | Path | None = None) -> Any:
    """One Chroma persistent client per database folder per process (Chroma refuses a
    second client with other settings on the same folder), telemetry off."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:  # pragma: no cover - the extra is installed by `make`
        raise SetupError("vector_backend 'chroma' needs the optional chromadb package: "
                           "pip install -e '.[chroma]'") from exc
    key = str(Path(path).resolve()) if path is not None else _default_path()
    if key not in _CLIENTS:
        Path(key).mkdir(parents=True, exist_ok=True)
        _CLIENTS[key] = chromadb.PersistentClient(path=key, settings=Settings(anonymized_telemetry=False))
    return _CLIENTS[key]


def _drop(client: Any, name: str) -> None:
    try:
        client.delete_collection(name)
    except Exception:  # the folder may be gone already (interpreter exit)
        pass


class ChromaVectorMemory(VectorMemory):
    """:class:`VectorMemory` whose entries live in a ChromaDB collection and whose search
    asks Chroma for nearest neighbours (see the module docstring). Same arguments, plus
    ``path`` (the database folder; default: a temporary one per process)."""

    backend = "chroma"

    def __init__(self, *args: Any, path: str | Path | None = None, hnsw: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hnsw = hnsw_settings(hnsw)
        self._client = chroma_client(path)
        self.collection_name = f"wb-{uuid.uuid4().hex}"
        self._collection = self._client.create_collection(self.collection_name, embedding_function=None,
                                                          configuration={"hnsw": dict(self.hnsw)})
        self._mirrored: set[int] = set()  # entry ids now in the collection
        self._finalizer = weakref.finalize(self, _drop, self._client, self.collection_name)

    def close(self) -> None:
        """Drop the collection (the memory cannot be used afterwards)."""
        self._finalizer()

    # -- keeping the collection in step with the live entries ------------------------------
    def add(self, text: str, **kwargs: Any) -> AddResult:
        result = super().add(text, **kwargs)
        self._sync()
        return result

    def add_many(self, items: Sequence[Mapping[str, Any]]) -> list[AddResult]:
        results = super().add_many(items)
        self._sync()
        return results

    def _sync(self) -> None:
        live = {e.entry_id: e for e in self.entries}
        gone = self._mirrored - set(live)
        if gone:
            self._collection.delete(ids=[str(i) for i in sorted(gone)])
            self._mirrored -= gone
        new = [e for i, e in live.items() if i not in self._mirrored]
        if new:
            self._collection.add(ids=[str(e.entry_id) for e in new],
                                 embeddings=[list(e.embedding) for e in new],
                                 documents=[e.text for e in new],
                                 metadatas=[_metadata(e) for e in new])
            self._mirrored.update(e.entry_id for e in new)

    # -- searching -------------------------------------------------------------------------
    def search(self, query: str, *, current_turn: int, k: int,
               namespaces: Sequence[str] | None = None) -> list[Hit]:
        """The top-k live entries for a query at a turn, best first, as :meth:`VectorMemory.search`."""
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {type(query).__name__}")
        if isinstance(current_turn, bool) or not isinstance(current_turn, (int, np.integer)) or current_turn < 0:
            raise ValueError(f"current_turn must be a non-negative integer, got {current_turn!r}")
        now = int(current_turn)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if namespaces is not None and isinstance(namespaces, str):
            raise ValueError(f"namespaces must be a list of names, not one string ({namespaces!r})")
        entries = self.entries
        late = [e for e in entries if e.turn > now]
        if late:
            raise ValueError(f"entry {late[0].entry_id} was written at turn {late[0].turn}, after current_turn {now}")
        allowed = None if namespaces is None else set(namespaces)
        visible = [e for e in entries if allowed is None or e.namespace is None or e.namespace in allowed]
        if not visible:
            return []
        self._sync()
        qvec = self._embed([query])[0]
        by_id = {e.entry_id: e for e in visible}
        w = self.weights
        # Upper bounds of the authority and recency terms of any visible entry.
        top_other = w.beta * max(e.authority for e in visible) + w.gamma / (1.0 + (now - max(e.turn for e in visible)))
        where = None if allowed is None else {"namespace": {"$in": ["", *sorted(allowed)]}}
        pool = min(len(visible), max(4 * k, 16))
        while True:
            found = self._collection.query(query_embeddings=[qvec.tolist()], n_results=pool, where=where,
                                           include=["distances"])
            ids = [int(i) for i in found["ids"][0]]
            cands = [by_id[i] for i in ids]
            matrix = np.array([c.embedding for c in cands], dtype=np.float64)
            sims = matrix @ qvec
            turns = np.array([c.turn for c in cands], dtype=np.int64)
            authority = np.array([c.authority for c in cands], dtype=np.float64)
            recency = 1.0 / (1.0 + (now - turns))
            scores = w.alpha * sims + w.beta * authority + w.gamma * recency
            if pool >= len(visible):
                break
            # Every entry Chroma left out is at least as far as the farthest returned one.
            farthest = max(found["distances"][0])
            bound = w.alpha * _similarity_bound(farthest, self.hnsw["space"]) + top_other
            if len(ids) >= k and float(np.sort(scores)[-k]) > bound:
                break
            pool = min(len(visible), 2 * pool)
        ids_arr = np.array(ids, dtype=np.int64)
        order = np.lexsort((-ids_arr, -turns, -scores))[:k]
        return [Hit(entry=cands[i], rank=r, similarity=float(sims[i]), authority=cands[i].authority,
                    recency=float(recency[i]), score=float(scores[i]))
                for r, i in enumerate(order.tolist(), start=1)]


    def exact_search(self, query: str, *, current_turn: int, k: int,
                     namespaces: Sequence[str] | None = None) -> list[Hit]:
        """The same search by a full scan of the live entries (the in-memory store's), never
        asking the index: what the approximate search is measured against."""
        return VectorMemory.search(self, query, current_turn=current_turn, k=k, namespaces=namespaces)

    def nearest(self, query: str, k: int) -> list[int]:
        """The ids of the index's ``k`` nearest entries to ``query`` (Chroma's own answer,
        no re-ranking): what the HNSW index alone gets right or wrong."""
        if not self.entries:
            return []
        self._sync()
        found = self._collection.query(query_embeddings=[self._embed([query])[0].tolist()],
                                       n_results=min(k, len(self.entries)), include=["distances"])
        return [int(i) for i in found["ids"][0]]


@dataclass(frozen=True)
class Query:
    """One search to compare: the query text, the turn it is asked at, the namespaces seen."""

    text: str
    current_turn: int
    namespaces: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RecallAtK:
    """How much of the exact top k an approximate index returns, over a set of queries.

    ``found`` / ``expected``: the entries of the exact scan's top k (by the composite score)
    that the Chroma-backed search also returned, summed over queries; ``nn_found`` /
    ``nn_expected``: the same for the index's raw nearest neighbours against the exact
    nearest neighbours by cosine (the index alone, before our re-ranking and pool growth; an
    entry tied with the k-th nearest counts as found: lexical vectors tie often).
    ``identical``: queries whose top k came back identical, in the same order."""

    k: int
    queries: int
    found: int
    expected: int
    nn_found: int
    nn_expected: int
    identical: int
    hnsw: dict[str, Any] = field(default_factory=dict)
    memory_size: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    @property
    def nn_recall(self) -> float:
        return self.nn_found / self.nn_expected if self.nn_expected else 1.0

    def to_record(self) -> dict[str, Any]:
        return {"k": self.k, "queries": self.queries, "memory_size": self.memory_size, "hnsw": dict(self.hnsw),
                "found": self.found, "expected": self.expected, "recall_at_k": round(self.recall, 6),
                "nn_found": self.nn_found, "nn_expected": self.nn_expected,
                "nn_recall_at_k": round(self.nn_recall, 6), "identical": self.identical}


def recall_at_k(memory: ChromaVectorMemory, queries: Sequence[Query], k: int) -> RecallAtK:
    """Run every query on the Chroma index and on an exact scan of the same live entries
    and count how much of the exact top k the index's search returned (see :class:`RecallAtK`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    found = expected = nn_found = nn_expected = identical = 0
    entries = memory.entries
    matrix = np.array([e.embedding for e in entries], dtype=np.float64) if entries else np.zeros((0, 0))
    ids = np.array([e.entry_id for e in entries], dtype=np.int64)
    for q in queries:
        ns = None if q.namespaces is None else list(q.namespaces)
        approx = [h.entry.entry_id for h in memory.search(q.text, current_turn=q.current_turn, k=k, namespaces=ns)]
        exact = [h.entry.entry_id for h in memory.exact_search(q.text, current_turn=q.current_turn, k=k,
                                                                 namespaces=ns)]
        found += len(set(approx) & set(exact))
        expected += len(exact)
        identical += approx == exact
        if entries:
            sims = matrix @ memory._embed([q.text])[0]
            n = min(k, len(entries))
            kth = float(np.sort(sims)[-n])  # ties at the k-th similarity: any of them is a true neighbour
            by_id = dict(zip(ids.tolist(), sims.tolist()))
            nn_found += sum(by_id[i] >= kth - _DISTANCE_SLACK for i in memory.nearest(q.text, k))
            nn_expected += n
    return RecallAtK(k=k, queries=len(queries), found=found, expected=expected, nn_found=nn_found,
                     nn_expected=nn_expected, identical=identical, hnsw=dict(memory.hnsw), memory_size=len(entries))


def _metadata(e: MemoryEntry) -> dict[str, Any]:
    """Chroma metadata has no null: the shared namespace is "" (a namespace is never empty)."""
    return {"namespace": e.namespace or "", "author_role": e.author_role, "authority": float(e.authority),
            "turn": int(e.turn), "fact_id": e.fact_id or ""}


def vector_memory_class(backend: str) -> type[VectorMemory]:
    """The store class of a ``vector_backend`` name: ``memory`` or ``chroma``."""
    if backend == "memory":
        return VectorMemory
    if backend == "chroma":
        return ChromaVectorMemory
    raise InputError(f"unknown vector backend {backend!r}; expected one of: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "HNSW", "HNSW_SPACES", "ChromaVectorMemory", "Query", "RecallAtK", "chroma_available",
           "chroma_client", "hnsw_settings", "recall_at_k", "vector_memory_class"]
