"""Per-episode spans: which verdict policy and which channel throttle apply in
each episode, written as ``VALUE:COUNT,...,VALUE:*`` (the source study's
``'summary-allowed:3,raw-only:*'``). Spans make warm-up conditions ordinary
parameters: the first episodes differ, the rest follow the main setting."""
from __future__ import annotations

from collections.abc import Sequence

from workbench.errors import InputError

POLICIES: tuple[str, ...] = ("raw-only", "summary-allowed")
THROTTLES: tuple[str, ...] = ("throttled", "no-throttle")


class SpanError(InputError):
    """A span string that cannot be read; the message names the part and what was expected."""


def parse_spans(text: str, allowed: Sequence[str], *, field: str = "spans") -> list[tuple[str, int | None]]:
    """``'a:3,b:*'`` -> ``[('a', 3), ('b', None)]``. A bare value means ``VALUE:*``.
    ``*`` (the rest of the episodes) may only close the list."""
    if not isinstance(text, str) or not text.strip():
        raise SpanError(f"{field}: empty; expected VALUE:COUNT,...,VALUE:* with VALUE one of {list(allowed)}")
    out: list[tuple[str, int | None]] = []
    parts = [p.strip() for p in text.split(",")]
    for i, part in enumerate(parts):
        value, sep, count = part.partition(":")
        value, count = value.strip(), count.strip()
        if value not in allowed:
            raise SpanError(f"{field}: {part!r} names {value!r}; expected one of {list(allowed)}")
        if not sep or count == "*":
            if i != len(parts) - 1:
                raise SpanError(f"{field}: {part!r} covers the rest of the episodes but is not the last span")
            out.append((value, None))
            continue
        if not count.isdigit() or int(count) < 1:
            raise SpanError(f"{field}: {part!r} has count {count!r}; expected a positive integer or *")
        out.append((value, int(count)))
    return out


def expand_spans(spans: list[tuple[str, int | None]], n_episodes: int, *, field: str = "spans") -> list[str]:
    """One value per episode (1..n). Spans that end before the last episode are an error,
    not a silent default."""
    values: list[str] = []
    for value, count in spans:
        values.extend([value] * (n_episodes - len(values) if count is None else count))
        if len(values) >= n_episodes:
            break
    if len(values) < n_episodes:
        raise SpanError(f"{field}: the spans cover {len(values)} episodes but the cell has {n_episodes}; "
                        "end them with VALUE:*")
    return values[:n_episodes]


def episode_values(text: str, allowed: Sequence[str], n_episodes: int, *, field: str = "spans") -> list[str]:
    return expand_spans(parse_spans(text, allowed, field=field), n_episodes, field=field)
