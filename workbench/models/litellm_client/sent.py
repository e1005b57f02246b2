"""The body a provider received: the request after litellm translated it.

The workbench's own request (messages and parameters) is not what goes on the wire:
litellm renames, drops and adds parameters per provider (``reasoning_effort: low`` on an
Anthropic route becomes ``thinking: {type: enabled, budget_tokens: 1024}``; a system
message moves to a top-level ``system`` field). That translation can change a result,
so each attempt's body is recorded as sent (``sent`` in the reply's extra). litellm hands
the final provider payload to a logger registered in ``litellm.callbacks`` just before the
HTTP call (``log_pre_api_call``, ``additional_args["complete_input_dict"]``); the attempt
it belongs to is found through a context variable set around that attempt's call, which
the call's task inherits. The lean HTTP path builds the body itself and records it here
the same way. Keys travel in headers, never in the body; the body is redacted of them anyway.
"""
from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

# the attempt record a body is written into, for the call being made in this context
SINK: ContextVar[dict[str, Any] | None] = ContextVar("workbench_sent_body", default=None)
_INSTALLED: list[Any] = []


def plain(body: Any) -> Any:
    """The body as JSON values (litellm may hand over SDK objects inside it)."""
    return json.loads(json.dumps(body, default=str))


def record(body: Any, *, plain_json: bool = False) -> None:
    """Keep ``body`` as the sent body of the attempt this context is making (if any); a body
    already made of JSON values and not changed after (``plain_json``: the lean path's) is kept as is."""
    sink = SINK.get()
    if sink is not None and isinstance(body, dict):
        sink["sent"] = body if plain_json else plain(body)


def as_sent(body: Any) -> Any:
    """litellm's payload as the HTTP body: the openai SDK merges ``extra_body`` into the JSON and
    sends ``extra_headers`` as headers (ours: the request id), so neither is a body field."""
    if not isinstance(body, dict) or not ({"extra_body", "extra_headers"} & set(body)):
        return body
    out = {k: v for k, v in body.items() if k not in ("extra_body", "extra_headers")}
    extra = body.get("extra_body")
    if isinstance(extra, dict):
        out.update(extra)
    return out


def record_deployment(kwargs: Any) -> None:
    """The pool deployment litellm's Router chose for this attempt (``model_info.id``, ours only:
    see :mod:`.pool`), kept on the attempt as ``_deployment`` for the client to name."""
    sink = SINK.get()
    if sink is None or not isinstance(kwargs, dict):
        return
    info = (kwargs.get("litellm_params") or {}).get("model_info") or {}
    dep = info.get("id") if isinstance(info, dict) else None
    if isinstance(dep, str) and dep.startswith("wbpool-"):
        sink["_deployment"] = dep


def install(litellm: Any) -> None:
    """Register the pre-call logger once per process (idempotent)."""
    if _INSTALLED:
        return
    from litellm.integrations.custom_logger import CustomLogger

    class SentBody(CustomLogger):
        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            record(as_sent(((kwargs or {}).get("additional_args") or {}).get("complete_input_dict")))
            record_deployment(kwargs)

    logger = SentBody()
    litellm.callbacks = [*list(getattr(litellm, "callbacks", None) or []), logger]
    _INSTALLED.append(logger)


def redact_json(value: Any, known: list[str]) -> Any:
    """``value`` with each of the ``known`` key values replaced wherever it occurs (a key never
    reaches a record; ``keys.secret_values`` gives them). Only known values: the body is data, and
    a key-shaped string an agent wrote is kept."""
    from workbench.models.litellm_client.keys import REDACTED

    known = [v for v in known if v]
    if known:  # one encoding in C and a byte search: the walk below only for a body that holds a key
        import msgspec

        try:
            encoded = msgspec.json.encode(value)
        except (TypeError, msgspec.EncodeError):
            encoded = None
        if encoded is not None:
            known = [k for k in known if k.encode() in encoded or json.dumps(k)[1:-1].encode() in encoded]

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            for k in known:
                v = v.replace(k, REDACTED)
            return v
        if isinstance(v, dict):
            return {key: walk(x) for key, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value) if known else value


def sha256_json(value: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
