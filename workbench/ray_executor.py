"""Running a study's worlds as Ray tasks across a cluster, with this process the only writer.

Why: a collusion study whose agents run sandboxed pytest in every episode, or a
rehearsal grid of millions of worlds, outgrows one machine. With ``--executor ray``
the worlds run as Ray tasks on whatever nodes the cluster has (a local Ray runtime
when no address is given); each task plays a *share* of the worlds on its own event
loop and streams every finished world back (a Ray streaming generator) already
encoded for the records. The driver (the process that ran ``workbench run``) is the
only writer, exactly as with forked world processes (:mod:`workbench.forked`), so the
records, the grouped syncs, resume and what a kill can lose are those of a
one-machine run. A worker holds no record file open and writes nothing.

Node death: a share whose task fails for a reason of the cluster (its node died, its
worker crashed, a result object was lost) is cut to the worlds it had not yet sent
back, and those are submitted again, up to ``attempts`` times; a world that did come
back is never run again, and the driver records a world id at most once per run
(a duplicate is dropped and counted). A share that fails because the *world* raised
(a bug, a bad input) is not retried: the run fails loudly, as a failing world process
does.

Budget and call ledger stay global: :class:`Coordinator` is one Ray actor, placed on
the driver's node, holding the study's :class:`~workbench.models.budget.Budget` and
its :class:`~workbench.models.ledger.CallLedger`; the proxies :class:`RemoteBudget`
and :class:`RemoteLedger` have the interfaces the model clients use, so a client on
any node asks the actor before each call (reserve), settles with it after, and its
ledger lines are written on the driver's disk. The rate limits of each route (requests
and tokens per minute) are the actor's windows too (:class:`RemoteLimits`); only the
connection limit stays per worker process.

Ray is an optional extra (``pip install 'stigmergy-workbench[ray]'``); nothing here
imports it until a run asks for this executor.
"""
from __future__ import annotations

import asyncio
import collections
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError, WorkbenchError
from workbench.models.budget import Budget, Reservation
from workbench.models.ledger import BoundLedger, CallLedger
from workbench.models.litellm_client.limits import ModelLimits, TokenSlot, set_limits_factory

EXECUTORS = ("local", "ray")  # local: forked world processes or this process (processes_for decides)
ATTEMPTS = 3  # times a world whose node died is submitted in all


class RayExecutorError(WorkbenchError, RuntimeError):
    """A share of worlds failed on the cluster (a world raised, or its node died more than
    ``attempts`` times): the study is not complete (exit status 1, as for infrastructure
    failures), and running the same command again runs what it did not finish."""

    exit_code = 1


def ray_module() -> Any:
    """Ray, imported; a clear error when the optional extra is not installed."""
    try:
        import ray
    except ImportError as exc:
        raise InputError("--executor ray: Ray is not installed; install the extra: "
                         "pip install 'stigmergy-workbench[ray]' (or pip install 'ray==2.60.0')") from exc
    return ray


def check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise InputError(f"executor: expected one of {', '.join(EXECUTORS)}, got {name!r}")
    return name


@dataclass
class Cluster:
    """The Ray runtime a run uses: its address, its nodes, and whether this run started it
    (then it is shut down when the run ends)."""

    address: str | None
    nodes: list[dict[str, Any]]
    started_here: bool
    driver_node: str

    @property
    def cpus(self) -> int:
        return max(1, int(sum(n.get("cpus") or 0 for n in self.nodes if n.get("alive"))))

    def facts(self) -> dict[str, Any]:
        """What the manifest's run entry records about the cluster."""
        return {"name": "ray", "address": self.address, "driver_node": self.driver_node,
                "nodes": self.nodes, "cpus": self.cpus}


def _nodes(ray: Any) -> list[dict[str, Any]]:
    return sorted(({"node_id": n["NodeID"], "host": n.get("NodeManagerHostname"), "ip": n.get("NodeManagerAddress"),
                    "cpus": (n.get("Resources") or {}).get("CPU", 0), "alive": bool(n.get("Alive"))}
                   for n in ray.nodes()), key=lambda n: (not n["alive"], n["node_id"]))


def connect(address: str | None, cpus: int | None = None) -> Cluster:
    """Join the Ray cluster at ``address`` (``auto``: the one this machine belongs to), or
    start a local Ray runtime with ``cpus`` CPUs when no address is given. A runtime this
    process already joined (a test's cluster, a notebook's) is used as it is."""
    ray = ray_module()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"log_to_driver": True, "include_dashboard": False,
                                  "configure_logging": False}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=cpus, **kwargs)
        started = True
    return Cluster(address=address or ("local" if started else "existing"), nodes=_nodes(ray),
                   started_here=started, driver_node=ray.get_runtime_context().get_node_id())


def disconnect(cluster: Cluster) -> None:
    if cluster.started_here:
        ray_module().shutdown()


def node_facts() -> dict[str, Any]:
    """Where the calling world runs: the Ray node id and host (a field comparisons ignore)."""
    try:
        import ray

        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except ImportError:  # pragma: no cover - only called in a Ray worker
        node = None
    return {"executor": "ray", "node_id": node, "host": socket.gethostname(), "pid": os.getpid()}


# -- the worker side ----------------------------------------------------------------------
_LOOP: asyncio.AbstractEventLoop | None = None


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def _play_share(play: Callable[[Any], Awaitable[bytes]], keys: Sequence[Any], concurrency: int) -> Any:
    """A Ray task (a streaming generator): play every key of the share on one event loop,
    ``concurrency`` at a time, and yield ``[(position, result), ...]`` as worlds finish (each
    batch: the worlds finished since the last one, so a fast share sends fewer objects).
    The loop is the worker process's own, kept between shares: model clients (their HTTP
    connections, their limits) belong to a loop and are reused by the next share."""
    loop = _worker_loop()
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
    items = iter(enumerate(keys))

    async def worker() -> None:
        for pos, key in items:
            try:
                result: Any = await play(key)
            except BaseException as exc:  # noqa: BLE001 - raised from the generator, so the driver sees it
                queue.put_nowait((pos, exc))
                return
            queue.put_nowait((pos, result))

    tasks = [loop.create_task(worker()) for _ in range(max(1, min(concurrency, len(keys))))]
    try:
        left = len(keys)
        while left:
            batch = [loop.run_until_complete(queue.get())]
            while not queue.empty():  # what else has finished meanwhile goes back in the same object
                batch.append(queue.get_nowait())
            for _, result in batch:
                if isinstance(result, BaseException):
                    raise result
            left -= len(batch)
            yield batch
    finally:
        for t in tasks:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        sys.stdout.flush()
        sys.stderr.flush()


# -- the driver side ----------------------------------------------------------------------
@dataclass
class RunFacts:
    """What a Ray run did, for the manifest: shares submitted, worlds submitted again after
    their node died, duplicates dropped, and the cluster errors that caused a resubmission."""

    shares: int = 0
    resubmitted: int = 0
    duplicates: int = 0
    not_started: int = 0
    node_failures: list[str] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        return {"shares": self.shares, "resubmitted_worlds": self.resubmitted, "duplicates_dropped": self.duplicates,
                "not_started": self.not_started, "node_failures": self.node_failures[:50]}


def shares_of(keys: Sequence[Any], cpus: int, per_share: int = 0) -> list[list[Any]]:
    """The shares a list of worlds is cut into: about four per CPU of the cluster (so a slow
    node or a dead one holds back little), at least ``per_share`` worlds each when given
    (1 means one world per task). Each share takes every Nth world, so each has every cell."""
    if not keys:
        return []
    n = max(1, min(len(keys), 4 * cpus))
    if per_share > 0:
        n = max(1, min(n, len(keys) // per_share)) if per_share > 1 else len(keys)
    return [list(keys[k::n]) for k in range(n)]


async def run_ray(keys: Sequence[Hashable], play: Callable[[Any], Awaitable[bytes]], *, cluster: Cluster,
                  concurrency: int, on_result: Callable[[Any, bytes], bool],
                  may_start: Callable[[], bool] | None = None, per_share: int = 0,
                  attempts: int = ATTEMPTS) -> RunFacts:
    """Play every key on the cluster; ``on_result(key, result)`` gets each finished world in
    this process, as it arrives, and returns False for a world already recorded (a duplicate,
    which is then counted and dropped). ``may_start()`` is asked before each share is submitted
    (the budget: a share not started is counted in ``not_started``). Raises
    :class:`RayExecutorError` when a world raised, or a share's node died more than
    ``attempts`` times; what came back before is recorded."""
    ray = ray_module()
    # SPREAD: shares go round the nodes (the default packs the driver's node first)
    remote = ray.remote(num_returns="streaming", max_retries=0, num_cpus=1,
                        scheduling_strategy="SPREAD")(_play_share)
    play_ref = ray.put(play)  # the study is sent to the object store once, not with every share
    facts = RunFacts()
    tries: dict[Any, int] = {}
    errors: list[str] = []
    pending: list[list[Any]] = shares_of(list(keys), cluster.cpus, per_share)
    running: set[asyncio.Future[None]] = set()

    async def follow(share: list[Any]) -> None:
        facts.shares += 1
        for k in share:
            tries[k] = tries.get(k, 0) + 1
        gen = remote.remote(play_ref, share, concurrency)
        back: set[int] = set()
        try:
            async for ref in gen:
                for pos, result in await ref:
                    back.add(pos)
                    if not on_result(share[pos], result):
                        facts.duplicates += 1
        except ray.exceptions.RayTaskError as exc:  # the world raised: a bug or bad input, not the cluster
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
            errors.append(f"a world raised {type(cause).__name__}: {cause}")
        except ray.exceptions.RayError as exc:  # the node died, the worker crashed, a result was lost
            left = [k for pos, k in enumerate(share) if pos not in back]
            facts.node_failures.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            again = [k for k in left if tries.get(k, 0) < attempts]
            if len(again) < len(left):
                errors.append(f"{len(left) - len(again)} worlds failed on the cluster {attempts} times "
                              f"({type(exc).__name__})")
            if again:
                facts.resubmitted += len(again)
                pending.append(again)
        except asyncio.CancelledError:  # interrupted: the share's task is not wanted any more
            ray.cancel(gen, force=True)
            raise

    try:
        while pending or running:
            while pending and len(running) < max(1, cluster.cpus):
                share = pending.pop(0)
                if may_start is not None and not may_start():
                    facts.not_started += len(share)
                    continue
                running.add(asyncio.ensure_future(follow(share)))
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            running.difference_update(done)
    finally:
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    if errors:
        raise RayExecutorError("; ".join(errors[:5]) + ": the worlds it did not finish are not recorded; "
                               "run the same command again to run them")
    return facts


# -- the budget and the call ledger, global -------------------------------------------------
class _CoordinatorState:
    """The study's budget and call ledger, in one Ray actor on the driver's node."""

    def __init__(self, limit_usd: float | None, carried: float, ledger_path: str | None) -> None:
        self.budget = None if limit_usd is None else Budget(limit_usd)
        if self.budget is not None:
            self.budget.carry(carried)  # what earlier invocations of the study spent
        self.ledger = CallLedger(ledger_path) if ledger_path else None
        self._starts: dict[tuple[str, str | None], collections.deque[float]] = {}
        self._tokens: dict[tuple[str, str | None], collections.deque[tuple[float, int, int]]] = {}
        self._used: dict[tuple[str, str | None], int] = {}
        self._next_slot = 0

    def reserve(self, amount: float) -> tuple[float, bool]:
        assert self.budget is not None
        r = self.budget.reserve(amount)
        return r.amount, r.granted

    def settle(self, amount: float, granted: bool, cost: float | None) -> None:
        assert self.budget is not None
        self.budget.settle(Reservation(amount, granted), cost)

    def carry(self, amount: float) -> None:
        assert self.budget is not None
        self.budget.carry(amount)

    def state(self) -> dict[str, Any]:
        assert self.budget is not None
        return {**self.budget.snapshot(), "remaining": self.budget.remaining, "exhausted": self.budget.exhausted}

    def write(self, entry: dict[str, Any]) -> None:
        assert self.ledger is not None
        self.ledger.write(entry)

    def open(self, entry: dict[str, Any]) -> None:
        assert self.ledger is not None
        self.ledger._write_open(entry)  # flushed to the OS on the driver's node before the call goes out
        self.ledger._fsync()

    def lines(self) -> int:
        return self.ledger.lines if self.ledger is not None else 0

    # rate limits: one sliding window per route + api_base for the whole cluster
    def rpm_slot(self, key: tuple[str, str | None], rpm: int, window_s: float = 60.0) -> float:
        """Take a request start under ``rpm`` now (0.0), or say how long to wait before asking again."""
        starts = self._starts.setdefault(key, collections.deque())
        now = time.monotonic()
        while starts and starts[0] <= now - window_s:
            starts.popleft()
        if len(starts) < rpm:
            starts.append(now)
            return 0.0
        return max(starts[0] + window_s - now, 0.001)

    def tpm_slot(self, key: tuple[str, str | None], tpm: int, tokens: int,
                 window_s: float = 60.0) -> tuple[float, int | None]:
        """Take ``tokens`` of the window now ((0.0, slot id)), or say how long to wait ((seconds, None))."""
        slots = self._tokens.setdefault(key, collections.deque())
        now = time.monotonic()
        while slots and slots[0][0] <= now - window_s:
            self._used[key] = self._used.get(key, 0) - slots.popleft()[2]
        used = self._used.get(key, 0)
        if not slots or used + tokens <= tpm:
            self._next_slot += 1
            slots.append((now, self._next_slot, tokens))
            self._used[key] = used + tokens
            return 0.0, self._next_slot
        excess, wait = used + tokens - tpm, slots[-1][0] + window_s - now
        for t, _, n in slots:
            excess -= n
            if excess <= 0:
                wait = t + window_s - now
                break
        return max(wait, 0.001), None

    def tpm_settle(self, key: tuple[str, str | None], slot: int, tokens: int) -> None:
        """The tokens the provider counted for a slot, in place of its estimate (while in the window)."""
        slots = self._tokens.get(key) or collections.deque()
        for k, (t, sid, n) in enumerate(slots):
            if sid == slot:
                slots[k] = (t, sid, tokens)
                self._used[key] = self._used.get(key, 0) + tokens - n
                return

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()


def coordinator(cluster: Cluster, budget: Budget | None, ledger_path: str | None) -> Any:
    """The one actor holding the run's budget and ledger, placed on the driver's node (its
    ledger file is the run directory's ``calls.jsonl``)."""
    ray = ray_module()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(num_cpus=0, max_restarts=0)(_CoordinatorState)
    return actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(cluster.driver_node, soft=False)
                         ).remote(None if budget is None else budget.limit_usd,
                                  0.0 if budget is None else budget.carried, ledger_path)


class RemoteBudget(Budget):
    """A :class:`Budget` whose every reservation, settlement and reading is the coordinator
    actor's: every client on every node draws on the one budget (each call asks first)."""

    def __init__(self, actor: Any, limit_usd: float) -> None:  # noqa: D107 - no lock, no state here
        self.actor = actor
        self.limit_usd = float(limit_usd)

    def _state(self) -> dict[str, Any]:
        return dict(ray_module().get(self.actor.state.remote()))

    @property
    def spent(self) -> float:
        return float(self._state()["spent_usd"])

    @property
    def reserved(self) -> float:
        return float(self._state()["reserved_usd"])

    @property
    def remaining(self) -> float:
        return float(self._state()["remaining"])

    @property
    def exhausted(self) -> bool:
        return bool(self._state()["exhausted"])

    def reserve(self, amount: float) -> Reservation:
        got, granted = ray_module().get(self.actor.reserve.remote(float(amount)))
        return Reservation(got, granted)

    def settle(self, reservation: Reservation, cost: float | None) -> None:
        ray_module().get(self.actor.settle.remote(reservation.amount, reservation.granted, cost))

    def carry(self, amount: float) -> None:
        ray_module().get(self.actor.carry.remote(float(amount)))

    def snapshot(self) -> dict[str, Any]:
        s = self._state()
        return {k: v for k, v in s.items() if k not in ("remaining",)}


class RemoteLedger(CallLedger):
    """A :class:`CallLedger` whose lines the coordinator actor writes (on the driver's node):
    the write-ahead ``open`` line is written and synced there before a request is sent."""

    def __init__(self, actor: Any) -> None:  # noqa: D107 - no file here
        self.actor = actor

    def bind(self, **tags: Any) -> BoundLedger:
        return BoundLedger(self, tags)

    def write(self, entry: dict[str, Any]) -> None:
        ray_module().get(self.actor.write.remote(entry))

    def open(self, entry: dict[str, Any]) -> None:
        ray_module().get(self.actor.open.remote(entry))

    def close(self) -> None:
        """The actor's file is closed by the driver when the run ends."""


class RemoteTokenSlot(TokenSlot):
    """A slot of the coordinator's tokens-per-minute window: settling it corrects the actor's count."""

    __slots__ = ("sid",)

    def __init__(self, limits: RemoteLimits, sid: int, tokens: int) -> None:
        super().__init__(limits, time.monotonic(), tokens)
        self.sid = sid

    def settle(self, tokens: int) -> None:
        assert isinstance(self.limits, RemoteLimits)
        ray_module().get(self.limits.actor.tpm_settle.remote(self.limits.key, self.sid, int(tokens)))
        self.tokens = tokens


class RemoteLimits(ModelLimits):
    """A route's limits whose requests-per-minute and tokens-per-minute windows are the coordinator
    actor's, shared by every worker of the cluster (the connection limit stays per worker process:
    connections are a process's own)."""

    def __init__(self, actor: Any, key: tuple[str, str | None], max_connections: int, rpm: int | None,
                 tpm: int | None) -> None:
        super().__init__(max_connections, rpm, tpm=tpm)
        self.actor = actor
        self.key = key

    async def rpm_slot(self, sleep: Callable[[float], Awaitable[Any]]) -> float:
        if not self.rpm:
            return 0.0
        waited = 0.0
        while True:
            wait = float(await self.actor.rpm_slot.remote(self.key, self.rpm, self.window_s))
            if wait <= 0:
                return waited
            await sleep(wait)
            waited += wait

    async def tpm_slot(self, tokens: int, sleep: Callable[[float], Awaitable[Any]]) -> tuple[float, TokenSlot | None]:
        if not self.tpm:
            return 0.0, None
        waited = 0.0
        while True:
            wait, sid = await self.actor.tpm_slot.remote(self.key, self.tpm, int(tokens), self.window_s)
            if sid is not None:
                return waited, RemoteTokenSlot(self, int(sid), int(tokens))
            await sleep(float(wait))
            waited += float(wait)


_INSTALLED: list[Any] = []  # the coordinator whose windows this worker process uses


def install_global_limits(actor: Any) -> None:
    """In a worker process: every route's rpm and tpm windows from now on are the coordinator's
    (once per coordinator: a later share of the same run keeps the limits already made)."""
    if _INSTALLED and _INSTALLED[0] == actor:
        return
    set_limits_factory(lambda key, conns, rpm, tpm: RemoteLimits(actor, key, conns, rpm, tpm))
    _INSTALLED[:] = [actor]
