"""Issue 17's resume guarantee on the HTTP path: a `workbench run` against an
OpenAI-compatible server (the lean request path), killed with SIGKILL mid-study and
run again, ends with the same records as an uninterrupted run.

"The same" is every world record and each world's steps after
:func:`workbench.replay.comparable`, without what only a clock or an invocation
decides: wall-clock timing, latencies and the world clock built from them, retry
attempts (each carries its own times and request id), the time a call waited for a connection slot, the id the server gave each
response (its own counter) and the invocation number.
The lockstep scheduler makes the order of steps independent of latency, so
everything an agent saw and did is compared."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.fake_openai import FAKE_KEY, FakeOpenAIProcess
from tests.fault_study import write_catalogue, write_study
from workbench.records import WORLDS, load_run, read_jsonl
from workbench.replay import comparable

CLOCK_KEYS = {"timing", "latency_s", "t_issue", "t_done", "attempts", "clock", "clock_end", "wall_s", "run",
              "response_id", "queue_s"}


def scripted_agent(body: dict[str, Any]) -> str:
    """Deterministic, and different per task: 2 to 5 looks, then submit."""
    task = body["messages"][1]["content"]
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    looks = 2 + sum(map(ord, task)) % 4
    if n == 0:
        return f'{{"op": "write", "key": "note", "value": {len(task) % 97}}}'
    return '{"op": "list"}' if n <= looks else '{"op": "submit", "answer": 0}'


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK_KEYS}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def _records(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    run = load_run(out)
    worlds = {w["world_id"]: _without_clock(comparable(w)) for w in run.worlds}
    steps = {wid: [_without_clock(comparable(s)) for s in ss] for wid, ss in run.steps.items()}
    return worlds, steps


@pytest.fixture()
def server():
    srv = FakeOpenAIProcess(delay_s=0.01, responder=scripted_agent).start()
    yield srv
    srv.stop()


def test_kill_9_of_an_http_study_then_resume_equals_an_uninterrupted_run(server, tmp_path):
    catalogue = write_catalogue(tmp_path, server.url, timeout_s=5.0)
    study = write_study(tmp_path, worlds=36, concurrency=8)  # enough for a kill mid-run, a third of the way
    text = study.read_text().replace("max_steps: 6", "max_steps: 6\n  scheduler: lockstep")
    study.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_MODELS": str(catalogue), "OPENAI_API_KEY": FAKE_KEY}

    def cmd(out: Path) -> list[str]:
        return [sys.executable, "-m", "workbench", "run", str(study), "--out", str(out), "--no-progress",
                "--no-summary"]

    out = tmp_path / "killed"
    proc = subprocess.Popen(cmd(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while (not (out / WORLDS).exists() or (out / WORLDS).read_bytes().count(b"\n") < 12) \
            and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = (out / WORLDS).read_bytes().count(b"\n")
    assert 0 < partial < 36, f"the kill landed outside the run ({partial} of 36 worlds)"

    res = subprocess.run(cmd(out), env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    ids = [r["world_id"] for r in read_jsonl(out / WORLDS)]
    assert len(ids) == 36 == len(set(ids))  # no world twice, none lost

    ref = tmp_path / "ref"
    res = subprocess.run(cmd(ref), env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    worlds, steps = _records(out)
    ref_worlds, ref_steps = _records(ref)
    assert worlds == ref_worlds
    assert steps == ref_steps
    assert sum(len(v) for v in steps.values()) > 36 * 3  # the agents really took several steps
