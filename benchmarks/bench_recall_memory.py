"""One retrieval from a recall world's shared memory at realistic size: the in-process exact
scan against ChromaDB's HNSW index, at 100, 1,000 and 5,000 entries.

The memory is what a recall world with ``distractors`` holds: a shipped script's case file
and scripted writes, then seeded distractor entries (20 % near-duplicates of the script's
statements, 20 % paraphrases, the rest facts of other matters), embedded by the lexical
embedder (1,024 dimensions; ``--embedder minilm`` for the real model). The queries are the
script's recall questions and its statements. Per size and backend it prints milliseconds
per retrieval (k = 3, lightweight weights: alpha 1, beta 0.4, gamma 0.3; each query embedded
once per search, as a world does) and, for Chroma, recall@k of the index's search against
the exact scan of the same entries and of the index's raw nearest neighbours
(workbench.stores.chroma.recall_at_k), at Chroma's default HNSW settings unless given.
Chroma's index build is not seeded: recall@k may differ a little from run to run.
Not a test: it prints figures and asserts nothing about time.
Run: python benchmarks/bench_recall_memory.py [--sizes 100,1000,5000] [--k 3] [--ef-search 100]"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.embeddings import EmbedderUnavailable, get_embedder  # noqa: E402
from workbench.stores.chroma import ChromaVectorMemory, Query, chroma_available, recall_at_k  # noqa: E402
from workbench.stores.vector import VectorMemory, Weights  # noqa: E402
from workbench.worlds.recall.distractors import DistractorSpec, build_distractors  # noqa: E402
from workbench.worlds.recall.domains import RECORD, role_authority  # noqa: E402
from workbench.worlds.recall.scripts import load_scripts  # noqa: E402

WEIGHTS = Weights(alpha=1.0, beta=0.4, gamma=0.3)


def memory_items(size: int, script_id: str) -> tuple[list[dict], list[Query]]:
    """``size`` entries (the script's own, then distractors) and the queries to time."""
    script = next(s for s in load_scripts(ROOT / "params" / "recall" / "scripts") if s.script_id == script_id)
    own = [{"text": f.text, "author_role": RECORD, "authority": f.authority_level, "turn": 0, "namespace": None,
            "fact_id": f.id, "value": f.value} for f in script.initial_facts]
    own += [{"text": t.content, "author_role": t.role, "authority": role_authority(script.domain, t.role),
             "turn": t.turn, "namespace": t.role, "fact_id": t.fact_id, "value": t.value}
            for t in script.turns if t.write_to_memory]
    spec = DistractorSpec(count=max(0, size - len(own)), near_duplicates=0.2, paraphrases=0.2, seed=42)
    items = sorted(own + [d.item() for d in build_distractors(script, spec)], key=lambda i: i["turn"])[:size]
    now = max(t.turn for t in script.turns)
    queries = [Query(t.recall_query or "", now) for t in script.recalls()]
    queries += [Query(t.content, now) for t in script.turns if t.write_to_memory]
    return items, queries


def ms_per_search(mem: VectorMemory, queries: list[Query], k: int, repeat: int, exact: bool = False) -> float:
    search = mem.exact_search if exact and isinstance(mem, ChromaVectorMemory) else mem.search
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for q in queries:
            search(q.text, current_turn=q.current_turn, k=k)
        times.append((time.perf_counter() - t0) / len(queries))
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over the queries (median shown)")
    ap.add_argument("--embedder", default="lexical")
    ap.add_argument("--script", default="legal_01")
    ap.add_argument("--max-neighbors", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=100)
    ap.add_argument("--ef-search", type=int, default=100)
    args = ap.parse_args()
    try:
        embedder = get_embedder(args.embedder)
    except EmbedderUnavailable as exc:
        print(f"skipped: {exc}")
        return
    hnsw = {"max_neighbors": args.max_neighbors, "ef_construction": args.ef_construction, "ef_search": args.ef_search}
    print(f"embedder {embedder.name}, k={args.k}, weights {WEIGHTS.to_record()}, script {args.script}")
    if chroma_available():
        print(f"chroma HNSW: space=cosine {' '.join(f'{k}={v}' for k, v in hnsw.items())}")
    print(f"{'entries':>8} {'build exact s':>14} {'exact ms':>9} {'build chroma s':>15} {'chroma ms':>10} "
          f"{'recall@k':>14} {'identical':>10} {'index nn recall@k':>18}")
    last: tuple[int, float, float, float] = (0, 0.0, 0.0, 1.0)
    for size in (int(s) for s in args.sizes.split(",")):
        items, queries = memory_items(size, args.script)
        t0 = time.perf_counter()
        exact = VectorMemory(embedder, WEIGHTS)
        exact.add_many(items)
        build_exact = time.perf_counter() - t0
        exact_ms = ms_per_search(exact, queries, args.k, args.repeat)
        if not chroma_available():
            print(f"{len(exact):>8} {build_exact:>14.2f} {exact_ms:>9.2f}   (chroma not installed)")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-recall-memory-") as folder:
            t0 = time.perf_counter()
            chroma = ChromaVectorMemory(embedder, WEIGHTS, path=folder, hnsw=hnsw)
            chroma.add_many(items)
            build_chroma = time.perf_counter() - t0
            chroma_ms = ms_per_search(chroma, queries, args.k, args.repeat)
            r = recall_at_k(chroma, queries, args.k)
            chroma.close()
        print(f"{len(exact):>8} {build_exact:>14.2f} {exact_ms:>9.2f} {build_chroma:>15.2f} {chroma_ms:>10.2f} "
              f"{r.found:>6}/{r.expected:<4} {r.recall:>4.3f} {r.identical:>4}/{r.queries:<5} "
              f"{r.nn_found:>6}/{r.nn_expected:<5} {r.nn_recall:.3f}")
        last = (len(exact), exact_ms, chroma_ms, r.recall)
    if chroma_available():
        n, exact_ms, chroma_ms, recall = last
        print(f"RESULT name=recall-memory figure=chroma_ms_{n}:{chroma_ms:.2f} reference=exact_ms_{n}:{exact_ms:.2f} "
              f"ratio={chroma_ms / exact_ms:.2f} target=recall@{args.k}:{recall:.3f} met=-")


if __name__ == "__main__":
    main()
