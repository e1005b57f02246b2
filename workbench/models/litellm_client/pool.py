"""A catalogue entry with several deployments, served through litellm's Router.

What the Router does here, and what it does not (see :mod:`workbench.models.deployments`
for the catalogue side):

* **Picks a deployment per attempt** by the entry's ``routing.strategy`` and leaves out a
  deployment that failed more than ``allowed_fails`` times within ``cooldown_s`` (its
  ``allowed_fails`` / ``cooldown_time``), for ``cooldown_s`` seconds.
* **Never retries.** The Router is built with ``num_retries=0`` and no fallbacks, and each
  call passes ``num_retries=0, max_retries=0``: one ``router.acompletion`` is one HTTP
  request. The client's own loop (one retry layer, every attempt recorded) retries a failed
  call, and the Router then sends it to a deployment that is not cooling down. A call is
  reserved and charged once, whatever its attempts (:mod:`workbench.models.budget`): a
  failed attempt is not billed, the answered one is charged its cost.
* **Which deployment took an attempt** is read from the request litellm is about to send
  (the pre-call hook of :mod:`.sent` sees the deployment's ``model_info.id``), so a failed
  attempt names its deployment too; an answered one is checked against the reply's
  ``_hidden_params["model_id"]``. Deployment ids are ``wbpool-<entry hash>-<name>``; a record
  carries the name only, never a key (keys live in the Router's deployment list, in memory).

One Router per pool entry and event loop (its HTTP clients belong to the loop), shared by
every agent's client of the run, so cooldowns and in-flight counts are the pool's, not an
agent's. Building a Router registers its deployments in litellm's cost map, including the
route's own model name; the route's name is taken out again, or the lean path of a
single-server entry for the same model (:mod:`.lean`, which asks whether litellm knows the
model) would change with whether a pool was built first in the process.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
import weakref
from typing import Any

from workbench.models.catalogue import ModelEntry
from workbench.models.deployments import Deployment, Routing
from workbench.models.litellm_client.keys import find_key, read_dotenv
from workbench.models.litellm_client.loader import get_litellm

ID_PREFIX = "wbpool-"  # no colon: litellm's usage counters are keyed "<id>:<model>:rpm:<minute>"


def deployment_base(dep: Deployment) -> str | None:
    """A deployment's api_base in force: its variable (environment, then ./.env), else its api_base."""
    if dep.api_base_env:
        env = {dep.api_base_env: os.environ.get(dep.api_base_env) or read_dotenv().get(dep.api_base_env) or ""}
        return dep.resolved_api_base(env)
    return dep.api_base


def deployment_key(entry: ModelEntry, dep: Deployment) -> str | None:
    """The key sent to one deployment: its own variable, else the entry's, else a placeholder for
    ``auth: none`` (a server of your own), else None (litellm then reports the missing key)."""
    if dep.api_key_env:
        found = os.environ.get(dep.api_key_env) or read_dotenv().get(dep.api_key_env)
        if found:
            return found
    key, _ = find_key(entry)
    if key:
        return key
    return "EMPTY" if entry.auth == "none" else None


class Pool:
    """The Router of one pool entry for the running event loop, and the cooldowns it has seen."""

    def __init__(self, entry: ModelEntry) -> None:
        if not entry.deployments:
            raise ValueError(f"{entry.name or entry.route}: not a pool (no deployments)")
        self.entry = entry
        self.group = entry.name or entry.route
        self.routing: Routing = entry.routing or Routing()
        self.deployments: list[Deployment] = list(entry.deployments)
        tag = hashlib.sha256(self.group.encode()).hexdigest()[:10]  # the entry, in letters litellm's keys allow
        self._ids = {d.name: f"{ID_PREFIX}{tag}-{d.name}" for d in self.deployments}
        self._names = {i: name for name, i in self._ids.items()}
        self._routers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._seen_cooldowns: set[tuple[str, float]] = set()
        self.cooldowns: dict[str, int] = {d.name: 0 for d in self.deployments}

    # -- facts for the record -------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """What a reply records of the pool it went through (names and settings; no base, no key)."""
        return {"strategy": self.routing.strategy, "allowed_fails": self.routing.allowed_fails,
                "cooldown_s": self.routing.cooldown_s, "deployments": [d.name for d in self.deployments]}

    def name_of(self, deployment_id: Any) -> str | None:
        return self._names.get(str(deployment_id)) if deployment_id else None

    def secrets(self) -> tuple[str, ...]:
        """Every key this pool sends (redacted wherever they might surface)."""
        keys = {deployment_key(self.entry, d) for d in self.deployments}
        return tuple(sorted(k for k in keys if k and k != "EMPTY"))

    def limits(self) -> tuple[str, int | None, int | None]:
        """(limits key, rpm, tpm) of the workbench's own limiter for the whole pool: the sum of the
        deployments' limits where every deployment sets one, else the entry's."""
        rpms = [d.rpm for d in self.deployments]
        tpms = [d.tpm for d in self.deployments]
        rpm = sum(r for r in rpms if r) if all(rpms) else self.entry.rpm
        tpm = sum(t for t in tpms if t) if all(tpms) else self.entry.tpm
        return f"pool:{self.group}", rpm, tpm

    # -- the Router -----------------------------------------------------------------------
    def model_list(self) -> list[dict[str, Any]]:
        out = []
        for d in self.deployments:
            params: dict[str, Any] = {"model": self.entry.route, "api_base": deployment_base(d),
                                      "api_key": deployment_key(self.entry, d)}
            if d.rpm:
                params["rpm"] = d.rpm
            if d.tpm:
                params["tpm"] = d.tpm
            out.append({"model_name": self.group, "litellm_params": params,
                        "model_info": {"id": self._ids[d.name]}})
        return out

    def router(self) -> Any:
        """This event loop's Router (built on first use; the Routers of closed loops are retired)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            got = self._routers.get(loop)
            if got is not None:
                return got
            for old_loop, old in list(self._routers.items()):
                if old_loop.is_closed():
                    old.retire()
                    del self._routers[old_loop]
            litellm = get_litellm()
            cost_map = litellm.model_cost
            before = {k: cost_map[k] for k in _route_names(self.entry.route) if k in cost_map}
            router = litellm.Router(model_list=self.model_list(), routing_strategy=self.routing.strategy,
                                    num_retries=0, allowed_fails=self.routing.allowed_fails,
                                    cooldown_time=self.routing.cooldown_s, timeout=self.entry.timeout_s,
                                    set_verbose=False)
            for name in _route_names(self.entry.route):  # see the module docstring
                if name in before:
                    cost_map[name] = before[name]
                else:
                    cost_map.pop(name, None)
            self._routers[loop] = router
            return router

    def acompletion(self, **kwargs: Any) -> Any:
        """One attempt through the Router (a coroutine): no retries, no fallbacks."""
        kwargs.update(num_retries=0, max_retries=0)
        return self.router().acompletion(model=self.group, **kwargs)

    def new_cooldown(self, deployment_id: str | None) -> float | None:
        """The cooldown (seconds) a deployment entered since it was last asked about, if any: called
        after an attempt on it failed, so each cooldown is counted once, on the attempt that caused it."""
        name = self.name_of(deployment_id)
        if name is None:
            return None
        loop = asyncio.get_running_loop()
        router = self._routers.get(loop)
        if router is None:
            return None
        try:
            active = router.health().cooldowns.get_active_cooldowns([deployment_id], None)
        except Exception:  # noqa: BLE001 - a Router that cannot say: no cooldown recorded
            return None
        for _, value in active:
            stamp = float(_field(value, "timestamp") or 0.0)
            with self._lock:
                if (name, stamp) in self._seen_cooldowns:
                    continue
                self._seen_cooldowns.add((name, stamp))
                self.cooldowns[name] += 1
            return float(_field(value, "cooldown_time") or self.routing.cooldown_s)
        return None


    def next_free_s(self) -> float | None:
        """Seconds until the first cooling deployment is back (None: none is cooling down). The
        Router refuses an attempt while every deployment cools down; the retry waits this long
        rather than spending its attempts on refusals."""
        router = self._routers.get(asyncio.get_running_loop())
        if router is None:
            return None
        try:
            active = router.health().cooldowns.get_active_cooldowns(list(self._names), None)
        except Exception:  # noqa: BLE001 - a Router that cannot say: the usual backoff
            return None
        now = time.time()
        ends = [float(_field(v, "timestamp") or now) + float(_field(v, "cooldown_time") or self.routing.cooldown_s)
                for _, v in active]
        return round(max(0.0, min(ends) - now) + 0.01, 6) if ends else None


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _route_names(route: str) -> tuple[str, ...]:
    """The names litellm's cost map may hold a route's model under."""
    return (route, route.split("/", 1)[1]) if "/" in route else (route,)


_POOLS: dict[str, Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(entry: ModelEntry) -> Pool:
    """The process-wide pool of an entry (keyed by its settings, so a changed catalogue gets a new one)."""
    key = entry.model_dump_json(include={"name", "route", "deployments", "routing", "auth", "api_key_env",
                                         "timeout_s", "rpm", "tpm"})
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = Pool(entry)
        return pool


def reset_pools() -> None:
    """Forget every pool (tests): the next call builds fresh Routers with no cooldowns."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            for router in list(pool._routers.values()):
                router.retire()
        _POOLS.clear()
