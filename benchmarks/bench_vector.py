"""Shared vector memory throughput: add N entries (batched and one at a time), then search.

Prints, per embedder (lexical; MiniLM when its files are installed): entries/s embedded
and stored (in one batch, in one batch with invalidation checks, one call per entry) and
searches/s (each search embeds its query and scores every live entry). On a busy 2-core
machine OpenBLAS threads contend; OPENBLAS_NUM_THREADS=1 is often faster there.
Not a test. Run: python benchmarks/bench_vector.py [--entries 1000] [--searches 200]"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.embeddings import EmbedderUnavailable, get_embedder  # noqa: E402
from workbench.stores.vector import VectorMemory, Weights  # noqa: E402

ROLES = [("senior_lawyer", 1.0), ("associate", 0.7), ("paralegal", 0.4), ("external_counsel", 0.9), ("client_rep", 0.2)]
SUBJECTS = ["the filing deadline", "the hearing date", "the settlement offer", "the patient's dose",
            "the allergy on file", "the portfolio's risk limit", "the trade settlement date", "the venue"]
VERBS = ["is", "was corrected to", "remains", "has moved to", "should be read as"]


def sentences(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} "
            f"{rng.choice(['July', 'August', 'March'])} {rng.randint(1, 28)}, {rng.randint(2024, 2027)}; "
            f"note {i} from the {rng.choice(ROLES)[0].replace('_', ' ')}." for i in range(n)]


def bench(name: str, entries: int, searches: int) -> None:
    try:
        t0 = time.perf_counter()
        embedder = get_embedder(name)
        load = time.perf_counter() - t0
    except EmbedderUnavailable as exc:
        print(f"{name:8s} skipped: {exc}")
        return
    rng = random.Random(7)
    texts = sentences(entries, rng)
    items = [{"text": t, "author_role": r, "authority": a, "turn": i // 10, "namespace": r if i % 3 else None}
             for i, (t, (r, a)) in enumerate(zip(texts, (rng.choice(ROLES) for _ in texts)))]

    mem = VectorMemory(embedder, Weights(alpha=1.0, beta=0.4, gamma=0.3))
    t0 = time.perf_counter()
    mem.add_many(items)
    batched = time.perf_counter() - t0

    checked = VectorMemory(embedder, Weights(alpha=1.0, beta=0.4, gamma=0.3), invalidation=True)
    t0 = time.perf_counter()
    checked.add_many(items)
    with_invalidation = time.perf_counter() - t0

    one_by_one = VectorMemory(embedder, Weights(alpha=1.0, beta=0.4, gamma=0.3))
    few = items[: min(entries, 200)]
    t0 = time.perf_counter()
    for item in few:
        one_by_one.add(**item)
    single = time.perf_counter() - t0

    queries = [f"What is {rng.choice(SUBJECTS)}?" for _ in range(searches)]
    now = items[-1]["turn"]
    t0 = time.perf_counter()
    for i, q in enumerate(queries):
        mem.search(q, current_turn=now, k=5, namespaces=None if i % 2 else ["paralegal"])
    search = time.perf_counter() - t0
    print(f"{embedder.name} (load {load:.2f} s)\n"
          f"  add_many, {entries} entries:             {entries / batched:8.0f} entries/s\n"
          f"  add_many with invalidation:             {entries / with_invalidation:8.0f} entries/s "
          f"(conflicts by similarity >= 0.8 removed {len(checked.removed)}, {len(checked)} live)\n"
          f"  add one at a time ({len(few)}):               {len(few) / single:8.0f} entries/s\n"
          f"  search k=5 over {len(mem)} entries:        {searches / search:8.0f} searches/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--embedders", default="lexical,minilm")
    args = ap.parse_args()
    for name in args.embedders.split(","):
        bench(name, args.entries, args.searches)


if __name__ == "__main__":
    main()
