"""One route, many servers: the deployments of a catalogue entry and how calls are spread over them.

An open-weight model is often served by several replicas (vLLM or llama.cpp servers on
the nodes of a GPU allocation). A catalogue entry may list them::

    qwen-pool:
      route: openai/Qwen/Qwen3-8B
      auth: none
      deployments:
        - {name: node1, api_base: http://node1:8000/v1, rpm: 600}
        - {name: node2, api_base_env: NODE2_API_BASE, rpm: 600}
      routing: {strategy: least-busy, allowed_fails: 1, cooldown_s: 10}

Calls then go through litellm's Router (:mod:`workbench.models.litellm_client.pool`):
it picks a deployment per attempt (``least-busy``: fewest calls in flight;
``usage-based-routing-v2``: lowest tokens/requests this minute, each deployment kept
under its own ``rpm``/``tpm``; ``simple-shuffle``: random, weighted by rpm), and a
deployment that fails more than ``allowed_fails`` times within ``cooldown_s`` is left
out for ``cooldown_s`` seconds, so the workbench's own retry of the call lands on
another. Each attempt records the deployment that took it, and a reply the deployment
that served it (``extra.deployment``), never a key.

This module is the catalogue's part (validation, no litellm): names, bases and limits
are checked here so that a bad entry is refused with the field that is wrong.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workbench.errors import InputError

STRATEGIES = ("least-busy", "usage-based-routing-v2", "simple-shuffle")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Deployment(BaseModel):
    """One server of a pool: where it is, the variable that holds its key, its own limits."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="recorded on every call it serves (letters, digits, _ . -)")
    api_base: str | None = Field(None, description="the server's OpenAI-compatible base URL")
    api_base_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$",
                                     description="environment variable that, when set, overrides api_base")
    api_key_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$",
                                    description="variable holding this server's key (default: the entry's)")
    rpm: int | None = Field(None, ge=1, description="this server's requests per minute (the Router's)")
    tpm: int | None = Field(None, ge=1, description="this server's tokens per minute (the Router's)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise InputError(f"expected a name of letters, digits, '_', '.', '-' (got {v!r})")
        return v

    @field_validator("api_base")
    @classmethod
    def _base(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^https?://[^/\s]+", v):
            raise InputError("expected an http(s) URL")
        if "@" in v.split("//", 1)[1].split("/", 1)[0]:
            raise InputError("a URL with credentials (user:password@host): name the key's variable with "
                             "api_key_env instead; keys never go into a catalogue")
        return v

    @model_validator(mode="after")
    def _somewhere(self) -> Deployment:
        if self.api_base is None and self.api_base_env is None:
            raise InputError(f"deployment {self.name!r}: expected api_base or api_base_env")
        return self

    def resolved_api_base(self, env: dict[str, str]) -> str | None:
        """The base in force: the variable's value in ``env`` when set there, else api_base."""
        found = env.get(self.api_base_env) if self.api_base_env else None
        return found or self.api_base


class Routing(BaseModel):
    """How a pool's calls are spread and how a failing server is left out (litellm Router settings)."""

    model_config = ConfigDict(extra="forbid")
    strategy: Literal["least-busy", "usage-based-routing-v2", "simple-shuffle"] = Field(
        "least-busy", description="the Router's routing_strategy")
    allowed_fails: int = Field(1, ge=0, le=1000, description="failures a server may have within cooldown_s before "
                                                             "it is cooled down (the Router's allowed_fails)")
    cooldown_s: float = Field(10.0, gt=0, le=3600, description="how long a failing server is left out "
                                                               "(the Router's cooldown_time)")


def check_pool(deployments: list[Deployment]) -> list[Deployment]:
    """At least one deployment, names unique (they are what a record names)."""
    if not deployments:
        raise InputError("expected at least one deployment (or leave deployments out)")
    seen: set[str] = set()
    for d in deployments:
        if d.name in seen:
            raise InputError(f"deployment name {d.name!r} is used twice; each server needs its own name")
        seen.add(d.name)
    return deployments
