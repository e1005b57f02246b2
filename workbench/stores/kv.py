"""A key-value store with namespaces and a hidden authorship log.

Models never see authors; the log exists so that metrics can tell whose value a
read returned (the paper's cross-agent access is defined on it)."""
from __future__ import annotations

import builtins
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    namespace: str
    key: str
    value: Any
    author: str
    version: int
    seq: int  # the store's operation counter when this version was written

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


class KVStore:
    """Every version of every key is kept; ``current`` is the newest."""

    def __init__(self) -> None:
        self._current: dict[tuple[str, str], Entry] = {}
        self._log: list[Entry] = []
        self._seq = 0

    def write(self, namespace: str, key: str, value: Any, author: str) -> Entry:
        self._seq += 1
        prev = self._current.get((namespace, key))
        entry = Entry(namespace, key, value, author, (prev.version + 1) if prev else 1, self._seq)
        self._current[(namespace, key)] = entry
        self._log.append(entry)
        return entry

    def read(self, namespace: str, key: str) -> Entry | None:
        self._seq += 1
        return self._current.get((namespace, key))

    def list(self, namespace: str) -> list[Entry]:
        """Current entries of one namespace, in key order (deterministic)."""
        self._seq += 1
        return sorted((e for (ns, _), e in self._current.items() if ns == namespace), key=lambda e: e.key)

    def peek(self, namespace: str, key: str) -> Entry | None:
        """Look without counting as an operation (for the environment and metrics)."""
        return self._current.get((namespace, key))

    def wrote_before(self, namespace: str, key: str, author: str) -> bool:
        return any(e.author == author and e.namespace == namespace and e.key == key for e in self._log)

    @property
    def log(self) -> builtins.list[Entry]:
        return list(self._log)

    def snapshot(self) -> builtins.list[dict[str, Any]]:
        return [e.to_record() for e in sorted(self._current.values(), key=lambda e: (e.namespace, e.key))]
