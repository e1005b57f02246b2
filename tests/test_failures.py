"""Failures that are loud and classed, resumes that finish them, and every request accounted for."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import json  # noqa: E402

import pytest  # noqa: E402

from tests.conftest import MONITOR_PROMPT  # noqa: E402
from tests.fake_openai import FAKE_KEY, FakeOpenAI, status  # noqa: E402
from tests.fault_study import agent_script, fault_run, write_catalogue, write_study  # noqa: E402
from workbench.models.failures import INFRASTRUCTURE, MODEL, classify_error  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::ResourceWarning")


@pytest.mark.parametrize("error,cause,cls", [
    ("AuthenticationError: Missing Anthropic API Key", "auth", INFRASTRUCTURE),
    ("InternalServerError: OpenAIException - Missing credentials. Please pass an `api_key`", "auth", INFRASTRUCTURE),
    ("RateLimitError: quota exceeded", "rate limit", INFRASTRUCTURE),
    ("Timeout: Request timed out", "timeout", INFRASTRUCTURE),
    ("APIConnectionError: Connection reset by peer", "network", INFRASTRUCTURE),
    ("ServiceUnavailableError: overloaded", "server error", INFRASTRUCTURE),
    ("MalformedResponse: reply without choices[0].message", "malformed reply", INFRASTRUCTURE),
    ("BudgetExhausted: this call could cost", "budget", INFRASTRUCTURE),
    ("ContextWindowExceededError: too long", "context length", MODEL),
    ("ContentPolicyViolationError: refused", "content policy", MODEL),
    ("SomethingOdd: 401 tokens", "client error", INFRASTRUCTURE),
])
def test_errors_are_classed(error, cause, cls):
    assert classify_error(error) == (cause, cls)
    assert classify_error(None) is None


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    yield srv
    srv.stop()


@pytest.fixture
def faulty(server, tmp_path, monkeypatch):
    from workbench.models.litellm_client import reset_limits

    reset_limits()
    monkeypatch.setenv("WORKBENCH_MODELS", str(write_catalogue(tmp_path, server.url)))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.chdir(tmp_path)
    yield server
    reset_limits()


def test_infrastructure_failures_exit_nonzero_and_resume_completes_them(faulty, tmp_path, capsys, monkeypatch):
    from workbench.cli import main
    from workbench.records import load_run
    from workbench.worlds.stigmergy import fastframes as FF

    monkeypatch.setattr(FF, "MIN_WORLDS", 1)  # rows kept for this small study too

    bad = {"n": 0}

    def responder(body):  # the first world's agents all hit a dead provider
        if "world-zero" in bad and body["messages"][1]["content"] in bad["world-zero"]:
            return status(503, message="overloaded")
        return agent_script(body)

    faulty.responder = lambda body: status(503, message="overloaded")
    study = write_study(tmp_path, 3, concurrency=3)
    out = tmp_path / "run"
    rc = main(["run", str(study), "--out", str(out), "--no-progress", "--no-summary"])
    text = capsys.readouterr()
    assert rc == 1
    assert "failed (infrastructure): 3 worlds: server error 3" in text.out
    assert "not complete" in text.err
    worlds = load_run(out).worlds
    assert all(w["failed"]["class"] == INFRASTRUCTURE and w["failed"]["cause"] == "server error" for w in worlds)

    # kept on request: nothing runs, still non-zero
    rc = main(["run", str(study), "--out", str(out), "--no-progress", "--no-summary", "--no-retry-failed"])
    assert rc == 1 and "kept as recorded" in capsys.readouterr().out

    faulty.responder = agent_script  # the provider is back
    rc = main(["run", str(study), "--out", str(out), "--no-progress", "--no-summary"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "3 worlds were infrastructure failures of an earlier run and were run again" in text
    records = load_run(out)
    assert len(records.worlds) == 3 and not any(w["failed"] for w in records.worlds)
    assert {w["run"] for w in records.worlds} == {3}

    # the rows kept beside the records: those of each world's latest run, not of its failed attempt
    parts = FF.kept_parts(list(records.steps.sources), 3, list(FF.STANDARD_WORLD_KEYS), [None])
    assert parts is not None and sum(len(p["wids"]) for p in parts) == 3
    frame = FF.compute(load_run(out), list(FF.STANDARD_WORLD_KEYS), [None])[("stigmergy.worlds", None, None)]
    assert len(frame) == 3 and not frame["failed"].any()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [len(r["retried"]) for r in manifest["runs"]] == [0, 0, 3]
    assert manifest["runs"][0]["failures"] == [{"class": INFRASTRUCTURE, "cause": "server error", "worlds": 3}]
    assert all(r["cause"] == "server error" and r["run"] == 1 for r in manifest["runs"][2]["retried"])
    lines = (out / "worlds.jsonl").read_text().splitlines()
    assert len(lines) == 6  # the failed attempts stay in the file as history
    for w in records.worlds:  # the same seed as the failed attempt
        first = next(json.loads(x) for x in lines if json.loads(x)["world_id"] == w["world_id"])
        assert first["seed"] == w["seed"]


def test_a_missing_key_is_an_auth_failure_never_retried(server, tmp_path, monkeypatch):
    import asyncio

    from workbench.models.base import ModelRequest
    from workbench.models.catalogue import ModelEntry
    from workbench.models.litellm_client import LiteLLMClient, aclose_clients

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    client = LiteLLMClient(ModelEntry(name="hosted", route="openai/gpt-4o-mini", max_attempts=4, timeout_s=2,
                                      backoff_base_s=0.5), seed=1)

    async def go():
        try:
            return await client.complete(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
        finally:
            await aclose_clients()

    reply = asyncio.run(go())
    assert reply.error and classify_error(reply.error) == ("auth", INFRASTRUCTURE)
    assert len(reply.attempts) == 1  # litellm calls this a 500; it is a credential error, not retried


def test_every_request_the_server_saw_is_in_the_ledger_through_faults_kills_and_resumes(tmp_path):
    result = fault_run(tmp_path, worlds=10, rate=0.3, seed=4, kill_after=30)
    assert sum(result.faults.values()) > 20 and set(result.faults) >= {"429", "500", "timeout", "reset"}
    assert result.runs[0]["killed"]
    assert result.runs[-1]["infrastructure_failed"] == 0
    assert result.server_requests == result.ledger_requests > 0
    from workbench.models.ledger import read_ledger
    from workbench.records import load_run

    ledger_ids = [a["request_id"] for e in read_ledger(tmp_path / "run") for a in e["attempts"] if not a.get("local")]
    assert sorted(ledger_ids) == sorted(result.server_ids)  # request for request, not only in number
    states = {e["state"] for e in read_ledger(tmp_path / "run")}
    assert {"answered", "cancelled"} <= states
    assert len(load_run(tmp_path / "run").worlds) == 10


def test_replay_verify_reproduces_failed_call_and_monitored_worlds(faulty, tmp_path):
    import yaml

    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.replay import verify_world
    from workbench.study import run_study

    def responder(body):
        msgs = body["messages"]
        if "You label one step" in msgs[-1]["content"]:
            return '{"label": "mentions_other"}' if "write" in msgs[-1]["content"] else '{"label": "none"}'
        n = sum(1 for m in msgs if m["role"] == "assistant")
        if n >= 2 and sum(map(ord, msgs[1]["content"])) % 3 == 0:
            return status(500)
        return agent_script(body)

    faulty.responder = responder
    path = write_study(tmp_path, 6, concurrency=3)
    spec = yaml.safe_load(path.read_text())
    spec["monitor"] = {"model": "fault-fake", "prompt": str(MONITOR_PROMPT)}
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "run"
    run_study(load_study(path), out, progress=False)
    records = load_run(out)
    failed = [w for w in records.worlds if w["failed"]]
    monitored = [w for w in records.worlds if any("monitor" in s for s in records.steps[w["world_id"]])]
    assert failed and monitored
    for w in records.worlds:
        assert verify_world(records, w["world_id"]) == [], w["world_id"]


def test_a_missing_key_fails_validate_and_run_before_any_request(server, tmp_path, monkeypatch, capsys):
    import yaml

    from workbench.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("WORKBENCH_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)
    path = write_study(tmp_path, 2)
    spec = yaml.safe_load(path.read_text())
    spec["cells"] = [{"model": "openai/gpt-4o-mini"}]
    path.write_text(yaml.safe_dump(spec))
    for argv in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "run"), "--no-progress"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "OPENAI_API_KEY" in err and "openai/gpt-4o-mini" in err and "no call was made" in err
    assert not (tmp_path / "run").exists()
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={FAKE_KEY}\n")  # a key in ./.env counts
    assert main(["validate", str(path)]) == 0
