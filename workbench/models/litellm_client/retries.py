"""What a failed attempt means: retry or not (status, error class), and the server's Retry-After."""
from __future__ import annotations

import asyncio
import email.utils
import re
import time

from workbench.models.failures import is_missing_credentials


class MalformedResponse(Exception):
    """A 200 whose body has no usable message (retried like a malformed body)."""


RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
_RETRY_CLASSES = {"Timeout", "APITimeoutError", "TimeoutError", "APIConnectionError", "ServiceUnavailableError",
                  "InternalServerError", "RateLimitError", "JSONDecodeError", "APIResponseValidationError",
                  "MalformedResponse"}
_NO_RETRY_CLASSES = {"AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                     "ContextWindowExceededError", "ContentPolicyViolationError", "UnsupportedParamsError",
                     "UnprocessableEntityError", "BudgetExceededError"}


def _status_of(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        resp = getattr(exc, "response", None)
        code = getattr(resp, "status_code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


def _headers_of(exc: BaseException) -> dict[str, str]:
    for h in (getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None), "headers", None)):
        if h:
            try:
                return {str(k).lower(): str(v) for k, v in dict(h).items()}
            except (TypeError, ValueError):
                continue
    return {}


def parse_retry_after(headers: dict[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from Retry-After (delta-seconds or an HTTP date) or retry-after-ms; None if absent."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# what a JSON parser says of a body it cannot read: litellm wraps a 200 whose body is not JSON
# in an InternalServerError with a made-up status 500, which would read as the server's fault
MALFORMED_BODY = re.compile(r"Expecting (value|property name|',' delimiter|':' delimiter): line \d+|Unterminated string "
                            r"starting at|Extra data: line \d+|Invalid control character at|JSONDecodeError")


# this machine running out of something: litellm wraps it as a provider error with a made-up status
LOCAL_OS_ERROR = re.compile(r"Too many open files|\[Errno (23|24|12|28)\]|Cannot allocate memory|No space left on device")


def classify(exc: BaseException) -> tuple[str, int | None, bool]:
    """(error class, HTTP status, retryable) of an attempt's exception."""
    name = type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError):
        return "Timeout", None, True
    if name in ("InternalServerError", "APIError", "JSONDecodeError") and MALFORMED_BODY.search(str(exc)):
        return "MalformedResponse", 200, True  # a body that came back (2xx) and is not JSON: retried
    if getattr(exc, "errno", None) in (23, 24, 12, 28) or LOCAL_OS_ERROR.search(str(exc)):
        return "LocalOSError", None, True  # this machine's fault (no file handles, memory): no HTTP status
    status = _status_of(exc)
    if name in ("AuthenticationError", "PermissionDeniedError") or status in (401, 403) \
            or is_missing_credentials(str(exc)):
        return ("PermissionDeniedError" if status == 403 else "AuthenticationError"), status, False
    if name in _NO_RETRY_CLASSES and (status is None or status not in RETRY_STATUS):
        return name, status, False
    if status is not None:
        return name, status, status in RETRY_STATUS
    return name, status, name in _RETRY_CLASSES
