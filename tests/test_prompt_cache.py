"""Prompt caching, native reasoning blocks and token-rate limits, against fake servers on 127.0.0.1
that speak each provider's format (tests/fake_anthropic.py: Anthropic Messages with its prompt cache,
signed thinking blocks and tool use; tests/fake_openai.py: chat completions that cache on their own).
Each test checks what the server received against the body the client recorded as sent."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import asyncio  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.conftest import run_closing
from tests.fake_anthropic import FAKE_KEY, FakeAnthropic  # noqa: E402
from tests.fake_anthropic import ok as a_ok  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402
from workbench.models.base import ModelReply, ModelRequest  # noqa: E402
from workbench.models.catalogue import ModelEntry  # noqa: E402

EPHEMERAL = {"type": "ephemeral"}
SYSTEM = "You are agent A in a shared workspace. " * 40  # a stable prefix worth caching
PRICES = dict(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0, cache_read_usd_per_mtok=0.3,
              cache_write_usd_per_mtok=3.75)


@pytest.fixture(scope="module")
def anthropic():
    srv = FakeAnthropic().start()
    yield srv
    srv.stop()


@pytest.fixture
def fake_a(anthropic, monkeypatch):
    from workbench.models.litellm_client import reset_limits

    reset_limits()
    anthropic.reset()
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    yield anthropic
    anthropic.reset()


def a_entry(server: FakeAnthropic, **kw: Any) -> ModelEntry:
    base: dict[str, Any] = dict(name="claude-fake", route="anthropic/fake-claude", api_base=server.url,
                                max_attempts=1, timeout_s=10, max_tokens=64, rpm=None, **PRICES)
    base.update(kw)
    return ModelEntry(**base)


run = run_closing  # tests.conftest: one loop per call, its clients closed


def conversation(client: Any, steps: int, first: list[dict[str, Any]] | None = None) -> list[ModelReply]:
    """An agent's steps as a world runs them: each request is the last one, its reply and a result."""
    async def go() -> list[ModelReply]:
        msgs = first or [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Your task: find N."}]
        out = []
        for k in range(steps):
            r = await client.complete(ModelRequest(messages=list(msgs)))
            assert not r.error, r.error
            out.append(r)
            msgs += [{"role": "assistant", "content": r.text}, {"role": "user", "content": f"Result of step {k}."}]
        return out

    return run(go())


def marks(body: dict[str, Any]) -> list[tuple[str, int]]:
    """Where the body a server received carries cache_control: ("system", i) or ("messages", i)."""
    out = []
    for i, b in enumerate(body.get("system") or []):
        if isinstance(b, dict) and "cache_control" in b:
            assert b["cache_control"] == EPHEMERAL
            out.append(("system", i))
    for i, m in enumerate(body.get("messages") or []):
        content = m["content"] if isinstance(m["content"], list) else []
        for j, b in enumerate(content):
            if "cache_control" in b:
                assert b["cache_control"] == EPHEMERAL and j == len(content) - 1  # on the message's last block
                out.append(("messages", i))
    return out


# -- prompt caching: Anthropic marks ------------------------------------------------------------------

def test_the_anthropic_fake_receives_breakpoints_at_the_stable_prefix_and_reads_are_priced_at_a_tenth(fake_a):
    from workbench.models.budget import Budget
    from workbench.models.litellm_client import LiteLLMClient

    budget = Budget(10.0)
    client = LiteLLMClient(a_entry(fake_a), seed=1, budget=budget)
    replies = conversation(client, 3)
    bodies = [r["body"] for r in fake_a.requests]
    assert [r["path"] for r in fake_a.requests] == ["/v1/messages"] * 3 and fake_a.key_seen == 3
    for reply, body in zip(replies, bodies):
        assert reply.extra["sent"] == body  # the request as sent is what the server received
        assert FAKE_KEY not in json.dumps(reply.to_record())
    # the system prompt, and the agent's previous reply (the last message before the new turn); the
    # Anthropic body has no system message, so message k of ours is message k-1 of theirs
    assert [marks(b) for b in bodies] == [[("system", 0)], [("system", 0), ("messages", 1)],
                                          [("system", 0), ("messages", 3)]]
    assert [r.extra["prompt_cache"] for r in replies] == [{"mode": "auto", "breakpoints": b}
                                                          for b in ([0], [0, 2], [0, 4])]
    billed = [r["usage"] for r in fake_a.requests]
    assert billed[0]["cache_read_input_tokens"] == 0 and billed[0]["cache_creation_input_tokens"] > 0
    assert billed[2]["cache_read_input_tokens"] > billed[1]["cache_read_input_tokens"] > 0
    total_cost = 0.0
    for reply, got in zip(replies, billed):
        u = reply.usage
        assert u["cached_tokens"] == got["cache_read_input_tokens"]
        assert u.get("cache_write_tokens", 0) == got["cache_creation_input_tokens"]
        assert u["prompt_tokens"] == got["input_tokens"] + got["cache_read_input_tokens"] + \
            got["cache_creation_input_tokens"]
        expected = (got["input_tokens"] * 3.0 + got["cache_read_input_tokens"] * 0.3
                    + got["cache_creation_input_tokens"] * 3.75 + got["output_tokens"] * 15.0) / 1e6
        assert reply.extra["cost_source"] == "catalogue" and reply.cost_usd == pytest.approx(expected)
        total_cost += reply.cost_usd
    # the third call read most of its prompt from the cache: priced at 0.1x, it costs far less than at 1x
    third, u3 = replies[2], replies[2].usage
    full = (u3["prompt_tokens"] * 3.0 + u3["completion_tokens"] * 15.0) / 1e6
    assert third.cost_usd == pytest.approx(full - u3["cached_tokens"] * (3.0 - 0.3) / 1e6
                                           + u3.get("cache_write_tokens", 0) * (3.75 - 3.0) / 1e6)
    assert third.cost_usd < 0.6 * full
    assert budget.spent == pytest.approx(total_cost)  # the budget charges what the records price


def test_the_ledger_keeps_the_cached_tokens_its_cost_rests_on(fake_a, tmp_path):
    from workbench.models.ledger import CallLedger, read_ledger
    from workbench.models.litellm_client import LiteLLMClient

    ledger = CallLedger(tmp_path / "calls.jsonl")
    try:
        replies = conversation(LiteLLMClient(a_entry(fake_a), seed=1, ledger=ledger.bind(agent="a")), 2)
    finally:
        ledger.close()
    lines = list(read_ledger(tmp_path))
    assert [ln["usage"] for ln in lines] == [r.usage for r in replies]
    assert lines[1]["usage"]["cached_tokens"] > 0 and lines[1]["cost_usd"] == replies[1].cost_usd


def test_cache_off_sends_no_breakpoints_from_the_catalogue_or_a_cells_option(fake_a, monkeypatch):
    from workbench.kinds import get_kind
    from workbench.models.factory import make_client
    from workbench.models.litellm_client import LiteLLMClient

    off_entry = conversation(LiteLLMClient(a_entry(fake_a, prompt_cache="off"), seed=1), 3)
    by_option = conversation(LiteLLMClient(a_entry(fake_a), seed=1, prompt_cache="off"), 3)
    assert len(fake_a.requests) == 6
    for r in fake_a.requests:
        assert marks(r["body"]) == [] and "cache_control" not in json.dumps(r["body"])
        assert r["usage"]["cache_read_input_tokens"] == r["usage"]["cache_creation_input_tokens"] == 0
    for reply in off_entry + by_option:
        assert reply.extra["prompt_cache"] == {"mode": "off", "breakpoints": []}
        assert reply.usage.get("cached_tokens", 0) == 0 and "cache_write_tokens" not in reply.usage
    # the cell-level option reaches a catalogue model's client; agents without a provider ignore it
    monkeypatch.setenv("WORKBENCH_FAKE_ANTHROPIC_API_BASE", fake_a.url)
    monkeypatch.delenv("WORKBENCH_MODELS", raising=False)
    assert make_client("local-fake-anthropic", seed=1, prompt_cache="off").prompt_cache == "off"
    assert make_client("local-fake-anthropic", seed=1).prompt_cache == "auto"
    assert make_client("anthropic/fake-claude", seed=1, prompt_cache="off").prompt_cache == "off"
    get_kind("stigmergy")  # registers its simulated agents' routes
    assert not hasattr(make_client("sim/diligent", seed=1, prompt_cache="off"), "prompt_cache")
    with pytest.raises(ValueError, match="prompt_cache"):
        make_client("local-fake-anthropic", seed=1, prompt_cache="sometimes")


def test_breakpoints_land_on_the_last_tool_call_of_a_tool_turn_and_a_marked_request_is_left_alone():
    from workbench.models.litellm_client.prompt_cache import breakpoints

    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "t2", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "r1"}, {"role": "tool", "tool_call_id": "t2", "content": "r2"}]
    out, at = breakpoints(msgs)
    assert at == [0, 2] and out[0]["cache_control"] == EPHEMERAL
    assert [("cache_control" in c) for c in out[2]["tool_calls"]] == [False, True]
    assert "cache_control" not in json.dumps(msgs)  # the request itself is not changed
    assert breakpoints(out) == (out, None)


# -- prompt caching: providers that cache on their own --------------------------------------------------

@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_an_openai_route_sends_nothing_and_prices_the_cached_tokens_it_reports(transport, monkeypatch):
    from workbench.models.litellm_client import LiteLLMClient, reset_limits

    reset_limits()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-cache-0123456789")
    server = FakeOpenAI(auto_cache_min_tokens=64).start()
    try:
        entry = ModelEntry(name="o", route="openai/fake-model", api_base=server.url, max_attempts=1, timeout_s=10,
                           max_tokens=32, transport=transport, input_usd_per_mtok=2.0, output_usd_per_mtok=8.0,
                           cache_read_usd_per_mtok=0.2)
        client = LiteLLMClient(entry, seed=1)
        assert client.lean is (transport == "auto")
        replies = conversation(client, 3)
        bodies = [r["body"] for r in server.requests]
    finally:
        server.stop()
    assert all("cache_control" not in json.dumps(b) for b in bodies)
    assert [r.extra["sent"] for r in replies] == bodies
    assert all(r.extra["prompt_cache"] == {"mode": "auto", "breakpoints": None} for r in replies)
    assert replies[0].usage["cached_tokens"] == 0 and replies[2].usage["cached_tokens"] > 0
    for r in replies:
        u = r.usage
        expected = ((u["prompt_tokens"] - u["cached_tokens"]) * 2.0 + u["cached_tokens"] * 0.2
                    + u["completion_tokens"] * 8.0) / 1e6
        assert r.cost_usd == pytest.approx(expected) and r.extra["cost_source"] == "catalogue"


def test_a_cache_price_the_catalogue_leaves_out_comes_from_litellms_map_else_the_input_price():
    from workbench.models.prices import catalogue_prices

    cost_map = {"claude-sonnet-4-5": {"cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06}}
    known = catalogue_prices(ModelEntry(route="anthropic/claude-sonnet-4-5", input_usd_per_mtok=3.0,
                                        output_usd_per_mtok=15.0), cost_map)
    assert known is not None and (known.cache_read, known.cache_write) == (3e-07, 3.75e-06)
    assert known.cache_source == "litellm cost map"
    unknown = catalogue_prices(ModelEntry(route="anthropic/nobody-knows", input_usd_per_mtok=3.0,
                                          output_usd_per_mtok=15.0), cost_map)
    assert unknown is not None and unknown.cache_read == unknown.cache_write == 3e-06
    assert "no cache price known" in unknown.cache_source
    usage = {"prompt_tokens": 1000, "cached_tokens": 800, "cache_write_tokens": 100, "completion_tokens": 10}
    assert known.parts(usage) == pytest.approx({"input": 100 * 3e-06, "cache_read": 800 * 3e-07,
                                                "cache_write": 100 * 3.75e-06, "output": 10 * 15e-06})


def test_the_budget_bounds_a_prompt_at_the_cache_write_price_where_that_is_dearer(fake_a):
    from workbench.models.litellm_client import LiteLLMClient

    c = LiteLLMClient(a_entry(fake_a), seed=1)
    msgs = [{"role": "user", "content": "x" * 1000}]
    prompt = 1000 + 8 + 16
    assert c.estimate_cost(msgs, {"max_tokens": 64}) == pytest.approx(prompt * 3.75e-06 + 64 * 15e-06)


# -- native reasoning blocks ----------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "list", "description": "list the keys",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _thinking_turns(server: FakeAnthropic, tamper: bool = False) -> tuple[ModelReply, ModelReply]:
    """Two turns of a thinking agent through the collusion world's own-turn builder: the first
    answers with a signed thinking block and a tool call, the second sends both back."""
    from workbench.models.litellm_client import LiteLLMClient
    from workbench.worlds.collusion import tools as TL

    entry = a_entry(server, route="anthropic/claude-sonnet-4-5", reasoning_effort="low", max_tokens=2048,
                    prompt_cache="off")

    async def go() -> tuple[ModelReply, ModelReply]:
        client = LiteLLMClient(entry, seed=1)
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "You act through tools."},
                                      {"role": "user", "content": "Look at the store."}]
        first = await client.complete(ModelRequest(messages=list(msgs), tools=TOOLS))
        calls = TL.calls_from_reply(first)
        own = TL.assistant_message(first, calls, replay_reasoning=True)
        if tamper:
            own["thinking_blocks"][0]["signature"] = "c2lnbmVkIGJ5IHNvbWVvbmUgZWxzZQ=="
        msgs += [own, *TL.result_messages(first, calls, ["keys: a, b"])]
        second = await client.complete(ModelRequest(messages=msgs, tools=TOOLS))
        return first, second

    server.push(a_ok("", thinking="The store may hold the other half; list it first.", tool_uses=[("list", {})]),
                a_ok("Done."))
    return run(go())


def test_a_thinking_blocks_signature_comes_back_unchanged_on_the_next_turn(fake_a):
    first, second = _thinking_turns(fake_a)
    assert not first.error and not second.error, (first.error, second.error)
    given = fake_a.requests[0]
    returned = [b for b in json.loads(json.dumps(first.extra["thinking_blocks"]))]
    assert returned == [{"type": "thinking", "thinking": "The store may hold the other half; list it first.",
                         "signature": fake_a.signature("The store may hold the other half; list it first.")}]
    assert first.reasoning == returned[0]["thinking"] and first.tool_calls[0]["name"] == "list"
    assert given["body"]["thinking"]["type"] == "enabled"
    replayed = fake_a.requests[1]["body"]["messages"][1]
    assert replayed["role"] == "assistant" and replayed["content"][0] == returned[0]  # byte for byte, first
    assert replayed["content"][1]["type"] == "tool_use"
    assert second.extra["reasoning_blocks_replayed"] == 1 and fake_a.thinking_replayed == 1
    assert second.extra["sent"] == fake_a.requests[1]["body"]


def test_a_tampered_signature_is_refused_by_the_fake_as_by_anthropic(fake_a):
    first, second = _thinking_turns(fake_a, tamper=True)
    assert not first.error and second.error and "signature" in second.error and fake_a.thinking_replayed == 0


def test_reasoning_blocks_survive_the_reply_cache_and_replay(fake_a, tmp_path):
    from workbench.models.litellm_client import LiteLLMClient
    from workbench.models.replay import ReplayClient

    entry = a_entry(fake_a, route="anthropic/claude-sonnet-4-5", reasoning_effort="low", max_tokens=2048)
    req = ModelRequest(messages=[{"role": "user", "content": "Think, then answer."}])
    first = run(LiteLLMClient(entry, seed=1, cache_dir=tmp_path).complete(req))
    hit = run(LiteLLMClient(entry, seed=1, cache_dir=tmp_path).complete(req))
    replayed = run(ReplayClient([first.to_record()]).complete(req))
    assert first.extra["thinking_blocks"] and fake_a.count == 1
    assert hit.extra["cache_hit"] and hit.extra["thinking_blocks"] == first.extra["thinking_blocks"]
    assert replayed.extra["thinking_blocks"] == first.extra["thinking_blocks"]


# -- tokens per minute ------------------------------------------------------------------------------------

def test_a_tpm_window_delays_what_does_not_fit_and_is_corrected_by_usage():
    from workbench.models.litellm_client import ModelLimits

    lim = ModelLimits(10, rpm=None, window_s=0.5, tpm=100)

    async def go():
        w1, s1 = await lim.tpm_slot(60, asyncio.sleep)
        t0 = time.monotonic()
        w2, s2 = await lim.tpm_slot(60, asyncio.sleep)  # 120 > 100: waits for the first to leave the window
        waited = time.monotonic() - t0
        s2.settle(10)  # the provider counted 10
        w3, _ = await lim.tpm_slot(60, asyncio.sleep)  # 10 + 60 fits at once
        t1 = time.monotonic()
        huge, _ = await lim.tpm_slot(1000, asyncio.sleep)  # larger than the limit: waits for an empty window
        return w1, w2, waited, w3, (huge, time.monotonic() - t1)

    w1, w2, waited, w3, huge = asyncio.run(go())
    assert w1 == 0.0 and 0.45 <= w2 <= 0.7 and waited >= 0.45 and w3 == 0.0
    assert 0.4 <= huge[0] <= 0.6 and huge[1] >= 0.4  # until the second and third slots left the window


def test_a_tpm_limit_delays_calls_as_set_and_records_the_wait(fake_a, tmp_path):
    from workbench.models.ledger import CallLedger, read_ledger
    from workbench.models.litellm_client import LiteLLMClient

    ledger = CallLedger(tmp_path / "calls.jsonl")
    entry = a_entry(fake_a, tpm=200, max_tokens=64)  # each call: ~10 prompt tokens + 64 cap = ~75 estimated
    msgs = [{"role": "user", "content": "Say something short."}]

    async def go() -> list[ModelReply]:
        clients = [LiteLLMClient(entry, seed=i, ledger=ledger.bind(agent=i)) for i in range(3)]
        clients[0].limits.window_s = 0.8  # the process-wide window of this route, shortened for the test
        return await asyncio.gather(*(c.complete(ModelRequest(messages=msgs)) for c in clients))

    t_start = time.monotonic()  # before any slot is taken
    try:
        replies = run(go())
    finally:
        ledger.close()
    assert all(not r.error for r in replies)
    waits = sorted(r.attempts[0].get("tpm_wait_s", 0.0) for r in replies)
    assert waits[:2] == [0.0, 0.0] and 0.7 <= waits[2] <= 1.2  # two fit in 200; the third waits for the window
    arrivals = sorted(q["t"] for q in fake_a.requests)
    assert arrivals[2] - t_start >= 0.8  # as the server saw it: not before the first slot left the window
    for r in replies:
        a = r.attempts[0]
        assert a["tpm_tokens_estimated"] >= 64 and a["tpm_tokens_counted"] == \
            r.usage["prompt_tokens"] + r.usage["completion_tokens"]
    assert sorted(a.get("tpm_wait_s", 0.0) for ln in read_ledger(tmp_path) for a in ln["attempts"]) == waits


def _responses_turns(tamper: bool = False) -> tuple[FakeOpenAI, Any, ModelReply, ModelReply]:
    """Two turns on an OpenAI Responses route (litellm's openai/responses/...): the first returns a
    reasoning item with encrypted content, the second sends it back through the collusion world's
    own-turn builder."""
    from tests.fake_openai import ok
    from workbench.models.litellm_client import LiteLLMClient
    from workbench.worlds.collusion import tools as TL

    server = FakeOpenAI().start()
    entry = ModelEntry(name="r", route="openai/responses/fake-model", api_base=server.url, max_attempts=1,
                       timeout_s=10, max_tokens=64)
    server.push(ok("first", reasoning="The store is empty; write first."), ok("second"))

    async def go() -> tuple[Any, ModelReply, ModelReply]:
        client = LiteLLMClient(entry, seed=1)
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "Begin."}]
        first = await client.complete(ModelRequest(messages=list(msgs)))
        own = TL.assistant_message(first, [], replay_reasoning=True)
        if tamper:
            own["reasoning_items"][0]["encrypted_content"] = "gAAAAforged"
        second = await client.complete(ModelRequest(messages=[*msgs, own, {"role": "user", "content": "Go on."}]))
        return client, first, second

    try:
        client, first, second = run(go())
    finally:
        server.stop()
    return server, client, first, second


def test_an_openai_reasoning_items_encrypted_content_comes_back_unchanged(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-responses-0123456789")
    server, client, first, second = _responses_turns()
    assert client.lean is False  # the Responses API: litellm's path, never the chat-completions POST
    assert not first.error and not second.error, (first.error, second.error)
    (item,) = first.extra["reasoning_items"]
    assert item["encrypted_content"] == server.reasoning_given[item["id"]]
    assert [r["path"] for r in server.requests] == ["/v1/responses"] * 2
    sent_back = [i for i in server.requests[1]["body"]["input"] if i.get("type") == "reasoning"]
    assert [(i["id"], i["encrypted_content"]) for i in sent_back] == [(item["id"], item["encrypted_content"])]
    assert second.extra["reasoning_blocks_replayed"] == 1 and server.reasoning_replayed == 1
    assert second.extra["sent"] == server.requests[1]["body"]


def test_a_forged_reasoning_item_is_refused_by_the_fake_as_by_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-responses-0123456789")
    server, _, first, second = _responses_turns(tamper=True)
    assert not first.error and second.error and "verified" in second.error and server.reasoning_replayed == 0


def test_an_anthropic_model_through_openrouter_gets_the_breakpoints_in_openais_block_form(monkeypatch):
    from workbench.models.litellm_client import LiteLLMClient

    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test-0123456789abcdef")
    server = FakeOpenAI().start()
    try:
        entry = ModelEntry(name="or", route="openrouter/anthropic/claude-sonnet-4.5", api_base=server.url,
                           max_attempts=1, timeout_s=10)
        replies = conversation(LiteLLMClient(entry, seed=1), 2)
        body = server.requests[1]["body"]
    finally:
        server.stop()
    assert replies[1].extra["sent"] == body and replies[1].extra["prompt_cache"]["breakpoints"] == [0, 2]
    marked = [i for i, m in enumerate(body["messages"])
              if isinstance(m["content"], list) and m["content"][-1].get("cache_control") == EPHEMERAL]
    assert marked == [0, 2]  # the system prompt and the previous reply, as OpenRouter takes them for Anthropic
