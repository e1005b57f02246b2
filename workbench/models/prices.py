"""What a call's tokens cost, cached prompt tokens at their own prices.

A provider that caches prompts bills the part of a prompt it read from its cache at a
fraction of the input price (Anthropic 0.1x, OpenAI 0.1-0.5x, Gemini 0.1-0.25x) and,
where writing the cache is explicit (Anthropic), the part it wrote at more than the input
price (1.25x for five minutes). Pricing every prompt token at the input price overstates
what a study whose prompts are cached costs, and understates a study that writes much
and reads little. The usage the workbench records splits the prompt accordingly
(``prompt_tokens`` is the whole prompt, as litellm normalises every provider;
``cached_tokens`` of it were read from the cache, ``cache_write_tokens`` written to it).

Prices per token: the catalogue's (``input_usd_per_mtok`` ..., ``cache_read_usd_per_mtok``,
``cache_write_usd_per_mtok``); a cache price the catalogue leaves out comes from litellm's
cost map where it knows the model, else is the input price (and says so in ``cache_source``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.models.catalogue import ModelEntry

CACHE_READ_MAP = "cache_read_input_token_cost"  # litellm's cost-map keys
CACHE_WRITE_MAP = "cache_creation_input_token_cost"


@dataclass(frozen=True)
class TokenPrices:
    """US dollars per token."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_source: str = "catalogue"

    def parts(self, usage: Mapping[str, Any]) -> dict[str, float]:
        """The cost of ``usage`` by kind of token: fresh input, cache reads, cache writes, output."""
        read = int(usage.get("cached_tokens") or 0)
        write = int(usage.get("cache_write_tokens") or 0)
        fresh = max(0, int(usage.get("prompt_tokens") or 0) - read - write)
        return {"input": fresh * self.input, "cache_read": read * self.cache_read,
                "cache_write": write * self.cache_write,
                "output": int(usage.get("completion_tokens") or 0) * self.output}

    def cost(self, usage: Mapping[str, Any]) -> float:
        return sum(self.parts(usage).values())

    @property
    def prompt_bound(self) -> float:
        """The most a prompt token can cost (a cache write may cost more than fresh input)."""
        return max(self.input, self.cache_write, self.cache_read)


def cost_map_entry(route: str, cost_map: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """litellm's cost-map entry for a route (by the route, then by its model name), if any."""
    if not cost_map:
        return None
    for name in (route, route.split("/", 1)[-1]):
        info = cost_map.get(name)
        if isinstance(info, Mapping):
            return info
    return None


def cache_prices(entry: ModelEntry, input_per_token: float,
                 cost_map: Mapping[str, Any] | None = None) -> tuple[float, float, str]:
    """(read, write) US dollars per cached prompt token for ``entry`` and where they came from."""
    info = cost_map_entry(entry.route, cost_map) or {}
    read, write, sources = input_per_token, input_per_token, []
    for i, (mine, theirs) in enumerate(((entry.cache_read_usd_per_mtok, CACHE_READ_MAP),
                                        (entry.cache_write_usd_per_mtok, CACHE_WRITE_MAP))):
        if mine is not None:
            value, src = mine / 1e6, "catalogue"
        elif info.get(theirs) is not None:
            value, src = float(info[theirs]), "litellm cost map"
        else:
            value, src = input_per_token, "input price (no cache price known)"
        if i == 0:
            read = value
        else:
            write = value
        sources.append(src)
    source = sources[0] if sources[0] == sources[1] else f"read: {sources[0]}; write: {sources[1]}"
    return read, write, source


def catalogue_prices(entry: ModelEntry, cost_map: Mapping[str, Any] | None = None) -> TokenPrices | None:
    """The entry's own prices per token (None if it has no input and output price)."""
    if not entry.priced():
        return None
    p_in, p_out = float(entry.input_usd_per_mtok) / 1e6, float(entry.output_usd_per_mtok) / 1e6  # type: ignore[arg-type]
    read, write, source = cache_prices(entry, p_in, cost_map)
    return TokenPrices(p_in, p_out, read, write, source)


def map_prices(entry: ModelEntry, cost_map: Mapping[str, Any] | None) -> TokenPrices | None:
    """Prices per token from litellm's cost map where it knows the model (cache prices from the
    catalogue first, as above), else None."""
    info = cost_map_entry(entry.route, cost_map)
    if not info or info.get("input_cost_per_token") is None or info.get("output_cost_per_token") is None:
        return None
    p_in = float(info["input_cost_per_token"])
    read, write, source = cache_prices(entry, p_in, cost_map)
    return TokenPrices(p_in, float(info["output_cost_per_token"]), read, write, source)
