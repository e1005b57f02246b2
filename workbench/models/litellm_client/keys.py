"""API keys: found in the environment or ./.env (python-dotenv), never recorded; redaction of every key-like value."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from workbench.models.catalogue import KEY_ENV, ModelEntry

_KEYLIKE_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_KEYLIKE_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk_[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|xai-[A-Za-z0-9]{16,}|"
    r"gsk_[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9._\-]{8,})")
REDACTED = "[REDACTED]"
_DOTENV: dict[str, tuple[float, dict[str, str]]] = {}


def read_dotenv(path: str | Path | None = None) -> dict[str, str]:
    """``KEY=VALUE`` lines of a .env file (python-dotenv's syntax: ``export``, quotes, comments); {} if none.
    Cached by modification time, since every call and every redaction asks."""
    p = Path(path) if path is not None else Path.cwd() / ".env"
    try:
        stamp = p.stat().st_mtime
    except OSError:
        return {}
    cached = _DOTENV.get(str(p))
    if cached and cached[0] == stamp:
        return cached[1]
    from dotenv import dotenv_values  # python-dotenv: the parser litellm itself uses

    try:
        parsed = dotenv_values(p, interpolate=False)
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    out = {k: v for k, v in parsed.items() if v is not None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)}
    _DOTENV[str(p)] = (stamp, out)
    return out


def secret_values(extra: tuple[str, ...] = ()) -> list[str]:
    """Values of key-like variables in the environment and .env (longest first)."""
    vals = set(v for v in extra if v and len(v) >= 6)
    for source in (os.environ, read_dotenv()):
        for name, value in source.items():
            if _KEYLIKE_NAME.search(name) and value and len(value) >= 6:
                vals.add(value)
    return sorted(vals, key=len, reverse=True)


def redact(text: Any, extra: tuple[str, ...] = ()) -> str:
    """``text`` with every known key value and anything shaped like a key replaced."""
    s = "" if text is None else str(text)
    for v in secret_values(extra):
        if v in s:
            s = s.replace(v, REDACTED)
    return _KEYLIKE_VALUE.sub(REDACTED, s)


def find_key(entry: ModelEntry) -> tuple[str | None, str]:
    """(key, where it came from) for an entry; the second is a variable name, never a value."""
    names = (entry.api_key_env,) if entry.api_key_env else KEY_ENV.get(entry.provider, ())
    dotenv = read_dotenv()
    for name in names:
        if os.environ.get(name):
            return os.environ[name], f"env:{name}"
    for name in names:
        if dotenv.get(name):
            return dotenv[name], f".env:{name}"
    return None, "none"


def _api_base(entry: ModelEntry) -> str | None:
    if entry.api_base_env:
        env_val = os.environ.get(entry.api_base_env) or read_dotenv().get(entry.api_base_env)
        if env_val:
            return env_val
    return entry.api_base


def strip_credentials(url: str) -> str:
    """A URL without the user and password it may carry (``https://user:pass@host``)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
