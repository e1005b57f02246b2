"""Local open-weight models on this machine: seconds per world and where they go, for
each catalogued model that is installed (workbench models fetch), under the catalogue's
settings or a sweep of settings (issue 17, part 4).

One measurement = a fresh server with the setting, then ``--worlds`` shared-store worlds
(4 agents, lockstep, 12 steps at most, temperature 0.7) run one after the other; the
figure is wall seconds per world (the first world pays for the cold prompt cache, as in
any study). At temperature 0.7 a world's length varies more than settings move it (4 to
38 calls per world of the 0.5B in the same setting), so seconds per call is printed beside it: the
figure that compares settings. Beside them: the server's CPU seconds per world (user + system, all threads:
less sensitive to other processes on a shared machine than wall time), calls per world,
generated tokens per call, prompt tokens processed (not cached) per call, the share of
unparseable replies and of agents that ran to the step limit. ``--sweep`` alternates the
settings round after round (``--rounds``) and prints medians, with the load average
before and after, since the machine is shared.

A setting is ``key=value,...`` with keys among the catalogue's server settings
(threads and threads_batch, a number or ``auto``; slots, ctx, batch, ubatch,
cache_ram_mib; speculative: none, ngram-simple or ngram-map-k; runtime: auto, wheel or
native, the llama.cpp build), ``max_tokens`` (the cell's sampling; default: the
catalogue's), ``constrained`` (0/1: a JSON schema of the operations as
response_format, which the server applies as a grammar) and ``concurrency`` (worlds
in flight; default 1).

Below each measurement: each world's own clock and calls, and a 95 % interval for the
mean world, so that a figure near its target can be read against the spread.

Targets (issue 17): a Qwen2.5-Coder-0.5B world <= 8 s, a 1.5B world <= 40 s (2 cores).
Run: python benchmarks/bench_local.py [--worlds N] [--constrained] [--set threads=1,slots=4]
     python benchmarks/bench_local.py --sweep [--rounds 3] [--settings "threads=1;threads=2;max_tokens=96"]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.local.catalogue import SERVER_SETTINGS, catalogue_path, load_local_catalogue  # noqa: E402
from workbench.local.fetch import installed  # noqa: E402
from workbench.local.server import _SERVERS, server_for, stop_all  # noqa: E402
from workbench.params import load_study  # noqa: E402
from workbench.records import load_run  # noqa: E402
from workbench.study import run_study  # noqa: E402

TARGETS = {"0.5b": 8.0, "1.5b": 40.0}  # issue 17's seconds per world
# worlds per measurement unless --worlds says: about four minutes each on 2 cores. The worlds
# of one setting took 2 to 22 s (0.5B: 4 to 37 calls) and 16 to 57 s (1.5B): 16 worlds of the
# 0.5B gave a 95 % interval of the mean of 5.2-10.1 s around a target of 8, so it runs 32
WORLDS = {"0.5b": 32, "1.5b": 8}
SWEEP = ("catalogue;threads=1;threads=2;threads=2,threads_batch=2,slots=2;max_tokens=96;max_tokens=48;"
         "constrained=1")


STUDY_SETTINGS = ("max_tokens", "constrained", "concurrency")  # the study's, not the server's


def parse_setting(text: str) -> dict[str, Any]:
    """``key=value,key=value`` (or ``catalogue``: the catalogue's own settings) as a dict."""
    out: dict[str, Any] = {}
    if text.strip() in ("", "catalogue"):
        return out
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or (key not in SERVER_SETTINGS and key not in STUDY_SETTINGS):
            raise SystemExit(f"bad setting {part!r}: expected key=value with a key among "
                             f"{[*SERVER_SETTINGS, *STUDY_SETTINGS]}")
        value = value.strip()
        out[key] = (bool(int(value)) if key == "constrained" else value if value == "auto" or key in ("speculative", "runtime")
                    else int(value))
    return out


def label(setting: dict[str, Any]) -> str:
    return ",".join(f"{k}={v if isinstance(v, str) else int(v)}" for k, v in setting.items()) or "catalogue"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (every thread), None once it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuWatch(threading.Thread):
    """The last CPU seconds seen of a process, read every 0.2 s (the study stops its server at its end)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.first, self.last = pid, cpu_s(pid) or 0.0, cpu_s(pid) or 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            got = cpu_s(self.pid)
            if got is None:
                return
            self.last = got

    def used(self) -> float:
        self.stop.set()
        self.join()
        return self.last - self.first


def measure(name: str, setting: dict[str, Any], worlds: int, tmp: Path) -> dict[str, Any]:
    """A fresh server under ``setting``, then ``worlds`` worlds; what they cost."""
    entry = load_local_catalogue()[name]
    server = {k: v for k, v in setting.items() if k in SERVER_SETTINGS}
    cat = tmp / "local-models.yaml"  # the catalogue with this setting, read by the local route
    cat.write_text(yaml.safe_dump({name: {**entry.model_dump(exclude={"name"}), **server}}))
    os.environ["WORKBENCH_LOCAL_MODELS"] = str(cat)
    try:
        stop_all()
        t0 = time.perf_counter()
        server_for(name)
        start_s = time.perf_counter() - t0
        proc, started_with = _SERVERS[name].proc, _SERVERS[name].settings
        assert proc is not None
        sampling: dict[str, Any] = {"temperature": 0.7}
        if "max_tokens" in setting:
            sampling["max_tokens"] = setting["max_tokens"]
        spec = {"world": "stigmergy", "name": "bench-local", "seed": 3, "worlds_per_cell": worlds,
                "concurrency": setting.get("concurrency", 1), "cells": [{"model": f"local/{name}",
                                             "constrained": bool(setting.get("constrained", False))}],
                "defaults": {"prompts": str(ROOT / "params/prompts/stigmergy"), "scheduler": "lockstep",
                             "max_steps": 12, "sampling": sampling}}
        path = tmp / "s.yaml"
        path.write_text(yaml.safe_dump(spec))
        run = tmp / f"run-{time.monotonic_ns()}"
        watch, t1 = CpuWatch(proc.pid), time.perf_counter()
        watch.start()
        run_study(load_study(path), run, progress=False)
        wall, cpu = time.perf_counter() - t1, watch.used()
        records = load_run(run)
    finally:
        stop_all()
        os.environ.pop("WORKBENCH_LOCAL_MODELS", None)
    steps = [s for v in records.steps.values() for s in v]
    n = max(1, len(records.worlds))
    usage = [s["reply"]["usage"] for s in steps]
    completion = sum(u.get("completion_tokens", 0) or 0 for u in usage)
    prompt = sum(u.get("prompt_tokens", 0) or 0 for u in usage)
    cached = sum(u.get("cached_tokens", 0) or 0 for u in usage)
    last = {}  # each agent's last step: did it submit, or run out of steps?
    for s in steps:
        last[(s["world_id"], s["agent"])] = s
    capped = sum(1 for s in last.values() if (s.get("op") or {}).get("op") != "submit")
    return {"s_world": wall / n, "s_call": wall / max(1, len(steps)),
            "cpu_world": cpu / n, "start_s": start_s, "calls_world": len(steps) / n,
            "gen_call": completion / max(1, len(steps)), "uncached_call": (prompt - cached) / max(1, len(steps)),
            "invalid": sum(1 for s in steps if not s.get("valid")) / max(1, len(steps)),
            "capped": capped / max(1, len(last)), "worlds": len(records.worlds),
            "failed": sum(1 for w in records.worlds if w.get("failed")),
            "world_s": [float(w.get("clock_end") or 0.0) for w in records.worlds],
            "world_calls": [int(w.get("n_steps") or 0) for w in records.worlds],
            "threads": f"{started_with['threads']}/{started_with['threads_batch']}",
            "runtime": started_with["runtime"]}


COLUMNS = (("s_world", "s/world", "{:.1f}"), ("s_call", "s/call", "{:.2f}"), ("cpu_world", "cpu s/world", "{:.1f}"),
           ("calls_world", "calls/world", "{:.1f}"), ("gen_call", "gen tok/call", "{:.1f}"),
           ("uncached_call", "new prompt tok/call", "{:.0f}"), ("invalid", "unparsed", "{:.0%}"),
           ("capped", "ran to limit", "{:.0%}"))


def table(name: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    head = f"{'setting':<44}" + "".join(f"{h:>20}" for _, h, _ in COLUMNS) + "   runs"
    print(f"\n{name}: medians over runs (one run = a fresh server, then its worlds)\n{head}")
    for key, runs in rows.items():
        cells = "".join(f"{fmt.format(statistics.median(r[k] for r in runs)):>20}" for k, _, fmt in COLUMNS)
        every = "/".join(f"{r['s_world']:.0f}" for r in runs)
        print(f"{key:<44}{cells}   {every} s")


def spread(got: dict[str, Any]) -> str:
    """How much the worlds of one measurement differ: their own clocks (first call to
    last reply) and calls, and a normal 95 % interval for their mean (a world's length
    is the model's doing, so the figure needs several worlds to mean anything)."""
    secs, calls = got["world_s"], got["world_calls"]
    if not secs:
        return "no worlds"
    half = 1.96 * statistics.stdev(secs) / len(secs) ** 0.5 if len(secs) > 1 else float("nan")
    mean = statistics.fmean(secs)
    return (f"per world: {mean:.1f} s (95 % interval of the mean {mean - half:.1f}-{mean + half:.1f} s, n={len(secs)}), "
            f"each {' '.join(f'{x:.1f}' for x in secs)} s; calls {' '.join(str(c) for c in calls)}")


def result(name: str, per_world: float, per_call: float, calls: float, what: str) -> None:
    limit = next((v for k, v in TARGETS.items() if k in name), None)
    print(f"RESULT name=local-{name} figure=s_per_world:{per_world:.1f} reference=- ratio=- "
          f"target={'<=' + str(int(limit)) + 's' if limit else '-'} "
          f"met={'-' if limit is None else 'yes' if per_world <= limit else 'no'} "
          f"s_per_call={per_call:.2f} calls_per_world={calls:.1f}  ({what})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", type=int, default=None, help="worlds per measurement (one study; its first world "
                                                              f"pays for the cold prompt cache); default {WORLDS}, else 8")
    ap.add_argument("--constrained", action="store_true")
    ap.add_argument("--set", default="", help="one setting instead of the catalogue's: key=value,...")
    ap.add_argument("--sweep", action="store_true", help="alternate settings over rounds, print medians")
    ap.add_argument("--settings", default=SWEEP, help="the sweep's settings, separated by ';'")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="", help="comma-separated catalogue names (default: all installed)")
    args = ap.parse_args()
    wanted = [m for m in args.models.split(",") if m]
    for name in load_local_catalogue():
        if wanted and name not in wanted:
            continue
        if not installed(name):
            print(f"{name}: not installed (workbench models fetch {name}); skipped")
            continue
        texts = args.settings.split(";") if args.sweep else [args.set]
        settings = {}
        for text in texts:
            s = parse_setting(text)
            if args.constrained:
                s["constrained"] = True
            settings[label(s)] = s
        rows: dict[str, list[dict[str, Any]]] = {k: [] for k in settings}
        print(f"{name}: catalogue {catalogue_path()}; load average before {load()}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds if args.sweep else 1):
                for key, s in settings.items():
                    worlds = args.worlds or next((v for k, v in WORLDS.items() if k in name), 8)
                    got = measure(name, s, worlds, Path(tmp))
                    rows[key].append(got)
                    print(f"  round {r + 1} {key}: {got['s_world']:.1f} s/world ({got['s_call']:.2f} s/call), "
                          f"{got['cpu_world']:.1f} cpu s/world, "
                          f"{got['calls_world']:.1f} calls/world, {got['gen_call']:.1f} gen tok/call, "
                          f"{got['uncached_call']:.0f} new prompt tok/call, {got['invalid']:.0%} unparsed, "
                          f"{got['capped']:.0%} ran to limit, {got['failed']} failed; threads {got['threads']}, "
                          f"runtime {got['runtime']}, server start "
                          f"{got['start_s']:.1f} s; load {load()}", flush=True)
                    print(f"    {spread(got)}", flush=True)
        table(name, rows)
        print(f"load average after {load()}")
        first = next(iter(rows))
        result(name, statistics.median(r["s_world"] for r in rows[first]),
               statistics.median(r["s_call"] for r in rows[first]), statistics.median(r["calls_world"] for r in rows[first]),
               f"{first}; {'/'.join(sorted({r['runtime'] for r in rows[first]}))} llama.cpp build")


if __name__ == "__main__":
    main()
