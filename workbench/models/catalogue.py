"""The catalogue of real-model routes (``params/models.yaml``), validated with pydantic.

A study refers to a model by its catalogue name (``model: gpt-5.4-mini``); the
entry says which litellm route reaches it, where (``api_base`` for a local or
self-hosted OpenAI-compatible server), with which default sampling settings,
which provider quirks to handle (a model that rejects temperature, the
reasoning efforts it accepts and what to send instead of one it rejects),
what it costs per million tokens (prompt tokens read from or written to the
provider's prompt cache at their own prices), whether requests mark cache
breakpoints (``prompt_cache``), and the limits to keep (connections, requests
and tokens per minute, attempts, timeout).

Which catalogue file: ``$WORKBENCH_MODELS`` when set, else ``params/models.yaml``
of this checkout. Keys are never part of a catalogue: an entry may only name
the environment variable holding one (``api_key_env``).

Any problem is one :class:`CatalogueError` naming the file, the field path and
what was expected (the style of :class:`workbench.params.ParamsError`).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from workbench.errors import InputError, UnknownNameError
from workbench.inputs import InputFileError, first_error, read_yaml_mapping
from workbench.models.deployments import Deployment, Routing, check_pool
from workbench.resources import shipped

# Providers whose route prefix a study may use directly (``openai/gpt-5.4``).
PROVIDERS: tuple[str, ...] = (
    "openai", "anthropic", "gemini", "openrouter", "hosted_vllm", "ollama", "ollama_chat",
    "vertex_ai", "bedrock", "azure", "deepseek", "mistral", "groq", "together_ai", "xai",
    "fireworks_ai", "lm_studio", "llamafile",
)
# The environment variable that holds each provider's key (when the entry names none).
KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "openrouter": ("OPENROUTER_API_KEY",),
    "hosted_vllm": ("HOSTED_VLLM_API_KEY",), "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",), "groq": ("GROQ_API_KEY",), "together_ai": ("TOGETHERAI_API_KEY",),
    "xai": ("XAI_API_KEY",), "fireworks_ai": ("FIREWORKS_AI_API_KEY",), "azure": ("AZURE_API_KEY",),
}
RESERVED_NAMES = ("scripted", "replay")
DEFAULT_PATH = shipped("params", "models.yaml")


class CatalogueError(InputFileError):
    """A bad model catalogue."""


class Limits(BaseModel):
    """Settings every entry inherits from the catalogue's ``defaults`` unless it sets its own."""

    model_config = ConfigDict(extra="forbid")
    max_connections: int = Field(8, ge=1, le=4096, description="calls in flight at once, per route+api_base, process-wide")
    rpm: int | None = Field(None, ge=1, description="requests (attempts) per minute, per route+api_base; none = no limit")
    tpm: int | None = Field(None, ge=1, description="tokens per minute, per route+api_base (each attempt's prompt and "
                                                    "output cap, estimated before sending, corrected from the usage "
                                                    "it reports); none = no limit")
    max_attempts: int = Field(4, ge=1, le=20, description="attempts per call, the first included (one retry layer: ours)")
    timeout_s: float = Field(120.0, gt=0, description="per attempt")
    backoff_base_s: float = Field(1.0, ge=0, description="first backoff; doubles each attempt, with seeded jitter")
    backoff_max_s: float = Field(60.0, ge=0)
    max_retry_after_s: float = Field(300.0, ge=0, description="a longer Retry-After ends the call instead of waiting")
    adapt_on_reject: bool = Field(True, description="on a 400 naming a parameter we sent: drop it (or use the "
                                                    "effort fallback), record it, and try again")
    transport: Literal["auto", "litellm"] = Field(
        "auto", description="auto: an openai/ route at an api_base whose model litellm passes through unchanged "
                            "goes out as one plain HTTP POST (same records, less CPU a call); litellm: always litellm")


class RequestPath(BaseModel):
    """Another way to the same model (a router, a second provider, a proxy): what differs
    from the entry's own way. A study's ``request_path`` factor picks one, so that two
    cells differ in transport alone (same model, settings and seeds)."""

    model_config = ConfigDict(extra="forbid")
    route: str | None = Field(None, description="litellm route on this path (e.g. openrouter/openai/gpt-5.4-mini)")
    api_base: str | None = None
    api_base_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    api_key_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    auth: Literal["key", "none"] | None = None
    transport: Literal["auto", "litellm"] | None = None


DIRECT = "direct"  # the entry's own way: no path applied


class ModelEntry(Limits):
    name: str = ""
    route: str = Field(description="litellm route: provider/model")
    description: str = ""
    api_base: str | None = Field(None, description="an OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...)")
    api_base_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$",
                                     description="environment variable that, when set, overrides api_base")
    api_key_env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$",
                                    description="environment variable holding the key (default: the provider's)")
    auth: Literal["key", "none"] = Field(
        "key", description="none: a server of your own that takes no key (a placeholder is sent); key: a key is "
                           "needed (preflight refuses without one), also for an api_base")
    reasoning_effort: str | None = Field(None, description="sent unless the cell's sampling sets one")
    efforts: list[str] | None = Field(None, description="efforts the model accepts (none: any; []: it takes none)")
    effort_fallback: str | None = Field(None, description="sent instead of an effort the model does not accept "
                                                          "(none: omit, i.e. the provider's default)")
    temperature: float | None = Field(None, ge=0, le=2, description="sent unless the cell's sampling sets one")
    supports_temperature: bool = Field(True, description="false: temperature is dropped and recorded as dropped")
    max_tokens: int | None = Field(None, ge=1, description="output cap sent unless the cell's sampling sets one")
    input_usd_per_mtok: float | None = Field(None, ge=0, description="used when litellm's cost map has no price")
    output_usd_per_mtok: float | None = Field(None, ge=0)
    cache_read_usd_per_mtok: float | None = Field(
        None, ge=0, description="a prompt token the provider read from its prompt cache (Anthropic: 0.1 x input); "
                                "none: litellm's cost map where it knows the model, else the input price")
    cache_write_usd_per_mtok: float | None = Field(
        None, ge=0, description="a prompt token written to the provider's prompt cache (Anthropic: 1.25 x input; "
                                "OpenAI and Gemini report none); none: litellm's cost map, else the input price")
    prompt_cache: Literal["auto", "off"] = Field(
        "auto", description="auto: mark the stable prefix of each request (system prompt, history up to the previous "
                            "step) as cache breakpoints where the provider needs them (Anthropic); providers that "
                            "cache on their own (OpenAI, Gemini) are sent nothing. off: no breakpoints (a provider "
                            "that caches on its own still may; what it reports is recorded either way)")
    paths: dict[str, RequestPath] = Field(default_factory=dict, description="other request paths to this model, "
                                          f"by name ({DIRECT!r} is the entry itself)")
    deployments: list[Deployment] | None = Field(
        None, description="several servers of this model (vLLM or llama.cpp replicas): calls are spread over them "
                          "by litellm's Router, and each records the one that served it (workbench.models.deployments)")
    routing: Routing | None = Field(None, description="with deployments: the Router's strategy, allowed_fails "
                                                      "and cooldown (defaults: least-busy, 1, 10 s)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # an entry without deployments dumps as it did before they existed: its design hash is unchanged
        out = handler(self)
        for name in ("deployments", "routing"):
            if isinstance(out, dict) and out.get(name) is None:
                out.pop(name, None)
        return out

    @field_validator("deployments")
    @classmethod
    def _deployments(cls, v: list[Deployment] | None) -> list[Deployment] | None:
        return None if v is None else check_pool(v)

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: dict[str, RequestPath]) -> dict[str, RequestPath]:
        if DIRECT in v:
            raise InputError(f"paths: {DIRECT!r} is the entry's own way; name other paths otherwise")
        return v

    def via(self, path: str) -> ModelEntry:
        """This entry reached over ``path``: the same model and settings, another transport."""
        if path == DIRECT:
            return self
        if path not in self.paths:
            raise InputError(f"request_path: model {self.name or self.route!r} declares no path {path!r}; "
                             f"expected {DIRECT!r} or one of its paths: {sorted(self.paths)}")
        changed = {k: v for k, v in self.paths[path].model_dump().items() if v is not None}
        return self.model_validate({**self.model_dump(), **changed, "name": f"{self.name or self.route}@{path}",
                                    "paths": {}})

    @field_validator("route")
    @classmethod
    def _route(cls, v: str) -> str:
        prefix, _, model = v.partition("/")
        if prefix not in PROVIDERS or not model.strip("/"):
            raise InputError(f"expected provider/model with a provider among {list(PROVIDERS)} (got {v!r})")
        return v

    @model_validator(mode="after")
    def _effort(self) -> ModelEntry:
        # A default effort outside `efforts` is allowed on purpose: it is the study's setting, and every
        # call records that it fell back (or was omitted) rather than hiding the quirk.
        if self.efforts is not None and self.effort_fallback is not None and self.effort_fallback not in self.efforts:
            raise InputError(f"effort_fallback {self.effort_fallback!r} is not among efforts {self.efforts}")
        if self.deployments is not None and (self.api_base is not None or self.api_base_env is not None):
            raise InputError("deployments: each deployment names its own api_base; leave the entry's api_base and "
                             "api_base_env out")
        if self.routing is not None and self.deployments is None:
            raise InputError("routing: only an entry with deployments is routed; add deployments or leave it out")
        if self.deployments is not None and self.routing is None:
            self.routing = Routing()  # the defaults, written out so a record's design names them
        return self

    @property
    def provider(self) -> str:
        return self.route.split("/", 1)[0]

    def defaults(self) -> dict[str, Any]:
        """Sampling parameters the entry sends unless a request sets them."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        return out

    def resolved_api_base(self, env: dict[str, str] | None = None) -> str | None:
        found = (os.environ if env is None else env).get(self.api_base_env) if self.api_base_env else None
        if found:
            return found
        return self.api_base

    def priced(self) -> bool:
        return self.input_usd_per_mtok is not None and self.output_usd_per_mtok is not None


class _CatalogueFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    defaults: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Catalogue:
    def __init__(self, path: Path, entries: dict[str, ModelEntry], defaults: Limits) -> None:
        self.path = path
        self.entries = entries
        self.defaults = defaults

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def get(self, name: str) -> ModelEntry:
        if name not in self.entries:
            raise UnknownNameError(f"no model {name!r} in {self.path}; known: {sorted(self.entries)}")
        return self.entries[name]

    def names(self) -> list[str]:
        return sorted(self.entries)

    def for_route(self, route: str, **overrides: Any) -> ModelEntry:
        """An entry for a raw litellm route: the catalogue's defaults and nothing model-specific."""
        return ModelEntry.model_validate({**self.defaults.model_dump(), "name": "", "route": route, **overrides})


def _fail(path: Path, prefix: str, exc: ValidationError) -> CatalogueError:
    loc, message = first_error(exc)
    where = ".".join(p for p in (prefix, loc) if p)
    return CatalogueError(path, where, message)


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    path = Path(path) if path is not None else catalogue_path()
    raw = read_yaml_mapping(path, CatalogueError, "a YAML model catalogue with 'models:'; set WORKBENCH_MODELS "
                            "to use another", empty_ok=True)
    try:
        top = _CatalogueFile.model_validate(raw)
    except ValidationError as exc:
        raise _fail(path, "", exc) from None
    try:
        defaults = Limits.model_validate(top.defaults)
    except ValidationError as exc:
        raise _fail(path, "defaults", exc) from None
    entries: dict[str, ModelEntry] = {}
    for name, body in top.models.items():
        where = f"models.{name}"
        if not isinstance(name, str) or "/" in name or name in RESERVED_NAMES \
                or name in PROVIDERS or not name[:1].isalnum():
            raise CatalogueError(path, where, "a model name must start with a letter or digit, contain no '/', and "
                                              f"not be one of {list(RESERVED_NAMES)} or a provider")
        if not isinstance(body, dict):
            raise CatalogueError(path, where, f"expected a mapping of settings, got {type(body).__name__}")
        if "name" in body:
            raise CatalogueError(path, f"{where}.name", "unknown field (the name is the entry's key)")
        for secret in ("api_key", "key", "token"):
            if secret in body:
                raise CatalogueError(path, f"{where}.{secret}", "keys never go into a catalogue; name the "
                                                                "environment variable with api_key_env")
        try:
            entries[name] = ModelEntry.model_validate({**defaults.model_dump(), **body, "name": name})
        except ValidationError as exc:
            raise _fail(path, where, exc) from None
    return Catalogue(path, entries, defaults)


def catalogue_path() -> Path:
    env = os.environ.get("WORKBENCH_MODELS")
    return Path(env) if env else DEFAULT_PATH


_CACHE: dict[tuple[str, float], Catalogue] = {}


def default_catalogue() -> Catalogue:
    """The catalogue in force (``$WORKBENCH_MODELS`` or params/models.yaml), re-read when the file changes."""
    path = catalogue_path()
    try:
        stamp = path.stat().st_mtime
    except OSError:
        stamp = -1.0
    key = (str(path), stamp)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load_catalogue(path)
    return _CACHE[key]


def is_raw_route(route: str) -> bool:
    prefix, _, model = route.partition("/")
    return prefix in PROVIDERS and bool(model.strip("/"))


def route_choices(simulated: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """Routes an explorer offers: the kind's simulated profiles, the given routes, the
    catalogue's models and the catalogued local models. Any other route can be typed,
    so a catalogue that fails to load costs the list its entries, not the explorer."""
    options = [r for r in (*simulated, *extra) if r]
    try:
        options += default_catalogue().names()
    except Exception:  # noqa: BLE001 - as above: typing a route still works
        pass
    try:
        from workbench.local.catalogue import load_local_catalogue

        options += [f"local/{name}" for name in load_local_catalogue()]
    except Exception:  # noqa: BLE001 - as above
        pass
    return list(dict.fromkeys(options))
