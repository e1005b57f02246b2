"""The lean request path (workbench/models/litellm_client/lean.py) records what litellm's path records.

Each test plays the same fake-server exchange twice, once through litellm
(``transport: litellm``) and once through the lean path (``transport: auto`` on a
route it applies to), and compares the replies field by field (timings, which no
two runs share, excepted), the request bodies the server saw, the failure classes,
the budget's accounts and the ledger's lines."""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import asyncio  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.conftest import run_closing
from tests.fake_openai import FAKE_KEY, Action, FakeOpenAI, malformed, ok, reset, route_litellm_to, slow, status  # noqa: E402
from workbench.models.base import ModelRequest  # noqa: E402
from workbench.models.budget import Budget  # noqa: E402
from workbench.models.catalogue import ModelEntry  # noqa: E402
from workbench.models.failures import classify_error  # noqa: E402

MSGS = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Say something."}]
TIMING_KEYS = {"start_s", "duration_s", "request_id", "queued_s"}


@pytest.fixture(scope="module")
def server():
    srv = FakeOpenAI().start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(server, monkeypatch):
    server.reset()
    server.delay_s = 0.0
    route_litellm_to(server, monkeypatch, FAKE_KEY)
    yield server
    server.reset()


def entry(server: FakeOpenAI, transport: str, **kw: Any) -> ModelEntry:
    base = dict(name="t", route="openai/fake-model", api_base=server.url, max_connections=64, rpm=None,
                max_attempts=4, timeout_s=5, backoff_base_s=0.01, backoff_max_s=0.05, max_retry_after_s=5,
                temperature=0.7, max_tokens=64, input_usd_per_mtok=1.0, output_usd_per_mtok=2.0, transport=transport)
    base.update(kw)
    return ModelEntry(**base)


run = run_closing  # tests.conftest: one loop per call, its clients closed


def norm(rec: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between any two runs (timings, request ids)."""
    rec = dict(rec)
    rec.pop("latency_s"), rec.pop("timing")
    rec["extra"] = {k: v for k, v in rec["extra"].items() if k != "queue_s"}
    atts = []
    for a in rec["attempts"]:
        a = {k: v for k, v in a.items() if k not in TIMING_KEYS}
        if "message" in a:  # a timeout says how long it took
            a["message"] = re.sub(r"time taken=[0-9.]+ seconds", "time taken=T seconds", a["message"])
        atts.append(a)
    rec["attempts"] = atts
    if rec.get("error"):
        rec["error"] = re.sub(r"time taken=[0-9.]+ seconds", "time taken=T seconds", rec["error"])
    return rec


def both(server: FakeOpenAI, actions: list[Action], params: dict | None = None, tools: list | None = None,
         n_calls: int = 1, messages: list | None = None, **kw: Any) -> tuple[list[dict], list[dict], list[list[dict]]]:
    """(litellm records, lean records, [litellm bodies, lean bodies]) of the same exchange."""
    from workbench.models.litellm_client import LiteLLMClient

    out, bodies = [], []
    for transport in ("litellm", "auto"):
        server.reset()
        server.push(*actions)
        budget = kw.pop("budget_usd", None)
        b = Budget(budget) if budget is not None else None
        c = LiteLLMClient(entry(server, transport, **kw), seed=3, budget=b)
        assert c.lean is (transport == "auto")
        recs = []
        for _ in range(n_calls):
            r = run(c.complete(ModelRequest(messages=messages or MSGS, params=dict(params or {}), tools=tools)))
            recs.append(r.to_record())
        if b is not None:
            recs.append({"budget_spent": round(b.spent, 12)})
            kw["budget_usd"] = budget
        out.append(recs)
        bodies.append([r["body"] for r in server.requests])
    return out[0], out[1], bodies


def assert_same(server: FakeOpenAI, actions: list[Action], **kw: Any) -> list[dict]:
    slow_recs, lean_recs, (slow_bodies, lean_bodies) = both(server, actions, **kw)
    assert lean_bodies == slow_bodies  # the request as sent, attempt by attempt
    for a, b in zip(slow_recs, lean_recs, strict=True):
        if "budget_spent" in a:
            assert a == b
            continue
        na, nb = norm(a), norm(b)
        for key in sorted(set(na) | set(nb)):
            assert na.get(key) == nb.get(key), f"{key}: litellm {na.get(key)!r} != lean {nb.get(key)!r}"
    return lean_recs


# -- which routes take it ------------------------------------------------------------------------------

def test_the_lean_path_is_taken_only_where_litellm_passes_the_request_through(fake):
    from workbench.models.litellm_client.lean import lean_eligible

    url = fake.url
    assert lean_eligible(entry(fake, "auto"), url)
    assert not lean_eligible(entry(fake, "litellm"), url)  # the catalogue may always ask for litellm
    assert not lean_eligible(entry(fake, "auto"), None)  # no api_base: a hosted provider
    for route in ("openai/gpt-4o", "openai/o3-mini", "openai/gpt-5", "hosted_vllm/fake-model", "anthropic/x"):
        assert not lean_eligible(entry(fake, "auto", route=route), url), route  # known or transformed by litellm


# -- answers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("action,params,tools", [
    (ok('{"op": "list"}'), None, None),
    (ok("hello", usage=(120, 7)), {"temperature": 0.1, "max_tokens": 9}, None),
    (ok("priced by the returned id", model="gpt-4o-2024-08-06"), None, None),  # litellm prices the returned id
    (ok("x", reasoning="step by step"), {"reasoning_effort": "low", "seed": 4, "stop": ["\n"]}, None),
    (ok("{}"), {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "op", "schema": {"type": "object"}}}}, None),
    (Action(tool_calls=[("write", {"key": "a", "value": 1}), ("list", "{bad json")]), None,
     [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}]),
    (ok("u", usage_json={"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52,
                         "prompt_tokens_details": {"cached_tokens": 32},
                         "completion_tokens_details": {"reasoning_tokens": 8}}), None, None),
    (ok("no usage", no_usage=True), None, None),
    (ok("no usage, priced id", no_usage=True, model="gpt-4o-2024-08-06"), None, None),
    (ok("cut", finish_reason="length"), None, None),
    (ok("r", message_extra={"reasoning": "vLLM names it reasoning"}), None, None),
    (ok("r", message_extra={"content": None}), None, None),
    (ok("thinking", message_extra={"thinking_blocks": [{"type": "thinking", "thinking": "a"}]}), None, None),
    (ok("eos", finish_reason="eos"), None, None),
    (ok("cached, priced id", model="gpt-4o-2024-08-06", usage_json={
        "prompt_tokens": 2000, "completion_tokens": 10, "total_tokens": 2010,
        "prompt_tokens_details": {"cached_tokens": 1536}}), None, None),  # litellm prices the cached part apart
], ids=["plain", "usage-and-params", "known-returned-model", "reasoning-and-params", "json-schema", "tool-calls",
        "usage-details", "no-usage", "no-usage-priced-id", "finish-length", "reasoning-field", "null-content",
        "thinking-blocks", "finish-eos", "cached-priced-id"])
def test_an_answer_is_recorded_the_same_on_both_paths(fake, action, params, tools):
    recs = assert_same(fake, [action], params=params, tools=tools)
    assert recs[0]["error"] is None and recs[0]["model_returned"]


def test_text_beyond_ascii_is_sent_the_same(fake, monkeypatch):
    msgs = [{"role": "system", "content": "Réponds en JSON — 日本語も可. \u2028 \"quoted\" \\ back \x00"},
            {"role": "user", "content": "go"}, {"role": "assistant", "content": '["a", 1.5, 1e-07, null]'},
            {"role": "user", "content": ""}]
    sent = _count_lean(monkeypatch)
    assert_same(fake, [ok("done")], messages=msgs, params={"temperature": 0.123456789, "max_tokens": 7})
    assert sent == [1]


@pytest.mark.parametrize("params,lean_sends", [
    ({"seed": None, "max_tokens": None}, True),  # None is not sent, as litellm does not send it
    ({"stop": "\n", "top_p": 0.5, "presence_penalty": 0.1, "frequency_penalty": 0.2, "logit_bias": {"1": 2},
      "user": "u"}, True),
    ({"max_completion_tokens": 5, "logprobs": True, "top_logprobs": 2, "temperature": 0}, True),
    ({"response_format": {"type": "json_object"}}, True),
    ({"tool_choice": "auto"}, False),  # litellm drops it without tools
    ({"parallel_tool_calls": False, "extra_body": {"x": 1}}, False),  # not among LEAN_PARAMS
])
def test_parameters_are_sent_the_same_and_unlisted_ones_go_through_litellm(fake, monkeypatch, params, lean_sends):
    sent = _count_lean(monkeypatch)
    assert_same(fake, [ok("done")], params=params)
    assert sent == [1 if lean_sends else 0]


def test_tool_turns_which_litellm_rewrites_go_through_litellm(fake, monkeypatch):
    """litellm drops an assistant tool-call turn's ``content: None`` (and may rewrite other non-text
    turns): such conversations are not sent by the lean path, so the records still agree."""
    msgs = [{"role": "system", "content": "x"}, {"role": "user", "content": "go"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "[1]"},
            {"role": "user", "content": [{"type": "text", "text": "parts"}]}]
    sent = _count_lean(monkeypatch)
    assert_same(fake, [ok("done")], messages=msgs)
    assert sent == [0]


def _count_lean(monkeypatch: Any) -> list[int]:
    from workbench.models.litellm_client import lean

    sent = [0]
    real = lean.acompletion

    def counted(**kw: Any) -> Any:
        sent[0] += 1
        return real(**kw)

    monkeypatch.setattr(lean, "acompletion", counted)
    return sent


def test_an_answer_priced_by_litellm_is_charged_the_same(fake):
    recs = assert_same(fake, [ok("a", model="gpt-4o-2024-08-06", usage=(1000, 100))])
    assert recs[0]["cost_usd"] and recs[0]["extra"]["cost_source"] == "litellm"


# -- failures --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("actions,kw", [
    ([status(429, retry_after="0.05", message="rate limited"), ok()], {}),
    ([status(429, retry_after="60", message="slow down")], {}),  # Retry-After past max_retry_after_s: not retried
    ([status(500, message="server fault"), ok()], {}),
    ([status(503), status(502), ok()], {}),
    ([slow(1.0), ok()], {"timeout_s": 0.4}),
    ([reset(), ok()], {}),
    ([malformed(), ok()], {}),
    ([status(401, message="Incorrect API key provided: sk-test-FAKE-abcdefghijklmnopqrstuv")], {}),
    ([status(403)], {}),
    ([status(404)], {}),
    ([status(400, message="Unsupported parameter: 'temperature' is not supported with this model."), ok()], {}),
    ([status(400, message="This model's maximum context length is 10 tokens.")], {}),
    ([status(500)] * 3, {"max_attempts": 3}),
], ids=["429-retry-after", "429-too-long", "500", "503-502", "timeout", "reset", "malformed", "401", "403", "404",
        "400-adapt", "context-length", "attempts-run-out"])
def test_a_failure_is_classed_and_recorded_the_same_on_both_paths(fake, actions, kw):
    slow_recs, lean_recs, _ = both(fake, actions, **kw)
    recs = assert_same(fake, actions, **kw)
    assert recs[0]["attempts"][0].get("error")  # the first attempt failed, on both paths
    if recs[0]["error"]:  # a call that failed for good is classed the same way (world records use this)
        assert classify_error(lean_recs[0]["error"]) == classify_error(slow_recs[0]["error"])
    assert FAKE_KEY not in repr(recs)


def test_proxy_settings_of_the_environment_apply_on_both_paths(fake, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: both paths fail to connect
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    recs = assert_same(fake, [], max_attempts=2)
    assert recs[0]["error"] and fake.count == 0


def test_the_fault_injecting_server_gives_the_same_records_on_both_paths(fake):
    """Faults drawn from a seeded RNG (429/500/503/timeout/reset/malformed): the same draws, the same records."""
    from tests.fake_openai import Faults

    records = []
    for transport in ("litellm", "auto"):
        fake.reset()
        fake.responder = Faults(lambda body: '{"op": "list"}', rate=0.5, seed=11, timeout_sleep_s=0.6)
        from workbench.models.litellm_client import LiteLLMClient

        c = LiteLLMClient(entry(fake, transport, timeout_s=0.3, max_attempts=3), seed=5)
        records.append([norm(run(c.complete(ModelRequest(messages=MSGS))).to_record()) for _ in range(10)])
        kinds = fake.responder.log
    assert records[0] == records[1]
    assert sum(kinds.values()) >= 3  # faults were really served


# -- budget, limits, ledger ------------------------------------------------------------------------------

def test_the_budget_reserves_settles_and_refuses_the_same_on_both_paths(fake):
    # each call reserves its worst case (prompt bytes + 64 output tokens at catalogue prices): the third does not fit
    recs = assert_same(fake, [ok("a", usage=(50, 5))] * 3, n_calls=3, budget_usd=0.00028)
    assert recs[0]["extra"]["budget"]["charged_usd"] == pytest.approx((50 * 1.0 + 5 * 2.0) / 1e6)
    assert any((r.get("error") or "").startswith("BudgetExhausted") for r in recs[:-1])


def test_the_connection_limit_and_rpm_window_hold_on_the_lean_path(fake):
    from workbench.models.litellm_client import LiteLLMClient

    fake.delay_s = 0.15
    c = LiteLLMClient(entry(fake, "auto", max_connections=2), seed=1)
    assert c.lean

    async def many():
        return await asyncio.gather(*[c.complete(ModelRequest(messages=MSGS)) for _ in range(6)])

    replies = run(many())
    assert all(r.error is None for r in replies)
    assert c.limits.peak_in_flight == 2
    starts = sorted(r["t"] for r in fake.requests)
    assert starts[2] - starts[0] >= 0.12  # the third request waited for a free connection
    fake.reset()
    fake.delay_s = 0.0
    from workbench.models.litellm_client import reset_limits

    reset_limits()
    c2 = LiteLLMClient(entry(fake, "auto", rpm=2), seed=1)
    c2.limits.window_s = 0.5
    t = asyncio.run(_timed(c2, 3))
    assert t >= 0.45  # the third request waited for the window


async def _timed(c: Any, n: int) -> float:
    from workbench.models.litellm_client import aclose_clients

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(n):
        r = await c.complete(ModelRequest(messages=MSGS))
        assert r.error is None
    await aclose_clients()
    return loop.time() - t0


def test_the_ledger_and_request_ids_are_kept_on_the_lean_path(fake, tmp_path):
    from workbench.models.ledger import CallLedger
    from workbench.models.litellm_client import LiteLLMClient

    fake.push(status(500), ok())
    ledger = CallLedger(tmp_path / "calls.jsonl")
    c = LiteLLMClient(entry(fake, "auto"), seed=1, ledger=ledger.bind(world_id="w", run_id="r", slot=0))
    r = run(c.complete(ModelRequest(messages=MSGS)))
    ledger.close()
    assert r.error is None and len(r.attempts) == 2
    assert [q["request_id"] for q in fake.requests] == [a["request_id"] for a in r.attempts]
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    opened = [ln for ln in lines if '"state":"open"' in ln]  # write-ahead: one per attempt, before it was sent
    line = [ln for ln in lines if ln not in opened]
    assert [json.loads(ln)["request_id"] for ln in opened] == [a["request_id"] for a in r.attempts]
    assert len(line) == 1 and '"answered"' in line[0] and r.attempts[0]["request_id"] in line[0]
