"""What prompt caching saves: the demo design's shape on a fake server that bills like Anthropic.

Each agent re-sends its whole history every step, so a world's input tokens grow with the
square of its steps. Anthropic bills the part of a prompt it read from its cache at 0.1x the
input price, and the part it wrote at 1.25x, but caches only what a request marks. This runs
the same cell twice through the real client (litellm's Anthropic route, ``local-fake-anthropic``
of params/models.yaml) against tests/fake_anthropic.py, whose prompt cache honours the marks
and reports ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` as the API does:
``prompt_cache: off`` (no breakpoints) and ``auto`` (system prompt and history up to the
previous step marked, see workbench/models/litellm_client/prompt_cache.py).

The cell has the demo design's shape (params/demo.yaml: the shared store, one pair and two solo
agents, up to 20 steps each); each agent follows a fixed plan of 10 to 20 JSON actions chosen
from its task text, the same in both runs. Printed per world: billed input-token equivalents
(uncached input + 0.1 x cache reads + 1.25 x cache writes), read from the step records' usage,
off and auto, and their ratio; then the totals, the server's own bill as a check, and the
dollars the records priced. Target (issue 40): cached <= 0.35 of uncached.

``--min-cache-tokens`` is the shortest prefix the fake caches. Anthropic's is 1024 tokens
(Sonnet, Opus; more for Haiku; OpenAI's automatic cache starts at 1024 too); the default 0
caches any prefix, which is what the target assumes. Measured here (fake token counts, about
4 characters a token): the shared-store prompts average about 440 tokens a call and rarely pass
1024 even at step 20, so with ``--min-cache-tokens 1024`` nothing is read from the cache and the
ratio is 1.00 (a few late writes cost 0.04 % more): on this world's short prompts a real
provider's cache saves next to nothing; the saving below is what the marks are worth once
prompts are long enough to be cached (longer system prompts, the collusion world's logs).

Run: python benchmarks/bench_cache_cost.py [--worlds 10] [--min-cache-tokens 0]"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fake_anthropic import READ_MULTIPLIER, WRITE_MULTIPLIER, FakeAnthropic  # noqa: E402
from workbench.params import load_study  # noqa: E402
from workbench.study import run_study  # noqa: E402

TARGET = 0.35


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def plan_for(task_text: str) -> list[str]:
    """10 to 20 actions: list, write a note, look around, submit."""
    n = 10 + int(hashlib.sha256(task_text.encode()).hexdigest(), 16) % 11
    ops = ['{"op": "list"}', '{"op": "write", "key": "note", "value": 1}']
    looks = ['{"op": "read", "key": "note"}', '{"op": "list"}']
    ops += [looks[i % 2] for i in range(n - 3)] + ['{"op": "submit", "answer": 0}']
    return ops


def responder(body: dict) -> str:
    msgs = body["messages"]
    plan = plan_for(_text(msgs[0]["content"]))
    return plan[min(sum(1 for m in msgs if m["role"] == "assistant"), len(plan) - 1)]


def equivalents(usage: dict) -> float:
    """Billed input-token equivalents of one call's recorded usage."""
    read, written = usage.get("cached_tokens", 0), usage.get("cache_write_tokens", 0)
    fresh = usage.get("prompt_tokens", 0) - read - written
    return fresh + READ_MULTIPLIER * read + WRITE_MULTIPLIER * written


def run_mode(mode: str, args: argparse.Namespace, server: FakeAnthropic, tmp: Path) -> dict:
    server.reset()
    server.responder = responder
    catalogue = yaml.safe_load((ROOT / "params/models.yaml").read_text())
    catalogue["models"]["local-fake-anthropic"]["prompt_cache"] = mode
    (tmp / f"models-{mode}.yaml").write_text(yaml.safe_dump(catalogue))
    os.environ["WORKBENCH_MODELS"] = str(tmp / f"models-{mode}.yaml")
    from workbench.models.litellm_client import reset_limits

    reset_limits()
    spec = {"world": "stigmergy", "name": f"bench-cache-{mode}", "seed": 20261202, "worlds_per_cell": args.worlds,
            "concurrency": 8, "defaults": {"prompts": str(ROOT / "params/prompts/stigmergy"), "scheduler": "async",
                                           "parser": "lenient"},
            "cells": [{"model": "local-fake-anthropic", "condition": "store", "pairs": 1, "solos": 2,
                       "max_steps": 20}]}
    (tmp / f"{mode}.yaml").write_text(yaml.safe_dump(spec))
    t0 = time.perf_counter()
    run_study(load_study(tmp / f"{mode}.yaml"), tmp / mode, progress=False)
    wall = time.perf_counter() - t0
    worlds = [json.loads(x) for x in (tmp / mode / "worlds.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (tmp / mode / "steps.jsonl").read_text().splitlines()]
    index = {w["world_id"]: w["world_index"] for w in worlds}
    per_world: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in steps:
        w = per_world[index[s["world_id"]]]
        usage = s["reply"]["usage"]
        w["calls"] += 1
        w["equiv"] += equivalents(usage)
        w["prompt"] += usage.get("prompt_tokens", 0)
        w["read"] += usage.get("cached_tokens", 0)
        w["written"] += usage.get("cache_write_tokens", 0)
        w["usd"] += s["reply"].get("cost_usd") or 0.0
    return {"worlds": per_world, "failed": sum(1 for w in worlds if w["failed"]), "wall": wall,
            "server_equiv": server.input_equivalents(), "server_calls": server.count,
            "marks": sum(json.dumps(r["body"]).count('"cache_control"') for r in server.requests)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=10)
    ap.add_argument("--min-cache-tokens", type=int, default=0,
                    help="the shortest prefix the fake caches (Anthropic: 1024 for Sonnet-class models)")
    args = ap.parse_args()
    server = FakeAnthropic(min_cache_tokens=args.min_cache_tokens).start()
    os.environ["WORKBENCH_FAKE_ANTHROPIC_API_BASE"] = server.url
    from workbench.models.litellm_client import get_litellm

    get_litellm()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            off = run_mode("off", args, server, Path(tmp))
            auto = run_mode("auto", args, server, Path(tmp))
    finally:
        server.stop()

    print(f"cache cost bench: {args.worlds} worlds per mode, demo shape (store, 1 pair + 2 solos, <= 20 steps), "
          f"route anthropic/fake-claude via litellm, fake prompt cache min {args.min_cache_tokens} tokens")
    print(f"{'world':>5} {'calls':>5} {'off: input equiv':>17} {'auto: input equiv':>18} {'read':>7} {'written':>8} "
          f"{'ratio':>6}")
    for i in sorted(off["worlds"]):
        o, a = off["worlds"][i], auto["worlds"][i]
        print(f"{i:>5} {int(a['calls']):>5} {o['equiv']:>17.0f} {a['equiv']:>18.0f} {a['read']:>7.0f} "
              f"{a['written']:>8.0f} {a['equiv'] / o['equiv']:>6.3f}")
    eq_off = sum(w["equiv"] for w in off["worlds"].values())
    eq_auto = sum(w["equiv"] for w in auto["worlds"].values())
    usd_off = sum(w["usd"] for w in off["worlds"].values())
    usd_auto = sum(w["usd"] for w in auto["worlds"].values())
    prompt = sum(w["prompt"] for w in auto["worlds"].values())
    read = sum(w["read"] for w in auto["worlds"].values())
    ratio = eq_auto / eq_off
    print(f"total billed input-token equivalents: off {eq_off:.0f}, auto {eq_auto:.0f}; ratio {ratio:.3f} "
          f"(target <= {TARGET}: {'met' if ratio <= TARGET else 'MISSED'})")
    print(f"  auto: {read / prompt:.1%} of prompt tokens read from the cache; cache_control marks sent: "
          f"off {off['marks']}, auto {auto['marks']}")
    print(f"  the server's own bill (every request): off {off['server_equiv']:.0f}, auto {auto['server_equiv']:.0f} "
          f"({off['server_calls']} and {auto['server_calls']} requests; the records count the calls worlds used)")
    print(f"  dollars the records priced (catalogue: input 3, cached read 0.3, write 3.75, output 15 per Mtok): "
          f"off {usd_off:.4f}, auto {usd_auto:.4f} ({usd_auto / usd_off:.3f})")
    print(f"  failed worlds: off {off['failed']}, auto {auto['failed']}; wall {off['wall']:.1f} s and "
          f"{auto['wall']:.1f} s")
    print(f"RESULT name=cache-cost figure=auto_input_equiv:{eq_auto:.0f} reference=off_input_equiv:{eq_off:.0f} "
          f"ratio={ratio:.3f} target=ratio<={TARGET} met={'yes' if ratio <= TARGET else 'no'} "
          f"usd_ratio={usd_auto / usd_off:.3f} worlds={args.worlds} min_cache_tokens={args.min_cache_tokens}")


if __name__ == "__main__":
    main()
