"""plan prices the prompt tokens a provider's cache served at the cache prices, where a run set's
usage reports them: a study run against the fake Anthropic server (tests/fake_anthropic.py, which
caches the breakpoints the client marks and bills reads at 0.1x), then planned from that run set."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import pytest  # noqa: E402
import yaml  # noqa: E402

from tests.conftest import PROMPTS  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402


def test_plan_from_a_run_set_prices_cached_prompt_tokens_at_the_cache_prices(tmp_path, monkeypatch):
    from workbench.models.litellm_client import reset_limits
    from workbench.params import load_study
    from workbench.plan import make_plan
    from workbench.records import load_run
    from workbench.study import run_study

    server = FakeAnthropic().start()
    try:
        reset_limits()
        monkeypatch.setenv("WORKBENCH_FAKE_ANTHROPIC_API_BASE", server.url)
        monkeypatch.delenv("WORKBENCH_MODELS", raising=False)
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump({
            "world": "stigmergy", "name": "cached", "seed": 3, "worlds_per_cell": 2,
            "defaults": {"prompts": str(PROMPTS)}, "cells": [{"model": "local-fake-anthropic", "max_steps": 4}]}))
        run_study(load_study(path), tmp_path / "run", progress=False)
        plan = make_plan(load_study(path), from_run=tmp_path / "run")
    finally:
        server.stop()
    records = load_run(tmp_path / "run")
    usage = [s["reply"]["usage"] for steps in records.steps.values() for s in steps]
    tin, tout = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    read = sum(u.get("cached_tokens", 0) for u in usage)
    written = sum(u.get("cache_write_tokens", 0) for u in usage)
    assert read > written > 0 and read == sum(r["usage"]["cache_read_input_tokens"] for r in server.requests)
    (cell,) = plan.cells
    expected = ((tin - read - written) * 3.0 + read * 0.3 + written * 3.75 + tout * 15.0) / 1e6
    assert cell.cost_usd == pytest.approx(expected)
    assert cell.cost_usd < (tin * 3.0 + tout * 15.0) / 1e6  # what pricing every input token in full said
    assert "read from the provider's prompt cache" in cell.cost_note and "(catalogue)" in cell.cost_note


def test_figures_without_cached_tokens_say_every_input_token_is_priced_in_full(monkeypatch):
    from workbench.plan import _cost

    monkeypatch.delenv("WORKBENCH_MODELS", raising=False)
    fig = {"worlds": 2, "routes": {"claude-haiku-4-5": [10, 10_000, 500]}}
    cost, note = _cost(fig, 2, {}, None)
    assert cost == pytest.approx((10_000 * 1.0 + 500 * 5.0) / 1e6) and "no cached-token figures" in note
    fig["cache"] = {"claude-haiku-4-5": [8_000, 1_000]}
    cost, note = _cost(fig, 2, {}, None)
    assert cost == pytest.approx((1_000 * 1.0 + 8_000 * 0.1 + 1_000 * 1.25 + 500 * 5.0) / 1e6)
    assert "80% of input tokens read from the provider's prompt cache" in note
