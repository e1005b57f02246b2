"""The shared vector memory: scores checked against hand arithmetic, the invalidation
rule entry by entry, namespaces, and bad input."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workbench.stores.vector import AddResult, Hit, MemoryEntry, VectorMemory, Weights, normalise_text


class FakeEmbedder:
    """Hand-picked unit vectors, so every cosine below is exact arithmetic."""

    name = "fake"
    dim = 3

    def __init__(self, table: dict[str, tuple[float, float, float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.table[t] for t in texts], dtype=np.float64)


VECTORS = {
    "A": (1.0, 0.0, 0.0),
    "B": (0.6, 0.8, 0.0),
    "C": (0.0, 1.0, 0.0),
    "D": (0.0, 0.6, 0.8),
    "q": (0.8, 0.6, 0.0),
}


def four_entries(weights: Weights, **kw) -> VectorMemory:
    mem = VectorMemory(FakeEmbedder(VECTORS), weights, **kw)
    mem.add("A", author_role="senior_lawyer", authority=1.0, turn=1)
    mem.add("B", author_role="client_rep", authority=0.2, turn=3)
    mem.add("C", author_role="associate", authority=0.7, turn=4)
    mem.add("D", author_role="external_counsel", authority=0.9, turn=0)
    return mem


def test_scores_match_hand_arithmetic_lightweight_weights() -> None:
    mem = four_entries(Weights(alpha=1.0, beta=0.4, gamma=0.3))
    hits = mem.search("q", current_turn=4, k=4)
    # similarity = q . v with q = (0.8, 0.6, 0):
    #   A: 0.8            B: 0.48 + 0.48 = 0.96   C: 0.6            D: 0.36
    # recency = 1 / (1 + (4 - turn)):
    #   A (turn 1): 1/4   B (turn 3): 1/2         C (turn 4): 1     D (turn 0): 1/5
    # score = 1.0 * sim + 0.4 * authority + 0.3 * recency:
    #   A: 0.8  + 0.4*1.0 + 0.3*0.25 = 0.8  + 0.40 + 0.075 = 1.275
    #   B: 0.96 + 0.4*0.2 + 0.3*0.5  = 0.96 + 0.08 + 0.150 = 1.190
    #   C: 0.6  + 0.4*0.7 + 0.3*1.0  = 0.6  + 0.28 + 0.300 = 1.180
    #   D: 0.36 + 0.4*0.9 + 0.3*0.2  = 0.36 + 0.36 + 0.060 = 0.780
    expected = [("A", 0.8, 1.0, 0.25, 1.275), ("B", 0.96, 0.2, 0.5, 1.19),
                ("C", 0.6, 0.7, 1.0, 1.18), ("D", 0.36, 0.9, 0.2, 0.78)]
    assert [h.entry.text for h in hits] == [e[0] for e in expected]
    for rank, (hit, (text, sim, auth, rec, score)) in enumerate(zip(hits, expected), start=1):  # noqa: B007  (unpacked to name the columns)
        assert hit.rank == rank
        assert hit.similarity == pytest.approx(sim, abs=1e-12)
        assert hit.authority == auth
        assert hit.recency == pytest.approx(rec, abs=1e-12)
        assert hit.score == pytest.approx(score, abs=1e-12)


def test_naive_weights_let_the_low_authority_entry_win() -> None:
    """The same memory with beta = 0 (the study's naive condition): authority collapse."""
    mem = four_entries(Weights(alpha=1.0, beta=0.0, gamma=0.3))
    hits = mem.search("q", current_turn=4, k=2)
    # A: 0.8 + 0.075 = 0.875   B: 0.96 + 0.15 = 1.11   C: 0.6 + 0.3 = 0.9   D: 0.36 + 0.06 = 0.42
    assert [(h.entry.text, round(h.score, 12)) for h in hits] == [("B", 1.11), ("C", 0.9)]


def test_k_limits_and_the_query_is_embedded_once() -> None:
    mem = four_entries(Weights())
    emb = mem.embedder
    before = len(emb.calls)
    hits = mem.search("q", current_turn=10, k=1)
    assert len(hits) == 1 and emb.calls[before:] == [["q"]]
    assert len(mem.search("q", current_turn=10, k=99)) == 4


def test_ties_break_by_newer_turn_then_higher_id() -> None:
    mem = VectorMemory(FakeEmbedder(VECTORS), Weights(alpha=1.0, beta=0.0, gamma=0.0))
    first = mem.add("A", author_role="r", authority=0.5, turn=2).entry
    older = mem.add("A", author_role="r", authority=0.5, turn=1).entry
    second = mem.add("A", author_role="r", authority=0.5, turn=2).entry
    hits = mem.search("q", current_turn=3, k=3)
    # All three score 0.8 exactly; turn 2 beats turn 1, and at turn 2 id 3 beats id 1.
    assert {h.score for h in hits} == {0.8}
    assert [h.entry.entry_id for h in hits] == [second.entry_id, first.entry_id, older.entry_id] == [3, 1, 2]


def test_recency_is_one_at_the_current_turn_and_future_entries_are_refused() -> None:
    mem = VectorMemory(FakeEmbedder(VECTORS), Weights(alpha=0.0, beta=0.0, gamma=1.0))
    mem.add("A", author_role="r", authority=0.5, turn=5)
    assert mem.search("q", current_turn=5, k=1)[0].recency == 1.0
    with pytest.raises(ValueError, match="turn 5, after current_turn 4"):
        mem.search("q", current_turn=4, k=1)


def test_empty_memory_returns_nothing() -> None:
    mem = VectorMemory(FakeEmbedder(VECTORS), Weights())
    assert mem.search("q", current_turn=0, k=3) == []


def test_namespaces_filter_and_shared_entries_are_always_seen() -> None:
    mem = VectorMemory(FakeEmbedder(VECTORS), Weights())
    mem.add("A", author_role="senior_lawyer", authority=1.0, turn=0)  # shared (namespace None)
    mem.add("B", author_role="paralegal", authority=0.4, turn=1, namespace="paralegal")
    mem.add("C", author_role="associate", authority=0.7, turn=1, namespace="associate")
    texts = lambda ns: sorted(h.entry.text for h in mem.search("q", current_turn=2, k=10, namespaces=ns))  # noqa: E731
    assert texts(None) == ["A", "B", "C"]
    assert texts(["paralegal"]) == ["A", "B"]
    assert texts(["associate", "paralegal"]) == ["A", "B", "C"]
    assert texts([]) == ["A"]
    assert texts(["nobody"]) == ["A"]
    with pytest.raises(ValueError, match="not one string"):
        mem.search("q", current_turn=2, k=1, namespaces="paralegal")


# -- invalidation --------------------------------------------------------------------------

FACTS = {
    "The deadline is July 22.": (1.0, 0.0, 0.0),
    "the deadline is   July 22": (1.0, 0.0, 0.0),  # the same words, normalised
    "The deadline is July 29.": (0.9, 0.435889894354, 0.0),  # cos 0.9 with July 22
    "The deadline is July 30.": (0.9, 0.0, 0.435889894354),
    "Dose is 5 mg.": (0.0, 1.0, 0.0),
    "Dose is 10 mg.": (0.0, 0.8, 0.6),  # cos 0.8 with 5 mg
    "Court is in Leeds.": (0.0, 0.0, 1.0),
    "Venue moved to York.": (0.0, 0.28, 0.96),  # cos 0.96 with Leeds
    "q": (0.8, 0.6, 0.0),
}


def test_invalidation_removes_exactly_the_conflicting_lower_authority_entries() -> None:
    mem = VectorMemory(FakeEmbedder(FACTS), Weights(beta=0.4), invalidation=True)
    add = mem.add
    e1 = add("The deadline is July 22.", author_role="paralegal", authority=0.4, turn=1, fact_id="F1").entry
    # Repeating the same fact is not a conflict, whoever says it (anchoring stays visible).
    e2 = add("the deadline is   July 22", author_role="associate", authority=0.7, turn=2, fact_id="F1").entry
    e3 = add("Dose is 5 mg.", author_role="nurse", authority=0.4, turn=2, fact_id="F2").entry
    assert [e.entry_id for e in mem.entries] == [1, 2, 3]

    # A lower-authority newcomer that contradicts is refused; it removes nothing.
    r4 = add("The deadline is July 29.", author_role="client_rep", authority=0.2, turn=3, fact_id="F1")
    assert r4 == AddResult(entry=None, removed=(), refused_by=2)  # the strongest opponent: the associate
    assert [e.entry_id for e in mem.entries] == [1, 2, 3]

    # A higher-authority newcomer removes every lower one it contradicts, and nothing else.
    r5 = add("The deadline is July 29.", author_role="senior_lawyer", authority=1.0, turn=4, fact_id="F1")
    assert r5.entry is not None and r5.entry.entry_id == 5 and r5.refused_by is None
    assert r5.removed == (e1, e2)
    assert [e.entry_id for e in mem.entries] == [3, 5]  # the dose (another fact) untouched

    # Equal authority: both kept.
    r6 = add("The deadline is July 30.", author_role="external_counsel", authority=1.0, turn=5, fact_id="F1")
    assert r6.entry is not None and r6.removed == ()
    # Another fact corrected by someone senior.
    r7 = add("Dose is 10 mg.", author_role="pharmacist", authority=0.8, turn=5, fact_id="F2")
    assert r7.removed == (e3,)
    assert [e.entry_id for e in mem.entries] == [5, 6, 7]

    assert [(entry.entry_id, by) for entry, by in mem.removed] == [(4, 2), (1, 5), (2, 5), (3, 7)]
    assert mem.removed[0][0].text == "The deadline is July 29." and mem.removed[0][0].authority == 0.2


def test_different_fact_ids_never_conflict_even_when_similar() -> None:
    mem = VectorMemory(FakeEmbedder(FACTS), Weights(), invalidation=True, conflict_similarity=0.5)
    add = mem.add
    add("Dose is 5 mg.", author_role="nurse", authority=0.4, turn=1, fact_id="F2")
    r = add("Dose is 10 mg.", author_role="pharmacist", authority=0.8, turn=2, fact_id="F9")
    assert r.removed == () and len(mem) == 2


def test_without_fact_ids_similarity_decides_the_conflict() -> None:
    mem = VectorMemory(FakeEmbedder(FACTS), Weights(), invalidation=True, conflict_similarity=0.9)
    add = mem.add
    leeds = add("Court is in Leeds.", author_role="paralegal", authority=0.4, turn=1).entry
    dose = add("Dose is 5 mg.", author_role="nurse", authority=0.4, turn=1, fact_id="F2").entry
    # cos(York, Leeds) = 0.96 >= 0.9: conflict (York has no fact id); cos(York, dose) = 0.28: none.
    r = add("Venue moved to York.", author_role="senior_lawyer", authority=1.0, turn=2)
    assert r.removed == (leeds,)
    # cos(10 mg, 5 mg) = 0.8 < 0.9 and the ids are unknown on one side: no conflict, both kept.
    r2 = add("Dose is 10 mg.", author_role="pharmacist", authority=0.8, turn=3)
    assert r2.removed == () and dose in mem.entries
    # At exactly the threshold it is a conflict.
    mem2 = VectorMemory(FakeEmbedder(FACTS), Weights(), invalidation=True, conflict_similarity=0.8)
    mem2.add("Dose is 5 mg.", author_role="nurse", authority=0.4, turn=1)
    assert len(mem2.add("Dose is 10 mg.", author_role="pharmacist", authority=0.8, turn=2).removed) == 1


def test_without_invalidation_nothing_is_removed() -> None:
    mem = VectorMemory(FakeEmbedder(FACTS), Weights())
    mem.add("The deadline is July 22.", author_role="paralegal", authority=0.4, turn=1, fact_id="F1")
    r = mem.add("The deadline is July 29.", author_role="senior_lawyer", authority=1.0, turn=2, fact_id="F1")
    assert r.removed == () and len(mem) == 2 and mem.removed == []


def test_add_many_embeds_in_one_batch_and_applies_invalidation_in_order() -> None:
    emb = FakeEmbedder(FACTS)
    mem = VectorMemory(emb, Weights(), invalidation=True)
    results = mem.add_many([
        {"text": "The deadline is July 22.", "author_role": "paralegal", "authority": 0.4, "turn": 0, "fact_id": "F1"},
        {"text": "The deadline is July 29.", "author_role": "senior_lawyer", "authority": 1.0, "turn": 0,
         "fact_id": "F1"},
        {"text": "Dose is 5 mg.", "author_role": "nurse", "authority": 0.4, "turn": 0, "namespace": "nurse"},
    ])
    assert len(emb.calls) == 1 and len(emb.calls[0]) == 3
    assert [r.entry.entry_id for r in results] == [1, 2, 3]
    assert results[1].removed == (results[0].entry,)
    with pytest.raises(ValueError, match="item 1: authority must be in"):
        mem.add_many([{"text": "Dose is 5 mg.", "author_role": "x", "authority": 0.1, "turn": 0},
                      {"text": "Dose is 5 mg.", "author_role": "x", "authority": 7, "turn": 0}])
    assert len(mem) == 2  # nothing of the bad batch was stored
    with pytest.raises(ValueError, match="unknown field"):
        mem.add_many([{"text": "q", "author_role": "x", "authority": 0.1, "turn": 0, "colour": "red"}])


def test_normalise_text() -> None:
    assert normalise_text("  The Deadline\n is  July 22. ") == normalise_text("the deadline is july 22")
    assert normalise_text("July 22") != normalise_text("July 29")


# -- records -------------------------------------------------------------------------------

def test_records_are_json_safe_rounded_and_leave_out_the_embedding() -> None:
    mem = VectorMemory(FakeEmbedder(FACTS), Weights(alpha=1.0, beta=0.4, gamma=0.3))
    entry = mem.add("Dose is 10 mg.", author_role="pharmacist", authority=0.8, turn=1, namespace="pharmacist",
                    fact_id="F2").entry
    assert entry.embedding == (0.0, 0.8, 0.6)
    assert "embedding" not in repr(entry) and "embedding" not in entry.to_record()
    assert entry.to_record() == {"entry_id": 1, "text": "Dose is 10 mg.", "author_role": "pharmacist",
                                 "authority": 0.8, "turn": 1, "namespace": "pharmacist", "fact_id": "F2",
                                 "value": None}
    (hit,) = mem.search("q", current_turn=4, k=1)
    # sim = 0.6*0.8 = 0.48; recency = 1/4; score = 0.48 + 0.32 + 0.075 = 0.875
    rec = hit.to_record()
    assert json.loads(json.dumps(rec)) == rec
    assert rec["rank"] == 1 and rec["similarity"] == 0.48 and rec["recency"] == 0.25 and rec["score"] == 0.875
    h = Hit(entry=entry, rank=1, similarity=1 / 3, authority=0.8, recency=2 / 3, score=math.pi)
    assert h.to_record()["similarity"] == 0.333333 and h.to_record()["score"] == 3.141593
    assert isinstance(entry, MemoryEntry) and mem.snapshot() == [entry.to_record()]
    assert Weights(1, 0.4, 0.3).to_record() == {"alpha": 1.0, "beta": 0.4, "gamma": 0.3}


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"alpha": -0.1}, "alpha must be >= 0"),
    ({"beta": float("nan")}, "beta must be finite"),
    ({"gamma": float("inf")}, "gamma must be finite"),
    ({"alpha": "1"}, "alpha must be a number"),
    ({"beta": True}, "beta must be a number"),
    ({"alpha": 0.0, "beta": 0.0, "gamma": 0.0}, "at least one"),
])
def test_bad_weights_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        Weights(**kwargs)


def test_bad_arguments_are_refused() -> None:
    emb = FakeEmbedder(VECTORS)
    with pytest.raises(TypeError, match="Weights"):
        VectorMemory(emb, (1.0, 0.0, 0.3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="conflict_similarity"):
        VectorMemory(emb, Weights(), conflict_similarity=1.5)
    mem = VectorMemory(emb, Weights())
    for kwargs, message in [
        ({"authority": 1.5}, "authority must be in"),
        ({"authority": float("nan")}, "authority must be finite"),
        ({"turn": -1}, "turn must be a non-negative integer"),
        ({"turn": 1.5}, "turn must be a non-negative integer"),
        ({"author_role": ""}, "author_role"),
        ({"namespace": ""}, "namespace"),
        ({"fact_id": 3}, "fact_id"),
    ]:
        args = {"author_role": "r", "authority": 0.5, "turn": 0, **kwargs}
        with pytest.raises(ValueError, match=message):
            mem.add("A", **args)
    assert len(mem) == 0
    mem.add("A", author_role="r", authority=0.5, turn=0)
    for k in (0, -1, 1.0, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            mem.search("q", current_turn=1, k=k)
    with pytest.raises(ValueError, match="current_turn"):
        mem.search("q", current_turn=-1, k=1)


def test_an_embedder_that_breaks_its_promise_is_caught() -> None:
    class Unnormalised(FakeEmbedder):
        def embed(self, texts):
            return np.array([[2.0, 0.0, 0.0]] * len(texts))

    with pytest.raises(ValueError, match="L2-normalised"):
        VectorMemory(Unnormalised({}), Weights()).add("x", author_role="r", authority=0.1, turn=0)

    class WrongCount(FakeEmbedder):
        def embed(self, texts):
            return np.array([[1.0, 0.0, 0.0]] * (len(texts) + 1))

    with pytest.raises(ValueError, match="shape"):
        VectorMemory(WrongCount({}), Weights()).add("x", author_role="r", authority=0.1, turn=0)


def test_with_the_lexical_embedder_the_relevant_fact_ranks_first() -> None:
    from workbench.embeddings import get_embedder

    mem = VectorMemory(get_embedder("lexical"), Weights(alpha=1.0, beta=0.0, gamma=0.0))
    mem.add_many([
        {"text": "The patient is allergic to penicillin.", "author_role": "nurse", "authority": 0.4, "turn": 0},
        {"text": "The filing deadline is July 22, 2026.", "author_role": "senior_lawyer", "authority": 1.0,
         "turn": 0},
        {"text": "The client prefers email over phone calls.", "author_role": "client_rep", "authority": 0.2,
         "turn": 0},
    ])
    hits = mem.search("When is the filing deadline?", current_turn=1, k=3)
    assert hits[0].entry.text.startswith("The filing deadline")
    assert hits[0].similarity > 0.3 > hits[1].similarity


def test_many_adds_and_removals_keep_search_equal_to_brute_force() -> None:
    """The memory keeps columns (matrix, turns, ids) beside its entries and grows/compacts
    them; after 300 adds with invalidation they must still agree with a plain recomputation."""
    rng = np.random.default_rng(3)
    table: dict[str, tuple[float, ...]] = {}
    for i in range(300):
        v = rng.normal(size=8)
        table[f"t{i}"] = tuple(v / np.linalg.norm(v))
    q = rng.normal(size=8)
    table["q"] = tuple(q / np.linalg.norm(q))

    class Fake8(FakeEmbedder):
        dim = 8

    mem = VectorMemory(Fake8(table), Weights(alpha=1.0, beta=0.4, gamma=0.3), invalidation=True,
                       conflict_similarity=0.6)
    for i in range(300):
        mem.add(f"t{i}", author_role="r", authority=float(rng.choice([0.2, 0.4, 0.7, 1.0])), turn=i // 7,
                namespace=[None, "a", "b"][i % 3], fact_id=[None, f"F{i % 5}"][i % 2])
    assert 0 < len(mem.removed) and len(mem) + len(mem.removed) == 300
    live_ids = [e.entry_id for e in mem.entries]
    assert live_ids == sorted(live_ids) and not set(live_ids) & {e.entry_id for e, _ in mem.removed}
    for ns in (None, ["a"]):
        hits = mem.search("q", current_turn=50, k=400, namespaces=ns)
        expected = []
        for e in mem.entries:
            if ns is not None and e.namespace not in (None, *ns):
                continue
            sim = float(np.dot(table[e.text], table["q"]))
            rec = 1.0 / (1.0 + (50 - e.turn))
            expected.append((1.0 * sim + 0.4 * e.authority + 0.3 * rec, e.turn, e.entry_id))
        expected.sort(key=lambda t: (-t[0], -t[1], -t[2]))
        assert [(h.entry.entry_id, h.rank) for h in hits] == [(t[2], r) for r, t in enumerate(expected, 1)]
        assert np.allclose([h.score for h in hits], [t[0] for t in expected], atol=1e-12)
        assert all(np.allclose(h.entry.embedding, table[h.entry.text]) for h in hits)
