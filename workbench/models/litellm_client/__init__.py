"""Real models through litellm, with the request path recorded exactly.

A package, one module per concern: :mod:`.loader` (litellm, offline), :mod:`.keys`
(keys and redaction), :mod:`.limits`, :mod:`.cache` (replies), :mod:`.retries` (what to retry, Retry-After),
:mod:`.request` (parameters), :mod:`.client` (the call loop, cache, budget, ledger),
:mod:`.lean` (one plain HTTP POST instead of ``litellm.acompletion`` where litellm would
send the request unchanged: an ``openai/`` route at an ``api_base`` litellm neither prices
nor transforms, text turns, listed parameters; the same record, a fifth of the CPU),
:mod:`.prompt_cache` (cache breakpoints, native reasoning blocks), :mod:`.build`.

One :class:`LiteLLMClient` per agent, built from a catalogue entry
(:mod:`workbench.models.catalogue`): a named model of ``params/models.yaml`` or
a raw litellm route (``openai/…``, ``anthropic/…``, ``gemini/…``,
``openrouter/…``; any OpenAI-compatible server by ``api_base``).

What one call does, and records in its :class:`ModelReply`:

* **Parameters.** ``params_requested`` = the entry's defaults (temperature,
  max_tokens, reasoning_effort) under the request's own. Then, explicitly and
  recorded: parameters litellm says the provider does not take
  (``litellm.get_supported_openai_params``) are dropped; temperature is dropped
  for an entry with ``supports_temperature: false``; an effort the entry does not
  accept is replaced by its ``effort_fallback`` (or dropped). What goes out is
  ``params_sent``; the dropped names are ``params_dropped``, with reasons in
  ``extra.params_dropped_why`` and every change in ``extra.param_changes``. If
  the provider still rejects a parameter we sent (a 400 naming it), the
  parameter is dropped (or the effort falls back), recorded, and the call tried
  again (``adapt_on_reject``). litellm is called with ``drop_params=False`` so it
  never drops anything silently.
* **One retry layer, ours.** litellm and the openai SDK are called with
  ``num_retries=0, max_retries=0``: each attempt is one HTTP request. Up to
  ``max_attempts`` attempts; 429, 5xx, timeouts, connection errors and
  malformed bodies are retried after an exponential backoff with jitter drawn
  from a seeded RNG, or after exactly the server's Retry-After (seconds or an
  HTTP date) when it sends one. Every attempt is recorded (start offset,
  duration, status, error class and message with keys redacted, the wait that
  followed). When attempts run out the reply carries ``error`` ("Class:
  message"); the client never raises.
* **Limits.** A connection limit (asyncio.Semaphore), a requests-per-minute
  window and a tokens-per-minute window (``tpm``: each attempt's prompt and output
  cap estimated before it is sent, corrected from its usage after) shared by every
  client of the same route+api_base in the process; a timeout per attempt. The
  waits are recorded on the attempt (``rpm_wait_s``, ``tpm_wait_s``).
* **Prompt caching.** ``prompt_cache: auto`` (the entry's, or the client's
  ``prompt_cache`` option, a study factor) marks the stable prefix of each request
  (system prompt, history up to the previous step) with ``cache_control`` breakpoints
  on Anthropic routes; providers that cache on their own are sent nothing. What was
  marked is ``extra.prompt_cache``; the cached prompt tokens the provider reports are
  ``usage.cached_tokens`` (read) and ``usage.cache_write_tokens`` (written), priced at
  the cache prices (:mod:`workbench.models.prices`).
* **Facts.** The model id the provider returned, usage (with reasoning and
  cached tokens when reported), cost (litellm's offline cost map; else the
  entry's per-million prices; else None), latency (measured, from call to
  reply, queueing and retries included, which is what the world clock needs),
  reasoning text (``reasoning_content`` or thinking blocks), the provider's native
  reasoning blocks as returned (``extra.thinking_blocks`` with their signatures,
  ``extra.reasoning_items``: an agent's own next turn sends them back unchanged; how
  many a request sent back is ``extra.reasoning_blocks_replayed``), finish reason,
  the api_base actually used.
* **Budget.** With a :class:`~workbench.models.budget.Budget`, each call reserves
  its worst-case cost first and is refused (error ``BudgetExhausted: …``) when
  that does not fit; the reservation is settled at the actual cost.
* **Cache.** With ``cache_dir``, successful replies are stored as JSON under a
  SHA-256 of (route, api_base, messages, params sent); a hit comes back with
  ``extra.cache_hit = True``, no attempts, zero cost charged, and the recorded
  latency (so a re-run keeps the original world-clock order).
* **Keys.** From the environment, or from a ``.env`` file in the working
  directory (read here, never written into ``os.environ``); never from params.
  Only the *name* of the variable is recorded. Every message that is recorded
  passes through :func:`redact`, which removes the value of every key-like
  variable of the environment and ``.env`` and anything shaped like a key.

litellm is imported on first use, with its offline settings
(``LITELLM_LOCAL_MODEL_COST_MAP``, ``LITELLM_OFFLINE_MODE``) set beforehand.
"""
from workbench.models.litellm_client.build import build_client
from workbench.models.litellm_client.client import LiteLLMClient, aclose_clients, drain_detached
from workbench.models.litellm_client.keys import REDACTED, find_key, read_dotenv, redact, secret_values
from workbench.models.litellm_client.limits import ModelLimits, limits_for, reset_limits
from workbench.models.litellm_client.loader import get_litellm
from workbench.models.litellm_client.request import prepare_params
from workbench.models.litellm_client.retries import RETRY_STATUS, MalformedResponse, classify, parse_retry_after

__all__ = [
    "LiteLLMClient", "MalformedResponse", "ModelLimits", "REDACTED", "RETRY_STATUS", "aclose_clients",
    "build_client", "classify", "drain_detached", "find_key", "get_litellm", "limits_for",
    "parse_retry_after", "prepare_params", "read_dotenv", "redact", "reset_limits", "secret_values",
]
