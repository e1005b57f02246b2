"""From a route string in the params to a client for one agent.

Routes: ``scripted`` (fixed replies from
the params), ``replay`` (recorded replies), and real models through litellm:
a catalogue name from ``params/models.yaml`` (``gpt-5.4-mini``; the catalogue
says route, api_base, defaults, quirks, prices and limits) or a raw litellm
route with a known provider prefix (``openai/gpt-5.4``, ``anthropic/...``,
``gemini/...``, ``openrouter/...``, ``hosted_vllm/...``, ``ollama/...``; these
get the catalogue's ``defaults`` and provider defaults). An OpenAI-compatible
local server is reached through a catalogue entry with ``api_base`` (and
optionally ``api_base_env`` naming a variable that overrides it). Other
families plug in by prefix (:func:`register_route`) without any world knowing
of them; every world kind's simulated agents (``sim/PROFILE`` of the shared-store
world, ``sim-recall/...``) are such a family, registered by the kind. litellm itself is imported only when the first real call is made."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.errors import InputError
from workbench.models.base import ModelClient
from workbench.models.replay import ReplayClient
from workbench.models.scripted import ScriptedClient

RouteBuilder = Callable[..., ModelClient]
RouteCheck = Callable[..., None]
_EXTRA: dict[str, RouteBuilder] = {}
_CHECKS: dict[str, RouteCheck] = {}
_TAKES_PROFILES: set[str] = set()  # families whose builder and check take the study's own profiles
LITELLM_PREFIXES = ("openai", "anthropic", "gemini", "openrouter", "hosted_vllm", "ollama")


def register_route(prefix: str, builder: RouteBuilder, check: RouteCheck | None = None, *,
                   takes_profiles: bool = False) -> None:
    """Add a family of routes (``prefix/...``): optional back-ends, and the simulated
    agents of world kinds (``sim/PROFILE``, ``sim-KIND/PROFILE``), which
    live with their kind so that this module stays ignorant of experiments. ``check``
    raises ValueError or KeyError (naming what is known) for a route it cannot build.
    ``takes_profiles``: builder and check get ``profiles=`` (simulated profiles a study defines)."""
    _EXTRA[prefix] = builder
    if takes_profiles:
        _TAKES_PROFILES.add(prefix)
    if check is not None:
        _CHECKS[prefix] = check


from workbench.routes import is_simulated_route  # noqa: E402,F401  (the one answer; re-exported)


def _litellm_route(route: str, *, seed: int, **options: Any) -> ModelClient:
    from workbench.models.catalogue import default_catalogue
    from workbench.models.litellm_client import build_client

    if "/" not in route.strip("/") or not route.split("/", 1)[1].strip("/"):
        raise InputError(f"litellm route {route!r} names no model; expected provider/model")
    return build_client(default_catalogue().for_route(route), seed=seed, **options)


for _prefix in LITELLM_PREFIXES:
    register_route(_prefix, _litellm_route)


def _local_route(route: str, *, seed: int, **options: Any) -> ModelClient:
    """``local/NAME``: the study's own server for a fetched open-weight model,
    reached through the same litellm path (so records have the same shape)."""
    from workbench.local.catalogue import get_local
    from workbench.local.server import server_for
    from workbench.models.catalogue import ModelEntry
    from workbench.models.litellm_client import build_client

    name = route.split("/", 1)[1]
    local = get_local(name)
    server = server_for(name)
    entry = ModelEntry(name=route, route=f"openai/{name}", api_base=server.url, max_tokens=local.max_tokens,
                       input_usd_per_mtok=0.0, output_usd_per_mtok=0.0, max_connections=local.slots,
                       max_attempts=2, timeout_s=300, backoff_base_s=0.5, backoff_max_s=2,
                       description=f"{local.description}, served on 127.0.0.1", auth="none")
    return build_client(entry, seed=seed, **options)


register_route("local", _local_route)
_LITELLM_BUILT = {*LITELLM_PREFIXES, "local"}  # families built on the litellm client: they take prompt_cache


def _catalogue_names() -> list[str]:
    from workbench.models.catalogue import default_catalogue

    return default_catalogue().names()


def _is_catalogue_name(route: str) -> bool:
    if "/" in route or route in ("scripted", "replay"):
        return False
    from workbench.models.catalogue import default_catalogue

    return route in default_catalogue()


def _extra(prefix: str, profiles: dict[str, Any] | None) -> dict[str, Any]:
    return {"profiles": profiles} if prefix in _TAKES_PROFILES else {}


def check_route(route: str, profiles: dict[str, Any] | None = None) -> None:
    """Raise ValueError with what was expected when a route cannot be built."""
    if route in ("scripted", "replay"):
        return
    prefix, _, rest = route.partition("/")
    if prefix in _EXTRA:
        if not rest.strip("/"):
            raise InputError(f"model route {route!r} names no model; expected {prefix}/<model>")
        if prefix in _CHECKS:
            _CHECKS[prefix](route, **_extra(prefix, profiles))
        return
    if _is_catalogue_name(route):  # a broken catalogue raises its CatalogueError (file, field, what) here
        return
    from workbench.models.catalogue import catalogue_path

    names = _catalogue_names()
    raise InputError(f"unknown model route {route!r}; expected scripted, replay, "
                     f"a model of {catalogue_path()} ({', '.join(names) if names else 'none defined'})"
                     f" or a route {'/..., '.join(sorted(_EXTRA))}/...")


def check_request_path(route: str, path: str) -> None:
    """Raise InputError unless ``route`` can be reached over ``path``: a catalogue model that
    declares it, or an agent with no transport at all (simulated, scripted, replayed), whose
    behaviour a path cannot change (the cells then differ in nothing the agents act on)."""
    from workbench.models.catalogue import DIRECT, default_catalogue

    if path == DIRECT or is_simulated_route(route):
        return
    if not _is_catalogue_name(route):
        raise InputError(f"request_path {path!r}: {route!r} is not a catalogue model; only a catalogue entry can "
                         "declare paths (under paths:)")
    default_catalogue().get(route).via(path)


def make_client(route: str, *, seed: int, script: list[str] | None = None,
                recorded: list[dict[str, Any]] | None = None, latency_s: float | None = None,
                profiles: dict[str, Any] | None = None, request_path: str | None = None,
                prompt_cache: str | None = None, **options: Any) -> ModelClient:
    """``request_path``: the catalogue path a real model is reached over (absent: its own way);
    simulated, scripted and replayed agents have no transport, so it changes nothing for them.
    ``prompt_cache`` (auto or off): whether a real model's requests mark cache breakpoints, in
    place of its catalogue entry's setting (a study factor); agents without a provider have no
    prompt cache, so it changes nothing for them either."""
    if request_path is not None:
        check_request_path(route, request_path)
    if prompt_cache is not None:
        from workbench.models.litellm_client.prompt_cache import MODES

        if prompt_cache not in MODES:
            raise InputError(f"prompt_cache: expected one of {list(MODES)}, got {prompt_cache!r}")
    if route == "scripted":
        return ScriptedClient(script or [], latency_s=1.0 if latency_s is None else latency_s)
    if route == "replay":
        return ReplayClient(recorded or [])
    prefix = route.split("/", 1)[0]
    if prompt_cache is not None and (prefix in _LITELLM_BUILT or (prefix not in _EXTRA and _is_catalogue_name(route))):
        options["prompt_cache"] = prompt_cache
    if prefix in _EXTRA:
        return _EXTRA[prefix](route, seed=seed, **_extra(prefix, profiles), **options)
    if _is_catalogue_name(route):
        from workbench.models.catalogue import default_catalogue
        from workbench.models.litellm_client import build_client

        entry = default_catalogue().get(route)
        return build_client(entry.via(request_path) if request_path else entry, seed=seed, **options)
    check_route(route, profiles)
    raise AssertionError("unreachable")
