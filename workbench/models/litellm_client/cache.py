"""The reply cache (``cache_dir``): a successful reply stored as JSON under a SHA-256
of what decides it (route, api_base, messages, parameters sent), so that a re-run
costs nothing and keeps the recorded latency. Written atomically; an unreadable
entry is a miss, never an error."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from workbench.models.base import ModelReply


def cache_key(route: str, api_base: str | None, messages: list[dict[str, Any]], sent: dict[str, Any]) -> str:
    material = {"route": route, "api_base": (api_base or "").rstrip("/") or None, "messages": messages,
                "params": sent}
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class ReplyCache:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("reply"), dict) else None

    def put(self, key: str, reply: ModelReply) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"key": key, "reply": reply.to_record()}, ensure_ascii=False, default=str),
                       encoding="utf-8")
        os.replace(tmp, path)
