"""The parameters sent: the entry's defaults under the request's, dropped and changed explicitly and recorded."""
from __future__ import annotations

import re
from typing import Any

from workbench.models.catalogue import ModelEntry
from workbench.models.litellm_client.loader import get_litellm


def _supported(route: str) -> set[str] | None:
    litellm = get_litellm()
    try:
        got = litellm.get_supported_openai_params(model=route)
    except Exception:  # noqa: BLE001 - an unknown provider: we cannot say, so we send everything
        return None
    return set(got) if got else None


_TRANSPORT = {"max_retries", "extra_headers", "stream", "stream_options", "n"}  # never taken from params


def prepare_params(entry: ModelEntry, requested: dict[str, Any],
                   supported: set[str] | None) -> tuple[dict[str, Any], dict[str, str], list[dict[str, Any]]]:
    """(params to send, {dropped name: why}, [changes]) for the requested params."""
    sent: dict[str, Any] = {}
    why: dict[str, str] = {}
    changes: list[dict[str, Any]] = []
    for name, value in requested.items():
        if name in _TRANSPORT:
            why[name] = "transport setting, not a sampling parameter: set by the client"
            continue
        if supported is not None and name not in supported:
            why[name] = f"not supported by provider {entry.provider} (litellm get_supported_openai_params)"
            continue
        if name == "temperature" and not entry.supports_temperature:
            why[name] = f"model rejects temperature (catalogue {entry.name or entry.route}: supports_temperature false)"
            continue
        if name == "reasoning_effort" and entry.efforts is not None and value not in entry.efforts:
            if entry.effort_fallback is not None:
                sent[name] = entry.effort_fallback
                changes.append({"param": name, "requested": value, "sent": entry.effort_fallback,
                                "reason": f"effort not among {entry.efforts}: catalogue effort_fallback"})
            else:
                why[name] = (f"effort {value!r} not accepted (accepted: {entry.efforts}); "
                             "omitted: the provider's default effort applies")
                changes.append({"param": name, "requested": value, "sent": None, "reason": why[name]})
            continue
        sent[name] = value
    return sent, why, changes


def _rejected_param(message: str, sent: dict[str, Any]) -> str | None:
    """The parameter a 400 complains about, if it names one we sent."""
    low = message.lower()
    if not any(w in low for w in ("unsupported", "not supported", "does not support", "doesn't support",
                                  "invalid", "not allowed", "unrecognized", "unknown", "only the default",
                                  "not available")):
        return None
    first: list[tuple[int, str]] = []  # the parameter named first is the one complained about
    for name in sent:
        variants = {name, name.replace("_", " "), name.replace("_", ".")}
        if name == "reasoning_effort":
            variants |= {"reasoning.effort", "effort", "thinking"}
        if name == "max_tokens":
            variants |= {"max_completion_tokens"}
        hits = [m.start() for v in variants for m in [re.search(rf"(?<![a-z_]){re.escape(v)}(?![a-z_])", low)] if m]
        if hits:
            first.append((min(hits), name))
    return min(first)[1] if first else None
