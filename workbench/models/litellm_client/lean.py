"""A lean request path for OpenAI-compatible servers: one aiohttp POST per attempt, same facts as litellm's.

Why (measured, issue 17): at 32 calls in flight on one event loop, ``litellm.acompletion``
costs about 4 ms of CPU per call against a local OpenAI-compatible server (its logging
wrappers, response metadata and cost calculation, the openai SDK and httpx under it);
the openai SDK alone about 2 ms, httpx alone about 1 ms, one aiohttp POST about 0.2 ms.
CPU per call, not the network, bounds an HTTP study, so for the routes where litellm
does nothing but pass the request through, the request goes out here.

Only where the two paths are provably the same request (:func:`lean_eligible`): an
``openai/`` route (not ``openai/responses/...``, which litellm sends to the Responses
API) with an explicit ``api_base`` (a local or self-hosted OpenAI-compatible server)
whose model litellm neither knows (not in its cost map) nor transforms (its chat
config for the model is ``OpenAIUnknownModelConfig``: parameters pass through as given),
and a request whose messages are text turns only and whose parameters are among
:data:`LEAN_PARAMS` (:func:`sendable`; litellm rewrites tool turns and drops some
parameters, e.g. ``tool_choice`` without tools). Every other route or request, hosted OpenAI models included, goes
through litellm.

What is recorded does not change: the body sent is ``{"model", "messages", **params
sent}`` exactly as litellm builds it for such a model; the reply is read into an object
with the attributes the client reads from litellm's (``choices[0].message``, ``model``,
``usage``, ``id``, ``_hidden_params`` with ``api_base`` and ``response_cost``, priced by
litellm's own ``cost_per_token`` when the returned model id is one litellm prices, as
litellm does). A failed attempt raises the exception litellm would have raised: the
openai SDK's exception is rebuilt from the response (status, headers, body) and mapped
by litellm's own ``exception_type``, so class, status, message and Retry-After are
litellm's. Error paths are rare and may cost what they cost; the 200 path is the lean one.
``tests/test_lean_path.py`` compares both paths record for record against the fake server.
"""
from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import msgspec

from workbench.models.catalogue import ModelEntry
from workbench.models.litellm_client import sent
from workbench.models.litellm_client.loader import get_litellm

_NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
_ELIGIBLE: dict[tuple[str, str | None], bool] = {}
_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
_SDK: list[Any] = []  # one openai client, used only to build status errors exactly as the SDK does


def lean_eligible(entry: ModelEntry, api_base: str | None) -> bool:
    """Whether litellm would send this route's requests through unchanged (see the module docstring)."""
    if entry.transport == "litellm" or not api_base or not entry.route.startswith("openai/"):
        return False
    if entry.route.startswith("openai/responses/"):  # litellm speaks the Responses API (POST /responses) there
        return False
    if "@" in api_base.split("//", 1)[-1].split("/", 1)[0]:  # credentials in the URL: litellm's client sends them
        return False
    key = (entry.route, api_base)
    got = _ELIGIBLE.get(key)
    if got is None:
        got = _check(entry.route.split("/", 1)[1])
        _ELIGIBLE[key] = got
    return got


def plain_messages(messages: list[dict[str, Any]]) -> bool:
    """Whether litellm sends these messages unchanged: text turns only. litellm rewrites others
    (an assistant turn with tool calls loses ``content: None``, content parts are normalised...),
    so a conversation with tool turns or content parts goes through litellm."""
    for m in messages:
        if len(m) != 2 or type(m.get("content")) is not str or m.get("role") not in _PLAIN_ROLES:
            return False
    return True


_PLAIN_ROLES = frozenset({"system", "user", "assistant"})
# Parameters seen to reach the server unchanged through litellm for such a model (tests/test_lean_path.py).
# Any other (tool_choice: dropped by litellm without tools; extra_body; ...) sends the request through litellm.
LEAN_PARAMS = frozenset({
    "temperature", "max_tokens", "max_completion_tokens", "top_p", "presence_penalty", "frequency_penalty",
    "logit_bias", "user", "stop", "seed", "logprobs", "top_logprobs", "response_format", "reasoning_effort", "tools",
})


def sendable(messages: list[dict[str, Any]], params: dict[str, Any]) -> bool:
    """Whether this request goes out by the lean path: text turns and parameters litellm passes through."""
    return all(k in LEAN_PARAMS for k in params) and plain_messages(messages)


def _check(model: str) -> bool:
    litellm = get_litellm()
    if model in litellm.model_cost or f"openai/{model}" in litellm.model_cost:
        return False
    try:
        from litellm.utils import ProviderConfigManager  # noqa: PLC0415 - litellm is imported lazily

        config = ProviderConfigManager.get_provider_chat_config(model, litellm.LlmProviders.OPENAI)
    except Exception:  # noqa: BLE001 - cannot tell: litellm's path
        return False
    return type(config).__name__ == "OpenAIUnknownModelConfig"


async def _session() -> Any:
    """This event loop's aiohttp session. Held by an async generator, so that ``asyncio.run``'s
    shutdown (``shutdown_asyncgens``) closes it even when nobody calls :func:`aclose_sessions`."""
    loop = asyncio.get_running_loop()
    held = _SESSIONS.get(loop)
    if held is None or held[0].closed:
        import aiohttp  # noqa: PLC0415 - a litellm dependency, imported with the path that uses it

        # no pool limit of its own: the client's per-route semaphore is the connection limit
        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), skip_auto_headers=("User-Agent",))
        holder = _hold(s)
        await holder.__anext__()
        held = (s, holder)
        _SESSIONS[loop] = held
    return held[0]


def _proxy_for(url: str) -> tuple[Any, Any]:
    """(proxy, proxy auth) the environment gives for ``url`` (HTTP(S)_PROXY, NO_PROXY), as it applies to
    litellm's httpx client (127.0.0.1 included). Looked up once per url and session, as litellm's cached
    clients read it once: aiohttp's own ``trust_env`` would look it up in a thread on every request."""
    got = _PROXIES.get(url)
    if got is None:
        from aiohttp.helpers import get_env_proxy_for_url  # noqa: PLC0415
        from yarl import URL  # noqa: PLC0415

        try:
            got = get_env_proxy_for_url(URL(url))
        except LookupError:
            got = (None, None)
        _PROXIES[url] = got
    return got


_PROXIES: dict[str, tuple[Any, Any]] = {}


async def _hold(session: Any) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await session.close()


async def aclose_sessions() -> None:
    """Close this event loop's session (its keep-alive sockets)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    held = _SESSIONS.pop(loop, None)
    _PROXIES.clear()
    if held is not None:
        await held[1].aclose()


def _ns(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _ns(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_ns(v) for v in value]
    return value


class LeanResponse:
    """The attributes of a litellm ModelResponse that the client reads, from the JSON body."""

    def __init__(self, body: dict[str, Any], hidden: dict[str, Any]) -> None:
        self.id = body.get("id")
        self.model = body.get("model")
        self.choices = [self._choice(c) for c in body["choices"]] if isinstance(body.get("choices"), list) else []
        usage = body.get("usage")
        self.usage = _ns(usage if isinstance(usage, dict) else _NO_USAGE)  # litellm's Usage() when none is sent
        self._hidden_params = hidden

    @staticmethod
    def _choice(c: Any) -> Any:
        if not isinstance(c, dict):
            return c
        msg = c.get("message")
        if isinstance(msg, dict):
            m = dict(msg)
            if m.get("reasoning_content") is None and m.get("reasoning") is not None:
                m["reasoning_content"] = m["reasoning"]  # as litellm maps a server's ``reasoning``
            msg = SimpleNamespace(content=m.get("content"), role=m.get("role"),
                                  tool_calls=_ns(m.get("tool_calls")) or None,
                                  reasoning_content=m.get("reasoning_content"),
                                  thinking_blocks=m.get("thinking_blocks"))
        finish = c.get("finish_reason")
        if isinstance(finish, str):
            from litellm.litellm_core_utils.core_helpers import map_finish_reason  # noqa: PLC0415 - imported by now

            finish = map_finish_reason(finish)  # as litellm does ("eos" -> "stop", ...)
        return SimpleNamespace(message=msg, finish_reason=finish, index=c.get("index"))


def _cost(returned: Any, usage: dict[str, Any] | None) -> float | None:
    """litellm's response_cost: priced by the returned model id when litellm's map has it, else None."""
    if not isinstance(returned, str) or not isinstance(usage, dict):
        return None
    litellm = get_litellm()
    if returned not in litellm.model_cost and f"openai/{returned}" not in litellm.model_cost:
        return None
    try:
        kw: dict[str, Any] = {}
        if isinstance(usage.get("prompt_tokens_details"), dict) or isinstance(usage.get("completion_tokens_details"),
                                                                              dict):
            from litellm.types.utils import Usage  # noqa: PLC0415 - imported by now

            kw["usage_object"] = Usage(**usage)  # as litellm prices it: cached prompt tokens at the cache price
        p, c = litellm.cost_per_token(model=returned, custom_llm_provider="openai",
                                      prompt_tokens=int(usage.get("prompt_tokens") or 0),
                                      completion_tokens=int(usage.get("completion_tokens") or 0), **kw)
        return float(p) + float(c)
    except Exception:  # noqa: BLE001 - litellm could not price it either
        return None


def _mapped(exc: Exception, model: str) -> Exception:
    """The exception litellm's openai path raises for ``exc`` (an openai SDK error or a decode error)."""
    get_litellm()
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type  # noqa: PLC0415
    from litellm.llms.openai.common_utils import OpenAIError, upstream_error_response  # noqa: PLC0415

    headers = getattr(exc, "headers", None)
    if headers is None and getattr(exc, "response", None) is not None:
        headers = getattr(exc.response, "headers", None)  # type: ignore[attr-defined]
    wrapped = OpenAIError(status_code=getattr(exc, "status_code", 500), message=getattr(exc, "message", str(exc)),
                          response=upstream_error_response(exc), headers=headers, body=getattr(exc, "body", None))
    try:
        return exception_type(model=model, custom_llm_provider="openai", original_exception=wrapped)
    except Exception as e:  # noqa: BLE001 - exception_type raises what it maps
        return e


_TIMEOUTS: dict[float, Any] = {}


def _timeout(seconds: float) -> Any:
    """httpx's timeout as litellm passes it (connect and each read within ``seconds``), as aiohttp's."""
    got = _TIMEOUTS.get(seconds)
    if got is None:
        import aiohttp  # noqa: PLC0415

        got = _TIMEOUTS[seconds] = aiohttp.ClientTimeout(total=None, sock_connect=seconds, sock_read=seconds)
    return got


def _sdk() -> Any:
    if not _SDK:
        import openai  # noqa: PLC0415

        _SDK.append(openai.AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1/v1", max_retries=0))
    return _SDK[0]


async def acompletion(*, model: str, messages: list[dict[str, Any]], api_base: str, api_key: str,
                      timeout: float, params: dict[str, Any], request_id: str) -> LeanResponse:
    """One POST to ``api_base``/chat/completions; raises what litellm would raise on a failure."""
    import aiohttp  # noqa: PLC0415
    import httpx2 as httpx  # noqa: PLC0415 - the openai SDK's own HTTP types

    bare = model.split("/", 1)[1]
    url = api_base.rstrip("/") + "/chat/completions"
    body = {"model": bare, "messages": messages, **{k: v for k, v in params.items() if v is not None}}  # as litellm
    sent.record(body, plain_json=True)  # what goes on the wire, as the litellm path records it
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
               "Accept": "application/json", "X-Client-Request-Id": request_id}
    t0 = time.time()
    data = msgspec.json.encode(body)  # the same JSON as json.dumps gives, in a fifth of the time
    try:
        proxy, proxy_auth = _proxy_for(url)
        async with (await _session()).post(url, data=data, headers=headers, timeout=_timeout(timeout),
                                           proxy=proxy, proxy_auth=proxy_auth) as r:
            status, raw, rh = r.status, await r.read(), r.headers
    except (TimeoutError, aiohttp.ServerTimeoutError):
        import openai  # noqa: PLC0415

        err: Exception = openai.APITimeoutError(request=httpx.Request("POST", url))
        err.message += f" - timeout value={timeout}, time taken={round(time.time() - t0, 2)} seconds"  # type: ignore[attr-defined]
        raise _mapped(err, bare) from None
    except aiohttp.ClientError:
        import openai  # noqa: PLC0415

        raise _mapped(openai.APIConnectionError(request=httpx.Request("POST", url)), bare) from None
    if status >= 400:
        resp = httpx.Response(status, headers=list(rh.items()), content=raw, request=httpx.Request("POST", url))
        raise _mapped(_sdk()._make_status_error_from_response(resp), bare)
    try:
        parsed = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        try:  # the standard library's error, as the openai SDK raises it (its message is recorded)
            parsed = json.loads(raw)
        except ValueError as e:
            raise _mapped(e, bare) from None
    if not isinstance(parsed, dict):
        raise _mapped(ValueError(f"Empty or invalid response from LLM endpoint. Received: {parsed!r}."), bare)
    usage = parsed.get("usage")
    if not isinstance(usage, dict):
        usage = _NO_USAGE
    hidden = {"api_base": api_base, "response_cost": _cost(parsed.get("model"), usage),
              "custom_llm_provider": "openai", "transport": "lean"}
    return LeanResponse(parsed, hidden)
