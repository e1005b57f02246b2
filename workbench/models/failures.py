"""Why a model call failed, and whose doing that was.

A call that failed for good carries ``error = "Class: message"``. A study has
to tell two kinds of failure apart, because they mean opposite things:

* ``model``: the model's own doing under the study's rules (its conversation
  outgrew the context window, the provider refused its content). The world's
  end is an outcome of the condition under study and is kept as recorded.
* ``infrastructure``: nothing the model did (no key or a rejected one, quota
  and rate limits, network faults, timeouts, server errors after every retry,
  a malformed body, the budget, a call cancelled by the run stopping, no sandbox
  for agent-written code). The
  world says nothing about the model; a resume runs it again with the same
  seed, and a run that ends with one exits non-zero.

Invalid replies are not failed calls: they are outcomes, scored by the world.
"""
from __future__ import annotations

import re
from typing import Any

MODEL = "model"
INFRASTRUCTURE = "infrastructure"

_CODE = r"(?:error code|status(?: code)?)[:= ]*"  # an HTTP status named as such, not any number
# (cause, class, how to recognise the error text): the first match wins, so the
# specific rules (credentials hidden inside a 500, the budget) come first.
_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (cause, cls, re.compile(pattern, re.I)) for cause, cls, pattern in (
        ("budget", INFRASTRUCTURE, r"^BudgetExhausted\b"),
        ("cancelled", INFRASTRUCTURE, r"^(Cancelled|CancelledError)\b"),
        ("replay", INFRASTRUCTURE, r"\breplay exhausted\b"),
        ("script exhausted", INFRASTRUCTURE, r"\bscript exhausted\b"),  # a scripted agent ran out of replies
        ("sandbox", INFRASTRUCTURE, r"^SandboxUnavailable\b"),  # agent code could not run confined
        ("auth", INFRASTRUCTURE, r"^AuthenticationError\b|missing credentials|api_key client option must be set|"
                                 r"missing \w+ api key|invalid api key|incorrect api key|" + _CODE + "401"),
        ("permission", INFRASTRUCTURE, r"^PermissionDeniedError\b|" + _CODE + "403"),
        ("context length", MODEL, r"^ContextWindowExceededError\b|context (length|window)|maximum context"),
        ("content policy", MODEL, r"^ContentPolicyViolationError\b|content (policy|management|filter)"),
        ("rate limit", INFRASTRUCTURE, r"^(Router)?RateLimitError\b|" + _CODE + "429|quota|rate limit"),  # Router: every
        # server of a pool cooling down (workbench.models.litellm_client.pool)
        ("timeout", INFRASTRUCTURE, r"^(Timeout|APITimeoutError|TimeoutError)\b|timed out"),
        ("network", INFRASTRUCTURE, r"^(APIConnectionError|ConnectionError|ConnectionResetError|ClientConnectorError|"
                                    r"ServerDisconnectedError|RemoteProtocolError)\b|connection (reset|refused|error)"),
        ("local error", INFRASTRUCTURE, r"^LocalOSError\b"),  # this machine (file handles, memory, disk)
        ("malformed reply", INFRASTRUCTURE, r"^(MalformedResponse|JSONDecodeError|APIResponseValidationError)\b"),
        ("server error", INFRASTRUCTURE, r"^(InternalServerError|ServiceUnavailableError|BadGatewayError|APIError)\b|"
                                         + _CODE + r"5\d\d"),
        ("not found", INFRASTRUCTURE, r"^NotFoundError\b|" + _CODE + "404"),
        ("bad request", INFRASTRUCTURE, r"^(BadRequestError|UnsupportedParamsError|UnprocessableEntityError)\b"),
    ))
CAUSES: tuple[str, ...] = tuple(dict.fromkeys(c for c, _, _ in _RULES)) + ("client error",)


def classify_error(error: str | None) -> tuple[str, str] | None:
    """(cause, class) of a failed call's error text; None when the call did not fail.
    An error no rule knows is a ``client error`` of the infrastructure: a fault of
    ours or of a library is never the model's doing."""
    if not error:
        return None
    text = str(error)
    for cause, cls, pattern in _RULES:
        if pattern.search(text):
            return cause, cls
    return "client error", INFRASTRUCTURE


def is_missing_credentials(message: str) -> bool:
    """A provider SDK's "no key" error, whatever exception class litellm wraps it in
    (the openai SDK's comes back as a 500 InternalServerError): never worth a retry."""
    found = classify_error(message)
    return found is not None and found[0] == "auth"


def annotate_failure(world: dict[str, Any]) -> dict[str, Any]:
    """Put ``class`` and ``cause`` into a world record's ``failed`` (in place; also
    returned). Records written before failures were classed get them on load."""
    failed = world.get("failed")
    if failed and "class" not in failed:
        cause, cls = classify_error(failed.get("error")) or ("client error", INFRASTRUCTURE)
        failed["cause"], failed["class"] = cause, cls
    return world


def failure_class(world: dict[str, Any]) -> str | None:
    """``model``, ``infrastructure`` or None (the world's calls did not fail)."""
    if not world.get("failed"):
        return None
    return annotate_failure(dict(world, failed=dict(world["failed"])))["failed"]["class"]
