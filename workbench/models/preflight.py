"""Preflight: what a study's real-model routes need, checked before any paid call.

A route that cannot be reached for want of a key would otherwise fail world after
world (each failure an infrastructure failure, each a wasted minute). Checked per
route: that its credentials are present (litellm's own environment check names
the variables; a key in ``./.env`` counts, as the client reads it there; a
server of our own by ``api_base`` needs none unless the entry names one), and,
when the study has a budget, that the route has a price, since a call with no
price cannot be bounded."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from workbench.routes import is_simulated_route


def _entry(route: str) -> Any:
    from workbench.models.catalogue import default_catalogue

    catalogue = default_catalogue()
    if route in catalogue:
        return catalogue.get(route)
    return catalogue.for_route(route)


def route_problems(routes: Iterable[str], *, budget_usd: float | None = None) -> list[str]:
    """One line per problem, naming the route and what it needs; [] when all is ready."""
    from workbench.models.litellm_client import find_key, get_litellm

    problems: list[str] = []
    for route in sorted(set(routes)):
        if is_simulated_route(route) or route.startswith("local/"):
            continue
        entry = _entry(route)
        key, _ = find_key(entry)
        # a pool of servers (deployments) is served at api_bases of its own, each may name its key
        own_server = entry.api_base is not None or entry.api_base_env is not None or bool(entry.deployments)
        if entry.deployments and key is None and entry.auth != "none":
            from workbench.models.litellm_client.pool import deployment_key

            keyless = [d.name for d in entry.deployments if deployment_key(entry, d) is None]
            if keyless and len(keyless) < len(entry.deployments):
                problems.append(f"route {route} ({entry.route}): deployments {keyless} have no key: set their "
                                "api_key_env variables, or declare `auth: none` if those servers take none")
                continue
            key = "" if not keyless else None
        if key is None and (entry.api_key_env or not own_server):
            if entry.api_key_env:
                missing = [entry.api_key_env]
            else:
                missing = list(get_litellm().validate_environment(model=entry.route).get("missing_keys") or [])
            if missing:
                problems.append(f"route {route} ({entry.route}) needs {' or '.join(missing)}: set it in the "
                                "environment or in ./.env")
        elif key is None and own_server and entry.auth != "none":
            problems.append(f"route {route} ({entry.route}) is served at an api_base and has no key: set its key "
                            f"(api_key_env, or the provider's variable), or declare `auth: none` in the catalogue "
                            "entry if that server takes none (nothing is sent to it without one)")
        if budget_usd is not None:
            from workbench.models.litellm_client import LiteLLMClient

            client = LiteLLMClient(entry, seed=0)
            if client._prices() is None:
                problems.append(f"route {route} ({entry.route}) has no price (neither litellm's cost map nor the "
                                "catalogue's input/output_usd_per_mtok) and the study sets budget_usd: a call "
                                "could not be bounded")
    return problems
