"""One client per agent: the call loop (attempts, backoff, the cache, the budget, the ledger) and the reply's facts."""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from workbench.models.base import ModelReply, ModelRequest
from workbench.models.budget import BUDGET_ERROR, Budget
from workbench.models.catalogue import ModelEntry
from workbench.models.ledger import BoundLedger
from workbench.models.litellm_client import lean, loader
from workbench.models.litellm_client import prompt_cache as pcache
from workbench.models.litellm_client import sent as sent_body
from workbench.models.litellm_client.cache import ReplyCache, cache_key
from workbench.models.litellm_client.keys import _api_base, find_key, redact, secret_values, strip_credentials
from workbench.models.litellm_client.limits import estimate_tokens, limits_for
from workbench.models.litellm_client.loader import get_litellm
from workbench.models.litellm_client.pool import pool_for
from workbench.models.litellm_client.request import _rejected_param, _supported, prepare_params
from workbench.models.litellm_client.retries import MalformedResponse, _headers_of, classify, parse_retry_after
from workbench.models.litellm_client.sent import redact_json, sha256_json
from workbench.models.prices import TokenPrices, catalogue_prices, map_prices


def _usage(resp: Any) -> dict[str, int]:
    u = getattr(resp, "usage", None)
    if u is None:
        return {}
    out: dict[str, int] = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = getattr(u, k, None)
        if isinstance(v, int):
            out[k] = v
    details = getattr(u, "completion_tokens_details", None)
    rt = getattr(details, "reasoning_tokens", None) if details is not None else None
    if isinstance(rt, int):
        out["reasoning_tokens"] = rt
    # prompt tokens read from the provider's prompt cache (OpenAI's prompt_tokens_details.cached_tokens,
    # where litellm also puts Anthropic's cache_read_input_tokens) and written to it (Anthropic's
    # cache_creation_input_tokens): both are part of prompt_tokens, priced apart (workbench.models.prices)
    pdet = getattr(u, "prompt_tokens_details", None)
    ct = getattr(pdet, "cached_tokens", None) if pdet is not None else None
    if not isinstance(ct, int):
        ct = getattr(u, "cache_read_input_tokens", None)
    if isinstance(ct, int):
        out["cached_tokens"] = ct
    wt = getattr(u, "cache_creation_input_tokens", None)
    if not isinstance(wt, int) or not wt:
        wt = getattr(pdet, "cache_creation_tokens", None) if pdet is not None else None
    if isinstance(wt, int) and wt:
        out["cache_write_tokens"] = wt
    return out


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    """Native tool calls as plain data; arguments stay the raw text the model wrote."""
    out = []
    for call in getattr(message, "tool_calls", None) or []:
        fn = getattr(call, "function", None)
        out.append({"id": str(getattr(call, "id", "") or ""), "name": str(getattr(fn, "name", "") or ""),
                    "arguments": str(getattr(fn, "arguments", "") or "")})
    return out


def _reasoning(message: Any) -> str | None:
    rc = getattr(message, "reasoning_content", None)
    if rc:
        return str(rc)
    blocks = getattr(message, "thinking_blocks", None) or []
    texts = []
    for b in blocks:
        t = b.get("thinking") if isinstance(b, dict) else getattr(b, "thinking", None)
        if t:
            texts.append(str(t))
    return "\n\n".join(texts) if texts else None


_LEDGER_ATTEMPT_KEYS = ("n", "request_id", "status", "error", "duration_s", "wait_s", "local", "cancelled",
                        "rpm_wait_s", "tpm_wait_s", "deployment", "cooldown_s")


def _ledger_attempts(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An attempt as the ledger keeps it: what happened, not the (redacted) message."""
    return [{k: a[k] for k in _LEDGER_ATTEMPT_KEYS if k in a} for a in attempts]


class LiteLLMClient:
    """One agent's client for a real model (see the module docstring)."""

    virtual_time = False  # latency is measured wall time, not a world-clock draw

    def __init__(self, entry: ModelEntry, *, seed: int = 0, budget: Budget | None = None,
                 cache_dir: str | Path | None = None, timeout_s: float | None = None,
                 max_attempts: int | None = None, api_base: str | None = None,
                 backoff_base_s: float | None = None,
                 sleep: Callable[[float], Awaitable[Any]] | None = None, ledger: BoundLedger | None = None,
                 prompt_cache: str | None = None) -> None:
        """``prompt_cache``: auto or off for this client (a study's cell switching caching off),
        in place of the entry's own setting."""
        self.entry = entry
        self.route = entry.route
        self.name = entry.name or None
        self.seed = seed
        self.budget = budget
        self.ledger = ledger
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.timeout_s = float(timeout_s if timeout_s is not None else entry.timeout_s)
        self.max_attempts = int(max_attempts if max_attempts is not None else entry.max_attempts)
        self.backoff_base_s = float(backoff_base_s if backoff_base_s is not None else entry.backoff_base_s)
        self.api_base = api_base if api_base is not None else _api_base(entry)
        self.rng = random.Random(seed)
        self._sleep = sleep or asyncio.sleep
        get_litellm()  # once per process, here rather than inside the first call's measured latency
        # several servers: calls go through litellm's Router (see .pool); the limits are the pool's
        self.pool = pool_for(entry) if entry.deployments else None
        if self.pool is not None:
            pool_key, pool_rpm, pool_tpm = self.pool.limits()
            self.limits = limits_for(self.route, pool_key, entry.max_connections, pool_rpm, pool_tpm)
        else:
            self.limits = limits_for(self.route, self.api_base, entry.max_connections, entry.rpm, entry.tpm)
        self.prompt_cache = pcache.check_mode(prompt_cache if prompt_cache is not None else entry.prompt_cache)
        self._breakpoints = self.prompt_cache == "auto" and pcache.needs_breakpoints(self.route)
        self._token_prices: TokenPrices | None | bool = False  # looked up on first use (see _prices)
        self._own_prices: TokenPrices | None = None  # the catalogue's, cache prices resolved (see _cost)
        self._supported_cache: set[str] | None | bool = False
        self.lean = lean.lean_eligible(entry, self.api_base)
        self._redacted: dict[tuple[str, tuple[str, ...]], str] = {}
        self._known: dict[tuple[str, ...], list[str]] = {}  # key values to redact, per key (read once: ~0.2 ms)

    # -- pieces -------------------------------------------------------------------------
    def _redact_base(self, base: Any, secrets: tuple[str, ...]) -> str:
        """An api_base as recorded (redacted), once per client and key: redaction scans the
        environment and .env, ~0.2 ms, and the same two bases are recorded on every call."""
        memo_key = (str(base), secrets)
        got = self._redacted.get(memo_key)
        if got is None:
            got = self._redacted[memo_key] = redact(strip_credentials(str(base)), secrets)
        return got

    def _known_secrets(self, secrets: tuple[str, ...]) -> list[str]:
        got = self._known.get(secrets)
        if got is None:
            got = self._known[secrets] = secret_values(secrets)
        return got

    def _keep_sent(self, attempts: list[dict[str, Any]], extra: dict[str, Any], known: list[str]) -> None:
        """What each attempt sent (see .sent): the last attempt's body in the reply's extra, an
        earlier one's hash on its attempt (a retry may send other parameters); failed or not."""
        if attempts and "sent" in attempts[-1]:
            extra["sent"] = redact_json(attempts[-1].pop("sent"), known)
        for att in attempts:
            if "sent" in att:
                att["sent_sha256"] = sha256_json(att.pop("sent"))

    def _supported(self) -> set[str] | None:
        if self._supported_cache is False:
            self._supported_cache = _supported(self.route)
        return self._supported_cache  # type: ignore[return-value]

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with seeded jitter before attempt ``attempt + 1``."""
        base = min(self.entry.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return round(base * (0.5 + self.rng.random()), 6)

    def cache_key(self, messages: list[dict[str, Any]], sent: dict[str, Any]) -> str:
        # a pool has no api_base of its own: its key names the pool, apart from the bare route's
        return cache_key(self.route, self.api_base if self.pool is None else self.pool.limits()[0], messages, sent)

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        return ReplyCache(self.cache_dir).get(key) if self.cache_dir is not None else None

    def _cache_put(self, key: str, reply: ModelReply) -> None:
        if self.cache_dir is not None:
            ReplyCache(self.cache_dir).put(key, reply)

    def _prices(self) -> TokenPrices | None:
        """Per-token USD: litellm's map for the route, else the catalogue's; cache prices from the
        catalogue, else litellm's map, else the input price (see workbench.models.prices)."""
        if self._token_prices is False:
            cost_map = get_litellm().model_cost
            self._token_prices = map_prices(self.entry, cost_map) or catalogue_prices(self.entry, cost_map)
        return self._token_prices  # type: ignore[return-value]

    def estimate_cost(self, messages: list[dict[str, Any]], sent: dict[str, Any]) -> float | None:
        """An upper bound of a call's cost: prompt bytes (a byte-level BPE never makes more tokens than
        bytes) plus overhead at the dearest prompt price (a cache write may cost more than fresh
        input), plus the output cap at the output price."""
        prices = self._prices()
        if prices is None:
            return None
        prompt = sum(len(str(m.get("content", "")).encode("utf-8")) + 8 for m in messages) + 16
        cap = sent.get("max_tokens") or sent.get("max_completion_tokens") or 4096
        return prompt * prices.prompt_bound + int(cap) * prices.output

    def _cost(self, resp: Any, usage: dict[str, int]) -> tuple[float | None, str | None]:
        hidden = getattr(resp, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        if cost is not None and self.pool is not None and map_prices(self.entry, get_litellm().model_cost) is None:
            cost = None  # the Router registers a pool's model unpriced, so litellm says 0.0: the catalogue prices it
        if cost is not None:
            return float(cost), "litellm"
        if self.entry.priced() and usage:
            if self._own_prices is None:
                self._own_prices = catalogue_prices(self.entry, get_litellm().model_cost)
            if self._own_prices is not None:
                return self._own_prices.cost(usage), "catalogue"
        return None, None

    def _tpm_counted(self, usage: dict[str, int]) -> int:
        """The tokens an attempt counts against the tokens-per-minute limit, from its usage:
        prompt and output; Anthropic does not count prompt tokens read from its cache."""
        prompt = usage.get("prompt_tokens", 0)
        if pcache.needs_breakpoints(self.route):
            prompt -= usage.get("cached_tokens", 0)
        return max(0, prompt) + usage.get("completion_tokens", 0)

    def _deployment(self, att: dict[str, Any], resp: Any, exc: BaseException | None) -> None:
        """Name the pool deployment that took an attempt (see .pool); after a failure, note the
        cooldown it put the deployment into, if it did."""
        assert self.pool is not None
        dep_id = att.pop("_deployment", None)
        if resp is not None:  # the deployment that answered says so itself
            dep_id = (getattr(resp, "_hidden_params", None) or {}).get("model_id") or dep_id
        att["deployment"] = self.pool.name_of(dep_id)
        if exc is not None and dep_id:
            cooled = self.pool.new_cooldown(dep_id)
            if cooled is not None:
                att["cooldown_s"] = cooled

    # -- the call -----------------------------------------------------------------------
    async def complete(self, request: ModelRequest) -> ModelReply:
        """One call; its ledger line is written however it ends (a cancelled call too)."""
        trace: dict[str, Any] = {"attempts": [], "reservation": None, "in_request": False, "call_id": uuid.uuid4().hex}
        try:
            reply = await self._complete(request, trace)
        except asyncio.CancelledError:
            http = trace.pop("http", None)
            if http is not None and not http.done():
                task = asyncio.ensure_future(self._finish_detached(http, trace))
                _DETACHED.add(task)
                task.add_done_callback(_DETACHED.discard)
            else:
                if http is not None:
                    self.limits.leave()
                self._cancelled(trace)
            raise
        if self.ledger is not None:
            state = ("cache hit" if reply.extra.get("cache_hit") else "refused" if reply.error and
                     reply.error.startswith(BUDGET_ERROR) else "failed" if reply.error else "answered")
            line = {"route": self.route, "state": state, "call_id": trace["call_id"],
                    "attempts": _ledger_attempts(reply.attempts), "cost_usd": reply.cost_usd, "error": reply.error}
            if reply.usage and state == "answered":  # cached prompt tokens included: what the cost rests on
                line["usage"] = reply.usage
            if self.pool is not None and state == "answered":
                line["deployment"] = reply.extra.get("deployment")
            self.ledger.record(line)
        return reply

    async def _finish_detached(self, http: asyncio.Future[Any], trace: dict[str, Any]) -> None:
        """The request of a cancelled call, left to finish: its answer is used by no world,
        but its status, usage and cost are recorded and charged. Cancelled in turn (the run
        stops), it is recorded as cancelled mid-request with its worst case charged."""
        try:
            resp = await http
            error = None
        except asyncio.CancelledError:
            self.limits.leave()
            self._cancelled(trace)
            raise
        except Exception as e:  # noqa: BLE001
            resp, error = None, e
        self.limits.leave()
        att = trace["attempts"][-1]
        att["duration_s"] = round(time.monotonic() - trace["a0"], 6)
        att["cancelled"] = True
        if self.pool is not None:
            self._deployment(att, resp, error)
        usage = _usage(resp) if resp is not None else {}
        if usage and trace.get("tpm_slot") is not None:
            trace["tpm_slot"].settle(self._tpm_counted(usage))
        cost = self._cost(resp, usage)[0] if resp is not None else 0.0
        if error is not None:
            att.update(status=classify(error)[1], error=classify(error)[0])
        else:
            att["status"] = 200
        reservation = trace["reservation"]
        if reservation is not None and self.budget is not None:
            self.budget.settle(reservation, cost)
        if self.ledger is not None:
            self.ledger.record({"route": self.route, "state": "cancelled", "call_id": trace["call_id"],
                                "attempts": _ledger_attempts(trace["attempts"]),
                                "cost_usd": cost, "usage": usage, "finished_after_cancel": True,
                                "error": "Cancelled: the call was cancelled in flight; its request was let finish"})

    def _cancelled(self, trace: dict[str, Any]) -> None:
        """A call cancelled in flight (its world ended, the run stopped): a request that may
        have reached the provider keeps its worst-case cost charged, since no usage came back
        to say what it cost; one cancelled while queued or backing off charges nothing."""
        attempts = trace["attempts"]
        if attempts and "status" not in attempts[-1] and "error" not in attempts[-1]:
            attempts[-1]["cancelled"] = True
            if not trace["in_request"]:  # cancelled while its open line was being synced: never sent
                attempts[-1]["local"] = True
        reservation, charged = trace["reservation"], None
        if reservation is not None and self.budget is not None:
            charged = reservation.amount if trace["in_request"] else 0.0
            self.budget.settle(reservation, charged)
        if self.ledger is not None:
            self.ledger.record({"route": self.route, "state": "cancelled", "call_id": trace["call_id"],
                                "attempts": _ledger_attempts(attempts),
                                "cost_usd": None, "charged_usd": charged,
                                "in_request": trace["in_request"], "error": "Cancelled: the call was cancelled in flight"})

    async def _complete(self, request: ModelRequest, trace: dict[str, Any]) -> ModelReply:
        t0 = time.monotonic()
        wall0 = time.time()
        key, key_source = find_key(self.entry)
        secrets = (key,) if key else ()
        if self.pool is not None:
            secrets = tuple(sorted({*secrets, *self.pool.secrets()}))
        requested = {**self.entry.defaults(), **dict(request.params)}
        from_catalogue = sorted(k for k in self.entry.defaults() if k not in request.params)
        supported = self._supported()
        sent, why, changes = prepare_params(self.entry, requested, supported)
        extra: dict[str, Any] = {
            "catalogue": self.name, "provider": self.entry.provider,
            "api_base": self._redact_base(self.api_base, secrets) if self.api_base else None,
            "key_source": key_source, "defaults_from_catalogue": from_catalogue,
            "params_dropped_why": dict(why), "param_changes": list(changes), "cache_hit": False,
        }
        if self.pool is not None:
            extra["routing"] = self.pool.summary()
        messages = [dict(m) for m in request.messages]
        replayed = pcache.reasoning_blocks_sent(messages)
        if replayed:
            extra["reasoning_blocks_replayed"] = replayed

        def reply(**kw: Any) -> ModelReply:
            kw.setdefault("latency_s", round(time.monotonic() - t0, 6))
            kw.setdefault("text", "")
            r = ModelReply(route=self.route, params_requested=requested, params_sent=dict(sent),
                           params_dropped=sorted(why), extra=extra, **kw)
            r.timing = {"started_unix": round(wall0, 3), "wall_s": round(time.monotonic() - t0, 6)}
            return r

        # cache ------------------------------------------------------------------------
        if request.tools:
            sent = {**sent, "tools": [dict(t) for t in request.tools]}
        ckey = self.cache_key(messages, sent) if self.cache_dir is not None else None
        if ckey is not None:
            hit = self._cache_get(ckey)
            if hit is not None:
                rec = hit["reply"]
                extra.update(cache_hit=True, cache_key=ckey,
                             cached={"cost_usd": rec.get("cost_usd"), "attempts": len(rec.get("attempts") or []),
                                     "latency_s": rec.get("latency_s"), "extra": rec.get("extra")})
                for name in pcache.REASONING_FIELDS:  # the agent's next turn replays them as they came
                    if (rec.get("extra") or {}).get(name):
                        extra[name] = rec["extra"][name]
                return reply(text=rec.get("text") or "", latency_s=float(rec.get("latency_s") or 0.0),
                             model_returned=rec.get("model_returned"), reasoning=rec.get("reasoning"),
                             usage=dict(rec.get("usage") or {}), cost_usd=0.0, attempts=[],
                             tool_calls=list(rec.get("tool_calls") or []))

        # budget -----------------------------------------------------------------------
        reservation = None
        if self.budget is not None:
            estimate = self.estimate_cost(messages, sent)
            reservation = self.budget.reserve(estimate or 0.0)
            trace["reservation"] = reservation if reservation.granted else None
            extra["budget"] = {"reserved_usd": round(estimate, 8) if estimate is not None else None,
                               "bounded": estimate is not None}
            if not reservation.granted:
                bound = f"up to {estimate:.6f} USD" if estimate is not None else "an unknown amount"
                return reply(error=f"{BUDGET_ERROR}: this call could cost {bound} and "
                                   f"{self.budget.remaining:.6f} of {self.budget.limit_usd:.6f} USD remain",
                             latency_s=0.0)

        # prompt cache -----------------------------------------------------------------
        wire = messages  # what goes to litellm: the request, with cache breakpoints where the provider needs them
        if self._breakpoints:
            wire, marked = pcache.breakpoints(messages)
            extra["prompt_cache"] = {"mode": "auto", "breakpoints": marked if marked is not None
                                     else "the request's own"}
        elif self.prompt_cache == "off" and pcache.needs_breakpoints(self.route):
            extra["prompt_cache"] = {"mode": "off", "breakpoints": []}
        else:  # nothing to send: the provider caches long prefixes on its own (or not at all)
            extra["prompt_cache"] = {"mode": self.prompt_cache, "breakpoints": None}
        tpm_tokens = estimate_tokens(messages, sent) if self.limits.tpm else 0

        # attempts ---------------------------------------------------------------------
        litellm = get_litellm()
        attempts: list[dict[str, Any]] = trace["attempts"]
        queue_s = 0.0
        error: str | None = None
        resp: Any = None
        try:
            for n in range(1, self.max_attempts + 1):
                q0 = time.monotonic()
                sem = self.limits.semaphore()
                async with sem:
                    waited_rpm = await self.limits.rpm_slot(self._sleep)
                    waited_tpm, tpm_slot = (await self.limits.tpm_slot(tpm_tokens, self._sleep) if self.limits.tpm
                                            else (0.0, None))
                    a0 = time.monotonic()
                    queue_s += a0 - q0
                    att: dict[str, Any] = {"n": n, "start_s": round(a0 - t0, 6), "request_id": uuid.uuid4().hex}
                    attempts.append(att)  # now, so a cancellation mid-request still finds it
                    if a0 - q0 > 0.0005:
                        att["queued_s"] = round(a0 - q0, 6)
                    if waited_rpm:
                        att["rpm_wait_s"] = round(waited_rpm, 6)
                    if tpm_slot is not None:
                        trace["tpm_slot"] = tpm_slot
                        att["tpm_tokens_estimated"] = tpm_tokens
                        if waited_tpm:
                            att["tpm_wait_s"] = round(waited_tpm, 6)
                    kwargs: dict[str, Any] = dict(model=self.route, messages=wire, timeout=self.timeout_s,
                                                  num_retries=0, max_retries=0, drop_params=False, **sent)
                    # sent as the client request id, so our records and a provider's logs can be matched
                    kwargs["extra_headers"] = {"X-Client-Request-Id": att["request_id"]}
                    if self.api_base:
                        kwargs["api_base"] = self.api_base
                    if key:
                        kwargs["api_key"] = key
                    elif self.api_base and self.entry.auth == "none":
                        kwargs["api_key"] = "EMPTY"  # a server of our own that takes no key (declared auth: none)
                    elif self.api_base:
                        kwargs["api_key"] = None  # no key and none declared unneeded: the provider says no
                    if self.ledger is not None:  # write-ahead: recorded (synced) before the request is sent
                        if "worst_usd" not in trace:  # the reservation, or the same bound without a budget
                            held = trace.get("reservation")
                            trace["worst_usd"] = held.amount if held is not None else self.estimate_cost(messages, sent)
                        reserved = trace["worst_usd"]
                        self.ledger.open({"route": self.route, "call_id": trace["call_id"], "n": n,
                                          "request_id": att["request_id"], "reserved_usd": reserved})
                    self.limits.enter()
                    trace["in_request"] = True
                    # shielded: a call cancelled mid-request lets its request finish in the background
                    # (see complete), so what the provider saw and what it cost are still recorded
                    if self.pool is not None:  # litellm's Router picks the deployment (keys are its own)
                        call = self.pool.acompletion(**{k: v for k, v in kwargs.items()
                                                        if k not in ("model", "api_base", "api_key")})
                    elif self.lean and kwargs.get("api_key") and lean.sendable(wire, sent):  # same request, less CPU
                        call = lean.acompletion(model=self.route, messages=wire, api_base=kwargs["api_base"],
                                                api_key=kwargs["api_key"], timeout=self.timeout_s, params=sent,
                                                request_id=att["request_id"])
                    else:
                        call = litellm.acompletion(**kwargs)
                    # the call's task inherits this context: litellm's pre-call logger (or the lean
                    # path) writes the body it sends into this attempt (see .sent)
                    token = sent_body.SINK.set(att)
                    try:
                        http = asyncio.ensure_future(_bounded(call, self.timeout_s + 1.0))
                    finally:
                        sent_body.SINK.reset(token)
                    try:
                        resp = await asyncio.shield(http)
                        exc: BaseException | None = None
                    except asyncio.CancelledError:
                        att["duration_s"] = round(time.monotonic() - a0, 6)
                        trace["http"], trace["a0"] = http, a0
                        raise
                    except Exception as e:  # noqa: BLE001 - every provider fault is data
                        exc, resp = e, None
                    except BaseException:
                        if not trace.get("http"):
                            self.limits.leave()
                        raise
                    self.limits.leave()
                    trace["in_request"] = False
                    att["duration_s"] = round(time.monotonic() - a0, 6)
                    if self.pool is not None:
                        self._deployment(att, resp, exc)
                if exc is None:
                    try:
                        _ = resp.choices[0].message
                    except Exception as e:  # noqa: BLE001 - a body without a message: a malformed reply
                        exc, resp = MalformedResponse(f"reply without choices[0].message ({type(e).__name__})"), None
                if exc is None:
                    att["status"] = 200
                    break
                cls, status, retryable = classify(exc)
                err_text = redact(str(exc), secrets)[:500]
                att.update(status=status, error=cls, message=err_text)
                if cls == "UnsupportedParamsError":
                    att["local"] = True  # raised by litellm before any request went out
                error = f"{cls}: {err_text}"
                # a provider that rejects a parameter we sent: adapt explicitly, record, try again
                if status == 400 and self.entry.adapt_on_reject:
                    bad = _rejected_param(str(exc), sent)
                    if bad is not None and n < self.max_attempts:
                        value = sent.pop(bad)
                        if bad == "reasoning_effort" and self.entry.effort_fallback not in (None, value):
                            sent[bad] = self.entry.effort_fallback
                            change = {"param": bad, "requested": value, "sent": sent[bad],
                                      "reason": "provider rejected it (400): catalogue effort_fallback"}
                        else:
                            why[bad] = "provider rejected it (400): dropped and retried"
                            change = {"param": bad, "requested": value, "sent": None, "reason": why[bad]}
                        changes.append(change)
                        extra["params_dropped_why"], extra["param_changes"] = dict(why), list(changes)
                        att["adapted"] = change
                        continue
                if not retryable or n >= self.max_attempts:
                    break
                retry_after = parse_retry_after(_headers_of(exc))  # sent with 429 and 503, honoured whenever sent
                if retry_after is None and self.pool is not None and att.get("deployment") is None:
                    retry_after = self.pool.next_free_s()  # every server cooling down: wait for the first back
                if retry_after is not None:
                    if retry_after > self.entry.max_retry_after_s:
                        att["retry_after_s"] = retry_after
                        error += f" (Retry-After {retry_after:.0f} s exceeds max_retry_after_s " \
                                 f"{self.entry.max_retry_after_s:.0f} s: not retried)"
                        break
                    wait, att["retry_after_s"] = retry_after, round(retry_after, 6)
                else:
                    wait = self.backoff(n)
                att["wait_s"] = round(wait, 6)
                await self._sleep(wait)

        except asyncio.CancelledError:  # complete() accounts for the call (ledger, budget)
            raise
        extra["queue_s"] = round(queue_s, 6)
        known = self._known_secrets(secrets)
        self._keep_sent(attempts, extra, known)
        if resp is None:
            if reservation is not None and self.budget is not None:
                self.budget.settle(reservation, 0.0)  # a failed request is not billed
            return reply(error=error or "no attempt made", attempts=attempts)

        message = resp.choices[0].message
        usage = _usage(resp)
        slot = trace.get("tpm_slot")
        if slot is not None and usage:
            counted = self._tpm_counted(usage)
            slot.settle(counted)
            attempts[-1]["tpm_tokens_counted"] = counted
        cost, cost_source = self._cost(resp, usage)
        hidden = getattr(resp, "_hidden_params", None) or {}
        extra.update(cost_source=cost_source, finish_reason=getattr(resp.choices[0], "finish_reason", None),
                     api_base_used=self._redact_base(hidden.get("api_base"), secrets) if hidden.get("api_base") else None,
                     response_id=getattr(resp, "id", None))
        if self.pool is not None:
            extra["deployment"] = attempts[-1].get("deployment")
        if reservation is not None and self.budget is not None:
            self.budget.settle(reservation, cost)
            extra["budget"]["charged_usd"] = cost
        # a server may reflect a key into its reply: model text is data, but no key value is ever recorded
        blocks = pcache.reasoning_of(message)
        as_sent = [message.content or "", _reasoning(message), _tool_calls(message), blocks]
        text, reasoning, tools, kept = redact_json(as_sent, known)
        if [text, reasoning, tools, kept] != as_sent:
            extra["redacted"] = "a key's value in the reply was replaced by [REDACTED]"
        extra.update(kept)  # thinking blocks (signed), reasoning items: the agent's own next turns replay them
        out = reply(text=text, model_returned=getattr(resp, "model", None), reasoning=reasoning, usage=usage,
                    cost_usd=cost, attempts=attempts, tool_calls=tools)
        if ckey is not None:
            extra["cache_key"] = ckey
            self._cache_put(ckey, out)
        return out


async def _bounded(call: Awaitable[Any], seconds: float) -> Any:
    """``call`` with a backstop timeout (TimeoutError), in the one task that runs it
    (``asyncio.wait_for`` would add a second task per request)."""
    async with asyncio.timeout(seconds):
        return await call


_DETACHED: set[asyncio.Task[None]] = set()


async def drain_detached(timeout_s: float) -> int:
    """Wait up to ``timeout_s`` for the requests of cancelled calls to finish (they record
    themselves); cancel what is left (recorded as cancelled mid-request). Returns how many
    were waited for. Call it before the run's ledger is closed."""
    pending = [t for t in _DETACHED if not t.done()]
    if not pending:
        return 0
    done, left = await asyncio.wait(pending, timeout=timeout_s)
    for t in left:
        t.cancel()
    if left:
        await asyncio.gather(*left, return_exceptions=True)
    return len(pending)


async def aclose_clients() -> None:
    """Close litellm's cached HTTP sessions of the running event loop and forget them.

    Call it at the end of a run (inside the loop, e.g. in ``run_study_async``'s finally) when
    the process goes on to make another loop: otherwise each ``asyncio.run`` leaves its sessions'
    sockets open until exit (ResourceWarning: unclosed transport). A no-op if litellm was never used."""
    await lean.aclose_sessions()
    if loader._LITELLM is None:  # never imported: nothing to close
        return
    try:
        await loader._LITELLM.close_litellm_async_clients()
    finally:
        loader._LITELLM.in_memory_llm_clients_cache.flush_cache()
