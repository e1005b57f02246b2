"""A local model's server settings on a fixed workload: recorded requests replayed.

bench_local.py runs whole worlds at the study's temperature, where a world's length
varies more than a setting moves it. Here the requests an earlier run sent to a local
model (its agents' conversations, rebuilt from the records step by step) are sent again,
one at a time, at temperature 0, to a fresh server per setting. Printed per setting: wall
time, prompt and generation speed (the server's own timings), and whether every reply
equals the first setting's: a setting that only changes speed (speculative decoding with
n-gram drafts, threads) must give the same greedy replies.

Run: python benchmarks/bench_local_replay.py RUN_DIR [--model qwen2.5-coder-0.5b]
     [--requests 40] [--settings "speculative=none;speculative=ngram-map-k"]
(RUN_DIR: a run with a cell on local/MODEL, e.g. outputs/open-questions after
`workbench run params/open-questions.yaml --out outputs/open-questions`.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_local import parse_setting  # noqa: E402
from workbench.local.catalogue import SERVER_SETTINGS, load_local_catalogue  # noqa: E402
from workbench.local.server import server_for, stop_all  # noqa: E402
from workbench.records import load_run  # noqa: E402


def conversations(run_dir: Path, model: str, limit: int) -> list[list[dict[str, str]]]:
    """Each request the model's agents sent, in order: system prompt, task, then each
    earlier reply and the result shown for it."""
    records = load_run(run_dir)
    out: list[list[dict[str, str]]] = []
    for w in records.worlds:
        for a in w["agents"]:
            if a["route"] != f"local/{model}":
                continue
            msgs = [{"role": "system", "content": a["system_prompt"]}, {"role": "user", "content": a["task_text"]}]
            for s in sorted((s for s in records.steps[w["world_id"]] if s["agent"] == a["agent"]),
                            key=lambda s: s["seq"]):
                out.append(list(msgs))
                msgs.append({"role": "assistant", "content": s["reply"]["text"] or ""})
                if s.get("result") is not None:
                    msgs.append({"role": "user", "content": s["result"]})
    return out[:limit]


def replay(model: str, setting: dict[str, Any], convs: list[list[dict[str, str]]], tmp: Path) -> dict[str, Any]:
    entry = load_local_catalogue()[model]
    cat = tmp / "local-models.yaml"
    cat.write_text(yaml.safe_dump({model: {**entry.model_dump(exclude={"name"}),
                                           **{k: v for k, v in setting.items() if k in SERVER_SETTINGS}}}))
    os.environ["WORKBENCH_LOCAL_MODELS"] = str(cat)
    try:
        stop_all()
        srv = server_for(model)
        got: dict[str, Any] = {"prompt_n": 0, "prompt_ms": 0.0, "gen_n": 0, "gen_ms": 0.0, "replies": []}
        t0 = time.perf_counter()
        for msgs in convs:
            body = {"model": model, "messages": msgs, "temperature": 0, "max_tokens": entry.max_tokens}
            req = urllib.request.Request(srv.url + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as resp:
                res = json.load(resp)
            t = res.get("timings") or {}
            got["prompt_n"] += t.get("prompt_n", 0)
            got["prompt_ms"] += t.get("prompt_ms", 0.0)
            got["gen_n"] += t.get("predicted_n", 0)
            got["gen_ms"] += t.get("predicted_ms", 0.0)
            got["replies"].append(res["choices"][0]["message"].get("content"))
        got["wall_s"] = time.perf_counter() - t0
        return got
    finally:
        stop_all()
        os.environ.pop("WORKBENCH_LOCAL_MODELS", None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--settings", default="speculative=none;speculative=ngram-simple;speculative=ngram-map-k")
    args = ap.parse_args()
    convs = conversations(args.run_dir, args.model, args.requests)
    if not convs:
        print(f"{args.run_dir}: no request to local/{args.model} recorded")
        return 1
    print(f"{args.model}: {len(convs)} recorded requests from {args.run_dir}, one at a time, temperature 0")
    first: list[Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for text in args.settings.split(";"):
            got = replay(args.model, parse_setting(text), convs, Path(tmp))
            first = got["replies"] if first is None else first
            same = sum(a == b for a, b in zip(got["replies"], first, strict=True))
            print(f"  {text:<28} wall {got['wall_s']:6.1f} s  prompt {got['prompt_n']:5d} tok "
                  f"{1000 * got['prompt_n'] / max(got['prompt_ms'], 1e-9):6.0f} tok/s  generated {got['gen_n']:5d} tok "
                  f"{1000 * got['gen_n'] / max(got['gen_ms'], 1e-9):5.1f} tok/s  replies as the first setting's: "
                  f"{same}/{len(convs)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
