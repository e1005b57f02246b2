"""A client from a catalogue entry (used by workbench.models.factory)."""
from __future__ import annotations

from typing import Any

from workbench.models.catalogue import ModelEntry
from workbench.models.litellm_client.client import LiteLLMClient

_OPTIONS = {"budget", "ledger", "cache_dir", "timeout_s", "max_attempts", "api_base", "backoff_base_s", "sleep",
            "prompt_cache"}


def build_client(entry: ModelEntry, *, seed: int, **options: Any) -> LiteLLMClient:
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for a litellm client; expected some of {sorted(_OPTIONS)}")
    return LiteLLMClient(entry, seed=seed, **options)
