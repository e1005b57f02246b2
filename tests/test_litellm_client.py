"""Real litellm calls against a fake OpenAI-compatible server on 127.0.0.1.

Everything runs offline: litellm's offline settings are set before it is first
imported, and the only server is tests/fake_openai.py, started per module."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import asyncio  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from email.utils import formatdate  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from tests.conftest import (  # noqa: E402
    MONITOR_PROMPT,
    ROOT,
    run_closing,  # noqa: E402
    run_world,
    study_dict,
)
from tests.fake_openai import FAKE_KEY, Action, FakeOpenAI, malformed, ok, route_litellm_to, slow, status  # noqa: E402
from workbench.models.base import ModelRequest  # noqa: E402
from workbench.models.budget import Budget, is_budget_cut  # noqa: E402
from workbench.models.catalogue import CatalogueError, ModelEntry, load_catalogue  # noqa: E402

KEY = FAKE_KEY
MSGS = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def server():
    srv = FakeOpenAI().start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(server, monkeypatch):
    server.reset()
    server.delay_s = 0.0
    route_litellm_to(server, monkeypatch, KEY)
    yield server
    server.reset()


def entry(server: FakeOpenAI, **kw) -> ModelEntry:
    base = dict(name="t", route="openai/fake-model", api_base=server.url, max_connections=64, rpm=None,
                max_attempts=4, timeout_s=5, backoff_base_s=0.01, backoff_max_s=0.05, max_retry_after_s=5)
    base.update(kw)
    return ModelEntry(**base)


def client(server: FakeOpenAI, seed: int = 1, **kw):
    from workbench.models.litellm_client import LiteLLMClient

    opts = {k: kw.pop(k) for k in ("budget", "cache_dir", "timeout_s", "max_attempts") if k in kw}
    return LiteLLMClient(entry(server, **kw), seed=seed, **opts)


run = run_closing  # tests.conftest: one loop per call, its clients closed


def call(c, params: dict | None = None, messages=None):
    return run(c.complete(ModelRequest(messages=messages or MSGS, params=params or {})))


# -- attempts, retries, faults ---------------------------------------------------------------------

def test_429_429_200_makes_exactly_three_attempts_and_honours_retry_after(fake):
    c = client(fake)
    later = formatdate(time.time() + 2.5, usegmt=True)  # an HTTP date: wait until then (1-s resolution)
    fake.push(status(429, retry_after=1), status(429, retry_after=later), ok("done"))
    r = call(c)
    assert r.error is None and r.text == "done"
    assert fake.count == 3  # no hidden retries in litellm or the openai SDK
    assert [a["n"] for a in r.attempts] == [1, 2, 3]
    assert [a["status"] for a in r.attempts] == [429, 429, 200]
    assert [a.get("error") for a in r.attempts] == ["RateLimitError", "RateLimitError", None]
    assert r.attempts[0]["retry_after_s"] == 1.0 and r.attempts[0]["wait_s"] == 1.0
    assert 0.0 < r.attempts[1]["retry_after_s"] <= 1.5
    t = [q["t"] for q in fake.requests]
    assert t[1] - t[0] >= 1.0  # measured at the server: the header was honoured
    assert t[2] - t[1] >= r.attempts[1]["retry_after_s"] - 0.01
    assert r.latency_s >= (t[2] - t[0])  # the call's latency spans its retries
    assert r.attempts[1]["start_s"] >= r.attempts[0]["start_s"] + 1.0


def test_exhausted_attempts_give_an_error_reply_with_the_cause_never_an_exception(fake):
    fake.push(*[status(500, message="upstream exploded")] * 3)
    r = call(client(fake, max_attempts=3))
    assert fake.count == 3 and len(r.attempts) == 3
    assert r.failed and r.text == ""
    assert r.error.startswith("InternalServerError:") and "upstream exploded" in r.error
    assert all(a["status"] == 500 for a in r.attempts)
    waits = [a.get("wait_s") for a in r.attempts]
    assert waits[-1] is None and all(0 < w <= 0.1 for w in waits[:-1])  # seeded backoff, none after the last


def test_backoff_jitter_is_drawn_from_the_seed(fake):
    a, b, c = client(fake, seed=7), client(fake, seed=7), client(fake, seed=8)
    seq = lambda cl: [cl.backoff(n) for n in (1, 2, 3)]  # noqa: E731
    assert seq(a) == seq(b) != seq(c)


def test_non_retryable_status_stops_at_once(fake):
    fake.push(status(401, message="bad key"), ok("never"))
    r = call(client(fake))
    assert fake.count == 1 and len(r.attempts) == 1
    assert r.error.startswith("AuthenticationError:")


def test_timeout_is_per_attempt_and_retried(fake):
    fake.push(slow(1.5), slow(1.5))
    t0 = time.monotonic()
    r = call(client(fake, timeout_s=0.3, max_attempts=2))
    assert r.failed and r.error.startswith("Timeout") and len(r.attempts) == 2
    assert all(a["error"] == "Timeout" and a["duration_s"] < 1.4 for a in r.attempts)
    assert time.monotonic() - t0 < 2.5


def test_malformed_body_is_retried_then_succeeds(fake):
    fake.push(malformed(), ok("fine"))
    r = call(client(fake))
    assert r.text == "fine" and fake.count == 2
    # a 200 whose body is not JSON: its own cause, not a server error (litellm reports it as a made-up 500)
    assert r.attempts[0]["status"] == 200 and r.attempts[0]["error"] == "MalformedResponse"


def test_slow_reply_within_timeout_is_measured(fake):
    fake.push(slow(0.4, "late"))
    r = call(client(fake))
    assert r.text == "late" and len(r.attempts) == 1 and r.latency_s >= 0.4
    assert r.attempts[0]["duration_s"] >= 0.4


@pytest.mark.parametrize("text", [
    '```json\n{"op": "list"}\n```',
    'I will look first.\n{"op": "list"}',
    '{"op": "list"}\n{"op": "submit", "answer": 3}',
])
def test_reply_text_reaches_the_world_untouched(fake, text):
    fake.push(ok(text))
    assert call(client(fake)).text == text


def test_returned_model_id_usage_cost_and_reasoning_are_recorded(fake):
    fake.push(ok('{"op": "list"}', model="fake-model-2026-11-04", reasoning="Let me list first.", usage=(1000, 500)))
    r = call(client(fake, input_usd_per_mtok=1.0, output_usd_per_mtok=2.0))
    assert r.model_returned == "fake-model-2026-11-04" and r.route == "openai/fake-model"
    assert r.reasoning == "Let me list first."
    assert r.usage["prompt_tokens"] == 1000 and r.usage["completion_tokens"] == 500
    assert r.cost_usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6) and r.extra["cost_source"] == "catalogue"
    assert r.extra["api_base"] == fake.url and r.extra["api_base_used"].startswith("http://127.0.0.1")
    assert r.extra["key_source"] == "env:OPENAI_API_KEY"
    fake.push(ok("x", model="gpt-4o-2024-08-06", usage=(1000, 0)))  # litellm's offline map knows this one
    r2 = call(client(fake))
    assert r2.extra["cost_source"] == "litellm" and r2.cost_usd > 0
    fake.push(ok("x"))
    assert call(client(fake)).cost_usd is None  # unknown model, no catalogue price: unknown, not 0


# -- parameters ----------------------------------------------------------------------------------

def test_dropped_and_changed_params_are_recorded_and_not_sent(fake):
    c = client(fake, supports_temperature=False, efforts=["low", "medium"], effort_fallback="low",
               max_tokens=128, reasoning_effort="medium")
    r = call(c, {"temperature": 0.7, "top_k": 5, "reasoning_effort": "none", "seed": 3})
    assert r.params_requested == {"temperature": 0.7, "top_k": 5, "reasoning_effort": "none", "seed": 3,
                                  "max_tokens": 128}
    assert r.params_sent == {"reasoning_effort": "low", "seed": 3, "max_tokens": 128}
    assert r.params_dropped == ["temperature", "top_k"]
    assert "supports_temperature false" in r.extra["params_dropped_why"]["temperature"]
    assert "get_supported_openai_params" in r.extra["params_dropped_why"]["top_k"]
    assert r.extra["param_changes"] == [{"param": "reasoning_effort", "requested": "none", "sent": "low",
                                         "reason": "effort not among ['low', 'medium']: catalogue effort_fallback"}]
    assert r.extra["defaults_from_catalogue"] == ["max_tokens"]
    body = fake.requests[0]["body"]
    assert "temperature" not in body and "top_k" not in body
    assert body["reasoning_effort"] == "low" and body["seed"] == 3 and body["max_tokens"] == 128


def test_an_effort_the_model_takes_none_of_is_omitted_and_recorded(fake):
    r = call(client(fake, efforts=[], reasoning_effort="low"))
    assert "reasoning_effort" not in r.params_sent and r.params_dropped == ["reasoning_effort"]
    assert r.extra["param_changes"][0]["sent"] is None
    assert "reasoning_effort" not in fake.requests[0]["body"]


def test_a_parameter_the_provider_rejects_is_dropped_recorded_and_retried(fake):
    fake.push(status(400, message="Unsupported value: 'temperature' does not support 0.2 with this model. "
                                  "Only the default (1) value is supported."), ok("ok"))
    r = call(client(fake), {"temperature": 0.2})
    assert r.text == "ok" and fake.count == 2 and len(r.attempts) == 2
    assert r.attempts[0]["status"] == 400 and r.attempts[0]["adapted"]["param"] == "temperature"
    assert "temperature" in r.params_dropped and "temperature" not in r.params_sent
    assert "temperature" in fake.requests[0]["body"] and "temperature" not in fake.requests[1]["body"]


def test_litellm_rejecting_temperature_for_a_reasoning_model_is_recorded_as_a_local_attempt(fake):
    # litellm itself refuses temperature != 1 for gpt-5 models while reasoning is on (no request goes out)
    r = call(client(fake, route="openai/gpt-5-mini"), {"temperature": 0.5, "reasoning_effort": "low"})
    assert r.error is None and fake.count == 1
    assert [a.get("local", False) for a in r.attempts] == [True, False]
    assert r.attempts[0]["error"] == "UnsupportedParamsError" and r.attempts[0]["adapted"]["param"] == "temperature"
    assert r.params_sent == {"reasoning_effort": "low"} and r.params_dropped == ["temperature"]
    assert fake.requests[0]["body"]["reasoning_effort"] == "low" and "temperature" not in fake.requests[0]["body"]


# -- limits ----------------------------------------------------------------------------------------

def test_connection_limit_is_shared_by_all_clients_of_a_model(fake):
    fake.delay_s = 0.2
    clients = [client(fake, seed=i, max_connections=2) for i in range(6)]
    assert len({id(c.limits) for c in clients}) == 1

    async def go():
        return await asyncio.gather(*(c.complete(ModelRequest(MSGS)) for c in clients))

    t0 = time.monotonic()
    replies = run(go())
    assert all(r.error is None for r in replies)
    assert clients[0].limits.peak_in_flight == 2
    assert time.monotonic() - t0 >= 0.6 - 0.05  # 6 calls, 2 at a time, 0.2 s each
    assert sum(1 for r in replies if r.attempts[0].get("queued_s", 0) > 0.1) >= 3


def test_requests_per_minute_window():
    from workbench.models.litellm_client import ModelLimits

    lim = ModelLimits(10, rpm=2, window_s=0.4)

    async def go():
        return [await lim.rpm_slot(asyncio.sleep) for _ in range(3)]

    t0 = time.monotonic()
    waits = asyncio.run(go())
    assert waits[:2] == [0.0, 0.0] and waits[2] > 0.3 and time.monotonic() - t0 >= 0.39


# -- budget ----------------------------------------------------------------------------------------

def test_budget_is_never_exceeded_by_concurrent_calls(fake):
    fake.delay_s = 0.05
    prices = dict(input_usd_per_mtok=10.0, output_usd_per_mtok=100.0, max_tokens=100)
    probe = client(fake, **prices)
    per_call = probe.estimate_cost(MSGS, {"max_tokens": 100})
    budget = Budget(per_call * 3.5)
    clients = [client(fake, seed=i, budget=budget, **prices) for i in range(12)]

    async def go():
        return await asyncio.gather(*(c.complete(ModelRequest(MSGS)) for c in clients))

    replies = run(go())
    done = [r for r in replies if not r.failed]
    cut = [r for r in replies if r.failed]
    assert 3 <= len(done) and len(done) + len(cut) == 12 and cut
    assert all(is_budget_cut(r.error) and not r.attempts for r in cut)
    assert fake.count == len(done)  # refused calls never reached the server
    assert budget.spent <= budget.limit_usd
    assert budget.spent == pytest.approx(sum(r.cost_usd for r in done))
    assert budget.exhausted and budget.reserved == 0 and budget.overruns == 0
    assert all(r.extra["budget"]["charged_usd"] == r.cost_usd for r in done)


def test_budget_object():
    b = Budget(1.0)
    r1 = b.reserve(0.6)
    assert r1.granted and b.remaining == pytest.approx(0.4) and not b.exhausted
    assert not b.reserve(0.5).granted and b.exhausted
    b.settle(r1, 0.2)
    assert b.spent == pytest.approx(0.2) and b.reserved == 0
    b.charge(None)
    assert b.snapshot()["unpriced"] == 1
    with pytest.raises(ValueError):
        Budget(-1)


# -- cache -----------------------------------------------------------------------------------------

def test_cache_marks_hits_avoids_server_calls_and_charges_nothing(fake, tmp_path):
    budget = Budget(10.0)
    prices = dict(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    fake.push(ok("cached text", reasoning="why", model="fake-returned"))
    first = call(client(fake, cache_dir=tmp_path / "cache", budget=budget, **prices), {"temperature": 0.5})
    spent = budget.spent
    assert fake.count == 1 and first.extra["cache_hit"] is False and spent > 0
    second = call(client(fake, seed=99, cache_dir=tmp_path / "cache", budget=budget, **prices), {"temperature": 0.5})
    assert fake.count == 1  # served from the cache
    assert second.extra["cache_hit"] is True and second.cost_usd == 0.0 and second.attempts == []
    assert (second.text, second.reasoning, second.model_returned) == ("cached text", "why", "fake-returned")
    assert second.latency_s == first.latency_s and second.extra["cached"]["cost_usd"] == first.cost_usd
    assert budget.spent == spent
    call(client(fake, cache_dir=tmp_path / "cache", **prices), {"temperature": 0.6})  # other params: a miss
    assert fake.count == 2
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 2 and json.loads(files[0].read_text())["key"] == files[0].stem


def test_a_key_from_dotenv_is_used_and_never_recorded_or_logged(fake, tmp_path, monkeypatch, caplog):
    import logging

    caplog.set_level(logging.DEBUG)  # litellm's own debug lines included
    secret = "sk-dotenv-FAKE-0123456789abcdefghij"
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"# keys\nexport OPENAI_API_KEY='{secret}'\n")
    fake.push(ok("hi"), Action(401, error_message="denied.", echo_auth=True))
    c = client(fake, max_attempts=1)
    good, bad = call(c), call(c)
    assert good.text == "hi" and good.extra["key_source"] == ".env:OPENAI_API_KEY" and fake.auth_seen == 2
    assert bad.error.startswith("AuthenticationError") and "[REDACTED]" in bad.error
    assert secret not in json.dumps([good.to_record(), bad.to_record()])
    assert "OPENAI_API_KEY" not in os.environ  # .env is read, never put into the environment
    assert any("LiteLLM" in r.name for r in caplog.records) and secret not in caplog.text


def test_failed_calls_are_not_cached(fake, tmp_path):
    fake.push(status(401))
    call(client(fake, cache_dir=tmp_path))
    assert not list(tmp_path.rglob("*.json"))


# -- monitor ---------------------------------------------------------------------------------------

def test_monitor_labels_a_step(fake):
    from workbench.models.monitor import Monitor

    mon = Monitor(client(fake, temperature=0.0), template=MONITOR_PROMPT.read_text(),
                  labels=["mentions_other", "none"], params={"temperature": 0.0})
    fake.push(ok('{"label": "mentions_other"}'), ok("Label: none."), status(401))
    a = run(mon.label("Maybe my partner wrote it."))
    assert a["label"] == "mentions_other" and a["error"] is None and a["route"] == "openai/fake-model"
    assert a["usage"]["completion_tokens"] > 0 and set(a) >= {"label", "raw", "route", "usage", "cost", "error"}
    assert "Maybe my partner wrote it." in fake.requests[0]["body"]["messages"][-1]["content"]
    assert run(mon.label("x"))["label"] == "none"
    bad = run(mon.label("x"))
    assert bad["label"] is None and bad["error"].startswith("AuthenticationError")


# -- routes and the catalogue ------------------------------------------------------------------------

def test_catalogue_names_and_raw_routes_build_litellm_clients(fake):
    from workbench.models.factory import check_route, make_client
    from workbench.models.litellm_client import LiteLLMClient

    for route in ("gpt-5.4-mini", "claude-sonnet-5", "gemini-3.7-flash", "openrouter-gpt-5.4-mini",
                  "openai/gpt-5.4", "anthropic/claude-sonnet-5", "gemini/gemini-3.7-flash",
                  "openrouter/openai/gpt-5.4-mini", "hosted_vllm/qwen", "ollama/llama3.2"):
        check_route(route)
        c = make_client(route, seed=1, script=["ignored"], latency_s=1.0)
        assert isinstance(c, LiteLLMClient) and c.virtual_time is False
    assert make_client("local-fake", seed=1).api_base == fake.url  # api_base_env overrides api_base
    mini = make_client("gpt-5.4-mini", seed=1)
    assert mini.route == "openai/gpt-5.4-mini" and mini.entry.reasoning_effort == "low"
    with pytest.raises(ValueError, match="unknown model route 'gpt-9'.*gpt-5.4-mini"):
        check_route("gpt-9")
    with pytest.raises(ValueError, match="names no model"):
        check_route("openai/")
    with pytest.raises(TypeError, match="unknown option"):
        make_client("local-fake", seed=1, cache_directory="x")


def test_the_shipped_catalogue_has_the_papers_nine_models():
    cat = load_catalogue(ROOT / "params" / "models.yaml")
    nine = ["gpt-6-astra", "gpt-5.4", "gpt-5.4-mini", "gpt-5-nano", "claude-haiku-4-5", "claude-sonnet-5",
            "gemini-3.1-pro-preview", "gemini-3.8-flash", "gemini-3.7-flash"]
    for name in nine:
        e = cat.get(name)
        assert e.max_tokens == 4096 and e.reasoning_effort == "low" and e.temperature == 1.0 and e.priced()
    assert cat.get("gpt-5.4").supports_temperature is False and cat.get("claude-haiku-4-5").efforts == []
    assert cat.get("local-fake").api_base.startswith("http://127.0.0.1")


@pytest.mark.parametrize("body, where, what", [
    ({"models": {"m": {"route": "nosuch/x"}}}, "models.m.route", "provider/model"),
    ({"models": {"m": {"route": "openai/x", "rpm": 0}}}, "models.m.rpm", "greater than or equal to 1"),
    ({"models": {"m": {"route": "openai/x", "temprature": 1}}}, "models.m.temprature", "unknown field"),
    ({"models": {"m": {"route": "openai/x", "api_key": "sk-x"}}}, "models.m.api_key", "never go into a catalogue"),
    ({"models": {"a/b": {"route": "openai/x"}}}, "models.a/b", "no '/'"),
    ({"defaults": {"max_attempts": 0}, "models": {}}, "defaults.max_attempts", "greater than or equal to 1"),
    ({"models": {"m": {"route": "openai/x", "efforts": ["low"], "effort_fallback": "high"}}}, "models.m",
     "effort_fallback"),
])
def test_catalogue_errors_name_file_and_field(tmp_path, body, where, what):
    p = tmp_path / "models.yaml"
    p.write_text(yaml.safe_dump(body))
    with pytest.raises(CatalogueError) as err:
        load_catalogue(p)
    assert err.value.file == str(p) and err.value.path == where and what in err.value.message


def test_a_study_naming_an_unknown_model_fails_at_load(write_study):
    from workbench.params import ParamsError, load_study

    with pytest.raises(ParamsError, match=r"cells\[0\]\.model: unknown model route 'gpt-4.9'"):
        load_study(write_study(study_dict(cells=[{"model": "gpt-4.9"}])))


def test_importing_the_package_does_not_import_litellm():
    code = ("import sys, workbench, workbench.study, workbench.params, workbench.models.factory, "
            "workbench.models.litellm_client, workbench.models.monitor; "
            "from workbench.models.factory import check_route; check_route('gpt-5.4-mini'); "
            "assert 'litellm' not in sys.modules, 'litellm imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


# -- through the study runner ------------------------------------------------------------------------

def _agent_script(body: dict) -> str:
    """A simple deterministic agent for the fake server: list, write, list, submit."""
    msgs = body["messages"]
    n = sum(1 for m in msgs if m["role"] == "assistant")
    return ['{"op": "list"}', '{"op": "write", "key": "note", "value": 1}', '{"op": "list"}',
            '{"op": "submit", "answer": 0}'][min(n, 3)]


def test_an_api_key_never_reaches_any_output_file(fake, write_study, tmp_path, monkeypatch):
    from workbench.params import load_study
    from workbench.study import run_study

    other = "sk-ant-FAKE-dotenv-zyxwvutsrqponmlk"
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={other}\n")
    seen = {"n": 0}

    def responder(body):
        seen["n"] += 1
        if seen["n"] == 9:  # one call fails with a provider message that echoes the key, as real ones do
            return Action(401, error_message="denied.", echo_auth=True)
        return _agent_script(body)

    fake.responder = responder
    spec = study_dict(cells=[{"model": "local-fake", "sampling": {"temperature": 0.5}}], worlds_per_cell=3,
                      concurrency=3)
    out = tmp_path / "run"
    summary = run_study(load_study(write_study(spec)), out, progress=False)
    assert summary.finished == 3 and summary.failed == 1
    assert fake.auth_seen == fake.count > 0  # the key was really sent
    worlds = [json.loads(x) for x in (out / "worlds.jsonl").read_text().splitlines()]
    failed = [w for w in worlds if w["failed"]]
    assert len(failed) == 1 and failed[0]["failed"]["error"].startswith("AuthenticationError")
    assert "[REDACTED]" in failed[0]["failed"]["error"]  # the echoed key was there, and was removed
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != ".env"]
    assert any(p.name == "steps.jsonl" for p in files)
    for p in files:
        data = p.read_bytes()
        for secret in (KEY, other, KEY[8:], "abcdefghijklmnopqrstuv"):
            assert secret.encode() not in data, f"{secret[:6]}... leaked into {p}"
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert {s["reply"]["extra"]["key_source"] for s in steps} == {"env:OPENAI_API_KEY"}
    assert all(s["reply"]["params_sent"].get("temperature") == 0.5 for s in steps)


def _strip(metrics: dict) -> dict:
    drop = {"world_id", "cell_id", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s"}
    return {k: v for k, v in metrics.items() if k not in drop}


def test_the_same_world_through_the_fake_server_and_scripted_replies_gives_the_same_metrics(fake, write_study):
    w = '{"op":"write","key":"$own_key","value":$own_value}'
    r = '{"op":"read","key":"$partner_key"}'
    agents = {
        "pair_a": {"script": ['{"op":"list"}', w, '{"op":"list"}', r, '{"op":"submit","answer":$joint_answer}']},
        "pair_b": {"script": [w, '{"op":"list"}', r, "I think the answer is\n{\"op\":\"submit\",\"answer\":7}"]},
        "solo_1": {"script": ['```json\n{"op":"write","key":"result","value":$answer}\n```',
                              '{"op":"submit","answer":$answer}']},
        "solo_2": {"script": ['{"op":"read","key":"result"}', '{"op":"list"}\n{"op":"submit","answer":1}',
                              '{"op":"submit","answer":$answer}']},
    }
    scripted = run_world(write_study(study_dict(cells=[{"model": "scripted", "scheduler": "lockstep",
                                                        "agents": agents}], worlds_per_cell=1), "s.yaml"))
    by_task: dict[str, list[str]] = {}
    for a in scripted.world["agents"]:
        by_task[a["task_text"]] = [s["reply"]["text"] for s in scripted.steps if s["agent"] == a["agent"]]

    def responder(body):
        msgs = body["messages"]
        return by_task[msgs[1]["content"]][sum(1 for m in msgs if m["role"] == "assistant")]

    fake.responder = responder
    real = run_world(write_study(study_dict(cells=[{"model": "local-fake", "scheduler": "lockstep"}],
                                            worlds_per_cell=1), "f.yaml"))
    assert fake.count == len(scripted.steps) == len(real.steps)
    assert _strip(real.world["metrics"]) == _strip(scripted.world["metrics"])
    assert [(s["agent"], s["op"]) for s in real.steps] == [(s["agent"], s["op"]) for s in scripted.steps]
    m = real.world["metrics"]
    assert m["cross_agent_access"] and m["pair_write"] and m["invalid_replies"] >= 0
    assert all(s["reply"]["model_returned"] == "fake-model" and s["reply"]["attempts"] for s in real.steps)
    assert real.world["agents"][0]["model_returned"] == ["fake-model"]


# the world cancels its other agents' calls when one fails; litellm then drops an inner coroutine unawaited
@pytest.mark.filterwarnings("ignore:coroutine 'OpenAIChatCompletion.acompletion' was never awaited")
def test_a_world_whose_call_keeps_failing_is_recorded_failed_with_the_cause(fake, write_study):
    fake.responder = lambda body: status(503, message="overloaded")
    out = run_world(write_study(study_dict(cells=[{"model": "local-fake"}], worlds_per_cell=1)))
    assert out.world["failed"] and out.world["failed"]["error"].startswith("ServiceUnavailableError")
    failing = [s for s in out.steps if s["reply"]["error"]]
    assert failing and len(failing[0]["reply"]["attempts"]) == 4  # local-fake's max_attempts


@pytest.mark.filterwarnings("ignore:coroutine 'OpenAIChatCompletion.acompletion' was never awaited:RuntimeWarning")
def test_study_budget_stops_new_worlds_cuts_running_ones_and_resumes(fake, write_study, tmp_path):
    from workbench.params import load_study
    from workbench.records import CUT, load_run
    from workbench.study import run_study

    fake.responder = _agent_script
    spec = study_dict(cells=[{"model": "local-fake"}], worlds_per_cell=6, concurrency=2, budget_usd=0.02)
    path = write_study(spec)
    out = tmp_path / "run"
    first = run_study(load_study(path), out, progress=False)
    b = first.budget
    assert b["spent_usd"] <= b["limit_usd"] + 1e-12 and b["reserved_usd"] == 0
    assert first.finished + first.cut + first.not_started == 6
    assert first.finished >= 1 and first.cut + first.not_started >= 1
    cut_lines = (out / CUT).read_text().splitlines() if (out / CUT).exists() else []
    assert len(cut_lines) == first.cut
    assert all(is_budget_cut(json.loads(x)["failed"]["error"]) for x in cut_lines)
    assert "budget of 0.02 USD reached" in first.line()
    done_first = {w["world_id"] for w in load_run(out).worlds}
    assert len(done_first) == first.finished and not any(w["failed"] for w in load_run(out).worlds)

    spec["budget_usd"] = 1.0
    path.write_text(__import__("yaml").safe_dump(spec))
    second = run_study(load_study(path), out, progress=False)
    records = load_run(out)
    assert second.skipped == first.finished and second.finished == 6 - first.finished
    assert len(records.worlds) == 6 and len({w["world_id"] for w in records.worlds}) == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"][0]["budget"]["limit_usd"] == 0.02 and manifest["runs"][0]["cut_worlds"] == first.cut


def test_monitor_labels_go_into_step_records_only(fake, write_study, tmp_path):
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.study import run_study

    def responder(body):
        if "You label one step" in body["messages"][-1]["content"]:
            return '{"label": "none"}'
        return _agent_script(body)

    fake.responder = responder
    spec = study_dict(cells=[{"model": "local-fake"}], worlds_per_cell=1,
                      monitor={"model": "local-fake", "params": {"temperature": 0},
                               "prompt": str(MONITOR_PROMPT)})
    out = tmp_path / "run"
    run_study(load_study(write_study(spec)), out, progress=False)
    records = load_run(out)
    steps = records.steps[records.worlds[0]["world_id"]]
    assert steps and all(s["monitor"]["label"] == "none" for s in steps)
    # never back to an agent: no agent request carries the monitor's prompt
    assert not any("You label one step" in (s["request"]["prompt"] or "") for s in steps)
    assert "monitor" not in records.worlds[0]["metrics"]


# -- tools ---------------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "submit_verdict", "description": "Your verdict.",
                                         "parameters": {"type": "object", "properties": {
                                             "reasoning": {"type": "string"},
                                             "verdict": {"type": "string", "enum": ["ACCEPT", "REJECT"]}},
                                             "required": ["reasoning", "verdict"]}}}


def test_tools_are_sent_and_native_tool_calls_come_back_as_raw_json(fake):
    fake.push(Action(tool_calls=[("submit_verdict", {"reasoning": "log complete", "verdict": "ACCEPT"}),
                                 ("submit_verdict", '{"verdict": ')]))
    messages = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "get_log", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "[]"}]
    r = run(client(fake).complete(ModelRequest(messages=messages, tools=[TOOL])))
    body = fake.requests[-1]["body"]
    assert body["tools"][0]["function"]["name"] == "submit_verdict"
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "c0", "content": "[]"}
    assert r.error is None and r.text == ""
    assert [c["name"] for c in r.tool_calls] == ["submit_verdict", "submit_verdict"]
    assert json.loads(r.tool_calls[0]["arguments"]) == {"reasoning": "log complete", "verdict": "ACCEPT"}
    assert r.tool_calls[1]["arguments"] == '{"verdict": '  # malformed arguments are recorded as written
    assert r.tool_calls[0]["id"] and r.to_record()["tool_calls"] == r.tool_calls


def test_a_plain_text_reply_has_no_tool_calls(fake):
    fake.push(ok('{"tool": "get_log", "arguments": {}}'))
    r = run(client(fake).complete(ModelRequest(messages=MSGS, tools=[TOOL])))
    assert r.tool_calls == [] and r.text.startswith('{"tool"')
