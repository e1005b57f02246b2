"""One route over two servers against one server of double capacity (issue 43).

The study of ``benchmarks/bench_litellm.py`` (a 50-world cell, async scheduler, 32 worlds at
once, each agent a fixed plan of 3 to 8 calls), run three ways against fake OpenAI-compatible
servers in their own processes, each call taking ``--delay`` (200 ms) and each server able to
work on only so many calls at once (``--slots``; the rest wait in its queue, as a vLLM replica's
batch does):

- **pool**: a catalogue entry with two deployments of ``slots`` each, through litellm's Router
  (``--strategy``, least-busy by default);
- **single**: one server of ``2 x slots``, the same entry with one ``api_base`` (the lean HTTP path);
- **single-litellm**: that server through ``litellm.acompletion`` (``transport: litellm``), so the
  Router's own cost can be told from the lean path's saving.

Each run's critical-path ratio is bench_litellm's: the ideal (each world's longest chain of calls
x delay, list-scheduled on the concurrency) over the wall time. The figure is the pool's ratio
against the single server's (= single wall / pool wall; 1.0: two servers are as good as one of
double capacity). Also printed: each deployment's share of the pool's calls. The last line is
machine-readable (``RESULT ...``). A two-world run of each comes first, untimed: the first calls
through litellm import its provider code (measured: the first pool run took 1.7x the second).

Run: python benchmarks/bench_route_pool.py [--worlds 50] [--concurrency 32] [--delay 0.2] [--slots 16]
[--strategy least-busy|usage-based-routing-v2|simple-shuffle] [--repeats 3]"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_litellm import list_schedule, responder  # noqa: E402
from tests.fake_openai import FakeOpenAIProcess  # noqa: E402

# A server's capacity: set before its process is forked (each child gets its own copy), the
# semaphore made in the child on its first request.
_CAPACITY: dict[str, Any] = {"slots": 1, "delay": 0.2, "sem": None}
_CAPACITY_LOCK = threading.Lock()


def capped(body: dict[str, Any]) -> str:
    """The bench's agent plan, answered after ``delay`` seconds of one of the server's ``slots``."""
    with _CAPACITY_LOCK:
        if _CAPACITY["sem"] is None:
            _CAPACITY["sem"] = threading.BoundedSemaphore(_CAPACITY["slots"])
    with _CAPACITY["sem"]:
        time.sleep(_CAPACITY["delay"])
    return responder(body)


def server(slots: int, delay: float) -> FakeOpenAIProcess:
    _CAPACITY.update(slots=slots, delay=delay, sem=None)
    return FakeOpenAIProcess(delay_s=0.0, responder=capped).start()


def catalogue(folder: Path, single_url: str, pool_urls: list[str], strategy: str) -> Path:
    common = {"route": "openai/fake-model", "auth": "none", "max_connections": 256, "rpm": None, "max_tokens": 64,
              "timeout_s": 30, "max_attempts": 2, "backoff_base_s": 0.05, "input_usd_per_mtok": 0.0,
              "output_usd_per_mtok": 0.0}
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {
        "single": {**common, "api_base": single_url},
        "single-litellm": {**common, "api_base": single_url, "transport": "litellm"},
        "pool": {**common, "deployments": [{"name": f"server{i + 1}", "api_base": u} for i, u in enumerate(pool_urls)],
                 "routing": {"strategy": strategy, "allowed_fails": 1, "cooldown_s": 10}}}}))
    return path


def run_once(model: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from workbench.models.litellm_client import reset_limits
    from workbench.models.litellm_client.pool import reset_pools
    from workbench.params import load_study
    from workbench.study import run_study

    reset_limits()
    reset_pools()
    spec = {"world": "stigmergy", "name": f"bench-pool-{model}", "seed": 5, "worlds_per_cell": args.worlds,
            "concurrency": args.concurrency, "defaults": {"prompts": str(ROOT / "params/prompts/stigmergy"),
                                                          "scheduler": "async"}, "cells": [{"model": model}]}
    (tmp / "study.yaml").write_text(yaml.safe_dump(spec))
    t0, c0 = time.perf_counter(), time.process_time()
    run_study(load_study(tmp / "study.yaml"), tmp / "run", progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    worlds = sorted((json.loads(x) for x in (tmp / "run" / "worlds.jsonl").read_text().splitlines()),
                    key=lambda w: w["world_index"])
    steps = [json.loads(x) for x in (tmp / "run" / "steps.jsonl").read_text().splitlines()]
    calls: dict[str, Counter[str]] = defaultdict(Counter)
    for s in steps:
        calls[s["world_id"]][s["agent"]] += 1
    ideal = list_schedule([max(calls[w["world_id"]].values()) * args.delay for w in worlds], args.concurrency)
    return {"model": model, "wall": wall, "cpu_ms": 1000 * cpu / max(1, len(steps)), "ideal": ideal,
            "ratio": ideal / wall, "calls": len(steps), "failed": sum(1 for w in worlds if w["failed"]),
            "served": Counter(s["reply"]["extra"].get("deployment") for s in steps),
            "retried": sum(1 for s in steps if len(s["reply"]["attempts"]) > 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--slots", type=int, default=16, help="calls one pool server works on at once (the single "
                                                          "server has twice as many)")
    ap.add_argument("--strategy", default="least-busy",
                    choices=["least-busy", "usage-based-routing-v2", "simple-shuffle"])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each; the median by ratio is reported")
    args = ap.parse_args()

    pool_servers = [server(args.slots, args.delay) for _ in range(2)]
    single = server(2 * args.slots, args.delay)
    from workbench.models.litellm_client import get_litellm

    get_litellm()  # the one-off import is not part of any run
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["WORKBENCH_MODELS"] = str(catalogue(Path(tmp), single.url, [s.url for s in pool_servers],
                                                           args.strategy))
            warm = argparse.Namespace(**{**vars(args), "worlds": 2})
            for model in ("pool", "single", "single-litellm"):  # first calls import litellm's provider code
                (Path(tmp) / f"warm-{model}").mkdir()
                run_once(model, warm, Path(tmp) / f"warm-{model}")
            for k in range(args.repeats):
                for model in ("pool", "single", "single-litellm"):  # interleaved: the machine's drift hits all
                    folder = Path(tmp) / f"{model}-{k}"
                    folder.mkdir()
                    r = run_once(model, args, folder)
                    runs[model].append(r)
                    print(f"{model:<15} run {k + 1}: wall {r['wall']:.3f} s, ideal {r['ideal']:.3f} s, ratio "
                          f"{r['ratio']:.3f}, {r['calls']} calls, {r['cpu_ms']:.2f} ms CPU a call", flush=True)
    finally:
        for s in (*pool_servers, single):
            s.stop()

    med = {m: sorted(rs, key=lambda r: r["ratio"])[len(rs) // 2] for m, rs in runs.items()}
    pool, one, one_litellm = med["pool"], med["single"], med["single-litellm"]
    shares = {name: n / max(1, pool["calls"]) for name, n in sorted(pool["served"].items(), key=str)}
    print(f"\nroute pool bench: {args.worlds} worlds x concurrency {args.concurrency}, {args.delay * 1000:.0f} ms a "
          f"call, pool 2 x {args.slots} slots ({args.strategy}) vs one server of {2 * args.slots} slots; "
          f"median of {args.repeats} runs each")
    for m in (pool, one, one_litellm):
        print(f"  {m['model']:<15} wall {m['wall']:7.3f} s  critical-path ratio {m['ratio']:.3f}  "
              f"CPU {m['cpu_ms']:.2f} ms/call  failed worlds {m['failed']}  retried calls {m['retried']}")
    print("  pool calls per deployment: " + ", ".join(f"{k} {v:.1%}" for k, v in shares.items()))
    vs = pool["ratio"] / one["ratio"]
    vs_litellm = pool["ratio"] / one_litellm["ratio"]
    print(f"pool / single (lean path): {vs:.3f}; pool / single through litellm: {vs_litellm:.3f} "
          "(1.0: two servers serve as well as one of double capacity)")
    print(f"RESULT name=route-pool figure=pool_ratio:{pool['ratio']:.3f} reference=single_2x_ratio:{one['ratio']:.3f} "
          f"ratio={vs:.3f} target=ratio>=0.90 met={'yes' if vs >= 0.9 else 'no'} "
          f"vs_single_litellm={vs_litellm:.3f} strategy={args.strategy} "
          f"shares={','.join(f'{k}:{v:.3f}' for k, v in shares.items())} calls={pool['calls']}")


if __name__ == "__main__":
    main()
