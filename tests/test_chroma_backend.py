"""The ChromaDB backend of the shared vector memory (workbench.stores.chroma): the same
top-k as the in-memory store on seeded memories, its collection kept in step with
invalidation, telemetry off, and Chroma's own embedding model never touched."""
from __future__ import annotations

from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.utils.embedding_functions import onnx_mini_lm_l6_v2

from workbench.embeddings import get_embedder
from workbench.stores.chroma import BACKENDS, ChromaVectorMemory, chroma_client, vector_memory_class
from workbench.stores.vector import VectorMemory, Weights

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = {
    "naive": Weights(alpha=1.0, beta=0.0, gamma=0.3),
    "lightweight": Weights(alpha=1.0, beta=0.4, gamma=0.3),
    # authority and recency outweigh similarity: the top k are far from the query, so the
    # candidate pool must grow before the bound lets the search stop
    "authority-heavy": Weights(alpha=0.2, beta=2.0, gamma=1.0),
}


@pytest.fixture(autouse=True)
def _no_chroma_embedding_model(monkeypatch):
    """Chroma's default embedding function (an ONNX model it would download) must never run."""
    def refuse(*_a, **_k):
        raise AssertionError("Chroma's default ONNX embedding model was used")

    monkeypatch.setattr(onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "__call__", refuse)
    monkeypatch.setattr(onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse)


class TableEmbedder:
    """Seeded random unit vectors, one per text (16 dimensions)."""

    name = "table"
    dim = 16

    def __init__(self, texts: list[str], seed: int) -> None:
        rng = np.random.default_rng(seed)
        m = rng.normal(size=(len(texts), self.dim))
        self.table = dict(zip(texts, m / np.linalg.norm(m, axis=1, keepdims=True)))

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.table[t] for t in texts], dtype=np.float64)


def _pair(embedder, weights, tmp_path, **kw) -> tuple[VectorMemory, ChromaVectorMemory]:
    return VectorMemory(embedder, weights, **kw), ChromaVectorMemory(embedder, weights, path=tmp_path / "db", **kw)


def _same_top_k(a: VectorMemory, b: ChromaVectorMemory, query: str, now: int, k: int, namespaces=None) -> list:
    ha = a.search(query, current_turn=now, k=k, namespaces=namespaces)
    hb = b.search(query, current_turn=now, k=k, namespaces=namespaces)
    assert [(h.entry.entry_id, h.rank) for h in hb] == [(h.entry.entry_id, h.rank) for h in ha]
    assert [h.entry.text for h in hb] == [h.entry.text for h in ha]
    assert np.allclose([h.score for h in hb], [h.score for h in ha], rtol=0, atol=1e-12)
    assert np.allclose([h.similarity for h in hb], [h.similarity for h in ha], rtol=0, atol=1e-12)
    return hb


@pytest.mark.parametrize("weights", list(WEIGHTS), ids=list(WEIGHTS))
@pytest.mark.parametrize("invalidation", [False, True], ids=["keep", "invalidate"])
def test_same_top_k_as_the_in_memory_store_on_a_seeded_memory(tmp_path, weights, invalidation) -> None:
    rng = np.random.default_rng(18)
    texts = [f"t{i}" for i in range(400)] + [f"q{j}" for j in range(12)]
    emb = TableEmbedder(texts, seed=18)
    a, b = _pair(emb, WEIGHTS[weights], tmp_path, invalidation=invalidation, conflict_similarity=0.5)
    for turn in range(50):  # 8 entries a turn, added as one batch
        items = [dict(text=f"t{i}", author_role="r", authority=float(rng.choice([0.0, 0.2, 0.4, 0.7, 0.9, 1.0])),
                      turn=turn, namespace=[None, "a", "b"][i % 3], fact_id=[None, f"F{i % 7}"][i % 2])
                 for i in range(8 * turn, 8 * turn + 8)]
        for ra, rb in zip(a.add_many(items), b.add_many(items)):
            assert (ra.entry is None) == (rb.entry is None)
            assert [e.entry_id for e in ra.removed] == [e.entry_id for e in rb.removed]
    assert [e.entry_id for e in b.entries] == [e.entry_id for e in a.entries]
    assert b._collection.count() == len(a) and (len(a.removed) > 0) == invalidation
    queries = []
    real_query = b._collection.query
    b._collection.query = lambda **kw: queries.append(kw["n_results"]) or real_query(**kw)
    compared = 0
    for j in range(12):
        for k in (1, 3, 10):
            for ns in (None, ["a"], ["b", "a"]):
                hits = _same_top_k(a, b, f"q{j}", now=60, k=k, namespaces=ns)
                compared += len(hits)
    assert compared == 12 * 3 * (1 + 3 + 10)
    # the candidate pool is a small part of the memory, and grows only when the bound says so
    searches = 12 * 3 * 3
    if weights == "naive":  # similarity and recency only: the first pool (max(4k, 16)) always held the top k
        assert len(queries) == searches
    if weights == "authority-heavy":  # far neighbours win: the pool had to grow, up to a full scan
        assert len(queries) > searches and max(queries) >= 80


def test_same_top_k_on_the_shipped_scripts_with_the_lexical_embedder(tmp_path) -> None:
    """Every shipped recall script, as a world's memory holds it (initial facts at turn 0, the
    scripted writes at their turns): every recall query gets the same top 3 and top 10."""
    from workbench.worlds.recall.domains import role_authority
    from workbench.worlds.recall.scripts import load_scripts

    emb = get_embedder("lexical")
    scripts = load_scripts(ROOT / "params" / "recall" / "scripts")
    queries = 0
    for script in scripts:
        for weights in (WEIGHTS["naive"], WEIGHTS["lightweight"]):
            a, b = _pair(emb, weights, tmp_path, invalidation=weights.beta > 0)
            for mem in (a, b):
                mem.add_many([{"text": f.text, "author_role": "record", "authority": f.authority_level, "turn": 0,
                               "fact_id": f.id} for f in script.initial_facts])
            for turn in script.turns:
                if turn.write_to_memory:
                    for mem in (a, b):
                        mem.add(turn.content, author_role=turn.role, authority=role_authority(script.domain, turn.role),
                                turn=turn.turn, namespace=turn.role, fact_id=turn.fact_id)
                if turn.is_recall:
                    for k in (3, 10):
                        _same_top_k(a, b, turn.recall_query or "", now=turn.turn, k=k)
                    queries += 1
            b.close()
    assert queries >= 2 * 3 * len(scripts)


def test_the_collection_follows_removals_and_close_drops_it(tmp_path) -> None:
    emb = TableEmbedder(["x", "y", "z", "q"], seed=1)
    mem = ChromaVectorMemory(emb, WEIGHTS["lightweight"], invalidation=True, conflict_similarity=0.0, path=tmp_path)
    mem.add("x", author_role="paralegal", authority=0.4, turn=1, fact_id="F1")
    mem.add("y", author_role="senior", authority=1.0, turn=2, fact_id="F1")  # removes x
    mem.add("z", author_role="client", authority=0.2, turn=3, fact_id="F1")  # refused by y
    assert [e.text for e in mem.entries] == ["y"]
    assert mem._collection.get()["ids"] == [str(mem.entries[0].entry_id)]
    assert [h.entry.text for h in mem.search("q", current_turn=3, k=5)] == ["y"]
    client = chroma_client(tmp_path)
    assert mem.collection_name in [c.name for c in client.list_collections()]
    mem.close()
    assert mem.collection_name not in [c.name for c in client.list_collections()]


def test_telemetry_is_off_and_no_embedding_function_is_configured(tmp_path) -> None:
    mem = ChromaVectorMemory(TableEmbedder(["x"], seed=2), WEIGHTS["naive"], path=tmp_path)
    assert chroma_client(tmp_path).get_settings().anonymized_telemetry is False
    assert mem._collection._embedding_function is None
    assert mem._collection.configuration_json["hnsw"]["space"] == "cosine"
    mem.add("x", author_role="r", authority=0.5, turn=0)
    assert mem.search("x", current_turn=0, k=1)[0].similarity == pytest.approx(1.0)
    assert chromadb.__version__


def test_bad_arguments_are_refused_as_by_the_in_memory_store(tmp_path) -> None:
    mem = ChromaVectorMemory(TableEmbedder(["x", "q"], seed=3), WEIGHTS["naive"], path=tmp_path)
    mem.add("x", author_role="r", authority=0.5, turn=4)
    with pytest.raises(ValueError, match="after current_turn 3"):
        mem.search("q", current_turn=3, k=1)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        mem.search("q", current_turn=4, k=0)
    with pytest.raises(ValueError, match="not one string"):
        mem.search("q", current_turn=4, k=1, namespaces="a")
    assert mem.search("q", current_turn=4, k=1, namespaces=["a"])  # x is shared: always seen


def test_backend_names() -> None:
    assert BACKENDS == ("memory", "chroma")
    assert vector_memory_class("memory") is VectorMemory and vector_memory_class("chroma") is ChromaVectorMemory
    with pytest.raises(ValueError, match="unknown vector backend 'faiss'; expected one of: memory, chroma"):
        vector_memory_class("faiss")


def test_a_world_on_chroma_records_what_it_records_on_the_in_memory_store(tmp_path, monkeypatch) -> None:
    """The cell's vector_backend picks the store; retrievals, memory and recalls are the same."""
    from tests.test_recall_world import legal_script, recall_study, run_cell

    searches: list[int] = []
    real_search = ChromaVectorMemory.search
    monkeypatch.setattr(ChromaVectorMemory, "search", lambda self, *a, **kw: searches.append(1) or real_search(self, *a, **kw))
    cells = [{"condition": "lightweight-invalidation", "vector_backend": b, "k": 5} for b in BACKENDS]
    path = recall_study(tmp_path, cells, scripts=[legal_script()])
    a, b = (run_cell(path, i, [0])[0].world for i in (0, 1))
    assert a["cell"]["vector_backend"] == "memory" and b["cell"]["vector_backend"] == "chroma"
    assert a["retrievals"] and b["retrievals"] == a["retrievals"]
    assert b["memory_log"] == a["memory_log"] and b["recalls"] == a["recalls"] and b["turns"] == a["turns"]
    assert len(searches) == len(b["retrievals"])  # the chroma cell searched Chroma, the other did not


def test_a_bad_backend_is_refused_naming_the_field(tmp_path) -> None:
    from tests.test_recall_world import recall_study
    from workbench.params import ParamsError, load_study

    with pytest.raises(ParamsError, match=r"cells\[0\]\.vector_backend.*'memory' or 'chroma'"):
        load_study(recall_study(tmp_path, [{"vector_backend": "faiss"}]))
