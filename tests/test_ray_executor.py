"""The Ray executor (issue 43, part 1): worlds run as Ray tasks on a two-node cluster on
127.0.0.1 that this module starts (``ray.cluster_utils.Cluster``, one CPU per node), and
come back to this process, the only writer.

- A simulated study and a collusion study with code tasks (pytest in bubblewrap on the
  workers) record what a single-process run of the same study records, world for world
  and step for step, timing, the invocation number and ``ran_on`` (the node) aside; the
  manifest's run entry names the executor and both nodes, and each world its node.
- The worker node is killed mid-study (after the first world it ran came back): the worlds
  it had not sent back run again on the head node, the run (resumed if it stopped) holds
  every world exactly once, and equals the single-process records.
- The budget, the call ledger and the rate-limit windows are the coordinator actor's: clients
  on either node reserve, settle, write their lines and take rpm/tpm slots through it, and a
  study on a real-model route (a fake server) charges and records every call once, as a
  single-process run does.
- A world that raises fails the run loudly and is not run again (a bug is not a dead node).

Skipped, with the reason, only where Ray (the optional extra ``ray``) is not installed.
"""
from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, study_dict
from tests.test_fast_records import _without_run
from workbench import ray_executor
from workbench.params import load_study
from workbench.records import WORLDS, load_run
from workbench.study import run_study

# every node and the driver on 127.0.0.1 (Ray reads this when imported: loopback addresses only)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: pip install -e '.[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402 - only once Ray is known to be there

pytestmark = pytest.mark.cluster

CELLS = [{"model": "sim/diligent"}, {"model": "sim/clause-follower", "clauses": "persist-only"},
         {"model": "sim/multi-object", "scheduler": "lockstep"}]


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory):
    """A fake OpenAI-compatible server and a catalogue entry for it (tests/fault_study.py):
    a real-model route, with prices, that costs nothing."""
    from tests.fake_openai import FakeOpenAIProcess
    from tests.fault_study import write_catalogue
    from tests.test_http_resume import scripted_agent

    srv = FakeOpenAIProcess(delay_s=0.01, responder=scripted_agent).start()
    yield srv, write_catalogue(tmp_path_factory.mktemp("catalogue"), srv.url, timeout_s=5.0)
    srv.stop()


@pytest.fixture(scope="module")
def cluster(fake_server):
    """A head and a worker node on 127.0.0.1, one CPU each; this process is the driver. The
    nodes start with the fake server's catalogue and key in their environment (as a cluster's
    workers are given their keys)."""
    from tests.fake_openai import FAKE_KEY

    saved = {k: os.environ.get(k) for k in ("WORKBENCH_MODELS", "OPENAI_API_KEY")}
    os.environ.update(WORKBENCH_MODELS=str(fake_server[1]), OPENAI_API_KEY=FAKE_KEY)
    # a dead node is noticed within about a second (the default health check takes ~15 s)
    fast = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 300, "health_check_failure_threshold": 3}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                       "_system_config": fast})
    worker = c.add_node(num_cpus=1)
    for k, v in saved.items():  # the nodes have it; this process and later tests do not
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    ray.init(address=c.address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    c.wait_for_nodes()
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    def warm() -> str:  # a worker process on each node, the package imported: shares start at once on both
        import workbench.study  # noqa: F401

        return str(ray.get_runtime_context().get_node_id())

    nodes = [c.head_node.node_id, worker.node_id]
    assert ray.get([warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
                    for n in nodes]) == nodes
    yield c, worker
    ray.shutdown()
    c.shutdown()


def _comparable(rec: dict) -> dict:
    return {k: v for k, v in _without_run(rec).items() if k != "ran_on"}


def _same_records(a: Path, b: Path) -> int:
    """The worlds and steps of two run directories, equal but for timing, run and node; returns worlds."""
    ra, rb = load_run(a), load_run(b)
    assert {w["world_id"]: _comparable(w) for w in ra.worlds} == {w["world_id"]: _comparable(w) for w in rb.worlds}
    for w in rb.worlds:
        assert [_comparable(s) for s in ra.steps[w["world_id"]]] == \
               [_comparable(s) for s in rb.steps[w["world_id"]]], w["world_id"]
    return len(rb.worlds)


def _world_lines(out: Path) -> collections.Counter[str]:
    return collections.Counter(json.loads(line)["world_id"] for line in (out / WORLDS).read_text().splitlines())


def _alive(c: Cluster) -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def test_simulated_study_on_two_nodes_records_what_one_process_records(cluster, write_study, tmp_path):
    c, worker = cluster
    study = load_study(write_study(study_dict(worlds_per_cell=8, concurrency=3, cells=CELLS)))
    on_ray = run_study(study, tmp_path / "ray", progress=False, executor="ray")
    one = run_study(study, tmp_path / "one", progress=False, processes=1)
    assert (on_ray.finished, on_ray.failed, on_ray.invalid) == (one.finished, one.failed, one.invalid)
    assert on_ray.finished == 24 and on_ray.invalid > 0  # the multi-object cell's invalid worlds came back too
    assert _same_records(tmp_path / "ray", tmp_path / "one") == 24
    entry = json.loads((tmp_path / "ray" / "manifest.json").read_text())["runs"][-1]
    ex = entry["executor"]
    assert ex["name"] == "ray" and {n["node_id"] for n in ex["nodes"]} == _alive(c) and len(ex["nodes"]) == 2
    assert ex["resubmitted_worlds"] == 0 and ex["duplicates_dropped"] == 0
    ran = {w["ran_on"]["node_id"] for w in load_run(tmp_path / "ray").worlds}
    assert ran and ran <= _alive(c)  # each world names the cluster node that ran it (short shares may all land on one)
    assert json.loads((tmp_path / "one" / "manifest.json").read_text())["runs"][-1]["executor"] == \
        {"name": "single-process"}
    assert all("ran_on" not in w for w in load_run(tmp_path / "one").worlds)


def _collusion_study(tmp_path: Path, worlds: int):  # noqa: ANN202
    """collusion-smoke's main cell, ``worlds`` worlds of two episodes (code tasks among them)."""
    spec = yaml.safe_load((ROOT / "params" / "collusion-smoke.yaml").read_text())
    spec.pop("contrasts")
    spec["cells"] = spec["cells"][:1]
    spec.update(worlds_per_cell=worlds)
    spec["defaults"].update(peer_cache=str(tmp_path / "peer-cache"), prompts=str(ROOT / "params/prompts/collusion"),
                            episodes=2)
    path = tmp_path / "collusion.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_study(path)


def test_collusion_study_with_code_tasks_on_two_nodes(cluster, tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: collusion code tasks run in it (make sandbox)")
    study = _collusion_study(tmp_path, 2)
    on_ray = run_study(study, tmp_path / "ray", progress=False, executor="ray")
    one = run_study(study, tmp_path / "one", progress=False, processes=1)
    assert on_ray.finished == one.finished == 2 and on_ray.failed == one.failed == 0
    assert _same_records(tmp_path / "ray", tmp_path / "one") == 2
    worlds = load_run(tmp_path / "ray").worlds
    assert any(e["family"] == "code-analysis" for w in worlds for e in w["sequence"])  # code tasks ran
    assert len({w["ran_on"]["node_id"] for w in worlds}) == 2  # one world a share, two at once: one on each node


def test_budget_and_ledger_are_the_coordinators_on_every_node(cluster, tmp_path):
    """A client on the worker node and one on the head draw on one budget held by the coordinator
    actor (the second reservation does not fit what the first holds), and both write their ledger
    lines, write-ahead line first, into the driver's run directory."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from workbench.models.budget import Budget
    from workbench.models.ledger import read_ledger

    c, worker = cluster
    here = ray_executor.connect(None)
    assert not here.started_here and len(here.nodes) == 2  # the running cluster is used as it is
    budget = Budget(1.0)
    budget.carry(0.1)  # spent by an earlier invocation
    actor = ray_executor.coordinator(here, budget, str(tmp_path / "calls.jsonl"))
    remote_budget, remote_ledger = ray_executor.RemoteBudget(actor, 1.0), ray_executor.RemoteLedger(actor)

    @ray.remote(num_cpus=1)
    def call(b, ledger, slot: str):  # noqa: ANN001, ANN202 - a model client's steps, on a node
        r = b.reserve(0.6)
        bound = ledger.bind(world_id="w-0000", slot=slot)
        bound.open({"call_id": slot, "request_id": f"{slot}-1", "reserved_usd": 0.6})
        bound.record({"call_id": slot, "state": "answered" if r.granted else "refused",
                      "cost_usd": None if r.granted else 0.0, "attempts": [{"request_id": f"{slot}-1"}]})
        return r.granted, ray.get_runtime_context().get_node_id()

    def on(node: str):  # noqa: ANN202
        return call.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))

    granted, node = ray.get(on(worker.node_id).remote(remote_budget, remote_ledger, "alice"))
    assert granted and node == worker.node_id
    granted, node = ray.get(on(c.head_node.node_id).remote(remote_budget, remote_ledger, "bob"))
    assert not granted and node == c.head_node.node_id  # 0.1 spent + 0.6 held + 0.6 > 1.0
    snap = remote_budget.snapshot()
    assert (snap["refused"], snap["reserved_usd"], snap["carried_usd"]) == (1, 0.6, 0.1) and remote_budget.exhausted
    ray.get(actor.close.remote())
    lines = list(read_ledger(tmp_path, opens=True))
    assert [(e.get("state"), e["slot"]) for e in lines] == [("open", "alice"), ("answered", "alice"),
                                                             ("open", "bob"), ("refused", "bob")]
    assert all(e["world_id"] == "w-0000" for e in lines)

    # rate limits: one requests-per-minute and one tokens-per-minute window for the cluster
    @ray.remote(num_cpus=1)
    def limited(actor, rpm_slots: int, tokens: int, settle_to: int | None):  # noqa: ANN001, ANN202
        import asyncio

        limits = ray_executor.RemoteLimits(actor, ("openai/m", "http://x"), 8, rpm=2, tpm=100)
        waits: list[float] = []

        async def sleep(s: float) -> None:  # the first wait asked for is the answer (no minute-long test)
            waits.append(s)
            raise TimeoutError

        async def go() -> tuple[list[float], bool]:
            for _ in range(rpm_slots):
                try:
                    await limits.rpm_slot(sleep)
                except TimeoutError:
                    pass
            try:
                _, slot = await limits.tpm_slot(tokens, sleep)
            except TimeoutError:
                return waits, False
            if settle_to is not None and slot is not None:
                slot.settle(settle_to)
            return waits, True
        return asyncio.run(go())

    def pinned(node: str):  # noqa: ANN202
        return limited.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))

    waits, got = ray.get(pinned(worker.node_id).remote(actor, 2, 80, None))
    assert waits == [] and got  # two requests and 80 tokens in this minute: within the limits
    waits, got = ray.get(pinned(c.head_node.node_id).remote(actor, 1, 30, None))
    assert len(waits) == 2 and 50 < waits[0] <= 60 and not got  # the third request and 30 more tokens wait
    ray.get(actor.tpm_settle.remote(("openai/m", "http://x"), 1, 50))  # the 80 were 50, as the provider counts
    assert ray.get(actor.tpm_slot.remote(("openai/m", "http://x"), 100, 30))[1] is not None
    ray.kill(actor)


def test_real_route_study_asks_the_one_budget_and_writes_the_one_ledger(cluster, fake_server, tmp_path,
                                                                        monkeypatch):
    """A study on a real-model route (a fake server) run on both nodes: every call reserved with
    the coordinator's budget and written to the driver's ledger, none charged twice: the budget
    and the ledger equal a single-process run's."""
    from tests.fake_openai import FAKE_KEY
    from tests.fault_study import write_study
    from workbench.models.ledger import read_ledger

    catalogue = fake_server[1]
    monkeypatch.setenv("WORKBENCH_MODELS", str(catalogue))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    path = write_study(tmp_path, 2, concurrency=2)
    path.write_text(path.read_text() + "budget_usd: 1.0\n")
    study = load_study(path)
    on_ray = run_study(study, tmp_path / "ray", progress=False, executor="ray")
    one = run_study(study, tmp_path / "one", progress=False, processes=1)
    assert on_ray.finished == one.finished == 2 and on_ray.failed == one.failed == 0
    assert on_ray.budget is not None and one.budget is not None
    sent_ray = on_ray.budget["calls"]
    assert sent_ray == one.budget["calls"] == len(list(read_ledger(tmp_path / "one"))) > 0  # each call charged once
    assert on_ray.budget["spent_usd"] == pytest.approx(one.budget["spent_usd"]) and on_ray.budget["spent_usd"] > 0
    closed = list(read_ledger(tmp_path / "ray"))
    opened = [e for e in read_ledger(tmp_path / "ray", opens=True) if e.get("state") == "open"]
    assert len(closed) == len(opened) == sent_ray  # every request written ahead, then closed, on the driver's disk
    assert {e["world_id"] for e in closed} == {w["world_id"] for w in load_run(tmp_path / "ray").worlds}
    entry = json.loads((tmp_path / "ray" / "manifest.json").read_text())["runs"][-1]
    assert entry["ledger_calls"] == sent_ray and entry["budget"]["calls"] == sent_ray
    assert entry["executor"]["shares"] == 2  # one world a share with a real route (the budget stops new ones)
    assert len({w["ran_on"]["node_id"] for w in load_run(tmp_path / "ray").worlds}) == 2


def test_a_world_that_raises_fails_the_run_loudly_and_is_not_run_again(cluster):
    """A share that fails because its world raised is a bug or a bad input, not the cluster: it is
    not resubmitted, the others' worlds are recorded, and the run raises naming the error."""
    here = ray_executor.connect(None)
    got: dict[int, bytes] = {}

    async def play(k: int) -> bytes:
        if k == 3:
            raise ValueError("bad world 3")
        return b"world %d" % k

    with pytest.raises(ray_executor.RayExecutorError, match="a world raised ValueError: bad world 3"):
        asyncio.run(ray_executor.run_ray(list(range(8)), play, cluster=here, concurrency=1,
                                         on_result=lambda k, r: got.setdefault(k, r) is r))
    assert got == {k: b"world %d" % k for k in range(8) if k != 3}


def test_worker_node_killed_mid_study_every_world_once(cluster, write_study, tmp_path, monkeypatch):
    """The worker node is killed as soon as the first world it ran comes back, while its share's
    other worlds are in flight (each is held 0.5 s there): those worlds run again on the head node
    and are recorded once; a resumed run adds nothing."""
    c, worker = cluster
    study = load_study(write_study(study_dict(worlds_per_cell=20, concurrency=1, cells=CELLS[:2])))
    expected = 40
    out = tmp_path / "ray"
    killed: dict[str, int] = {}
    real_run_ray = ray_executor.run_ray
    worker_id = worker.node_id

    async def run_ray_killing_the_worker(keys, play, *, on_result, **kw):  # noqa: ANN001, ANN003, ANN202
        async def held(key):  # noqa: ANN001, ANN202 - runs on the nodes (pickled with the play)
            if ray.get_runtime_context().get_node_id() == worker_id:
                await asyncio.sleep(0.5)  # the worker node's share is still playing when it is killed
            return await play(key)

        def result(key, msg):  # noqa: ANN001, ANN202
            fresh = on_result(key, msg)
            killed.setdefault("results", 0)
            killed["results"] += 1
            if "recorded" not in killed and worker.node_id.encode() in msg:  # ran_on names the worker node
                killed["recorded"] = killed["results"]
                c.remove_node(worker, allow_graceful=False)
            return fresh
        return await real_run_ray(keys, held, on_result=result, **kw)

    monkeypatch.setattr(ray_executor, "run_ray", run_ray_killing_the_worker)
    try:
        first = run_study(study, out, progress=False, executor="ray")
        stopped = None
    except ray_executor.RayExecutorError as exc:  # the node's worlds failed too often: the resume runs them
        first, stopped = None, exc
    monkeypatch.setattr(ray_executor, "run_ray", real_run_ray)
    assert "recorded" in killed and killed["recorded"] < expected, "the worker node was not killed mid-study"
    entry = json.loads((out / "manifest.json").read_text())["runs"][0]["executor"]
    assert entry["node_failures"], entry  # the share on the dead node failed ...
    if stopped is None:  # ... and its worlds ran again on the head node
        assert first is not None and first.finished == expected and entry["resubmitted_worlds"] >= 1, entry
    for _ in range(100):  # the cluster's own view of the node follows its health checks
        if worker.node_id not in _alive(c):
            break
        time.sleep(0.1)
    assert worker.node_id not in _alive(c)
    before = len(_world_lines(out))
    resumed = run_study(study, out, progress=False, executor="ray")
    assert resumed.finished == expected - before and (stopped is not None or resumed.finished == 0)
    lines = _world_lines(out)
    assert len(lines) == expected and set(lines.values()) == {1}  # every world, exactly once
    one = run_study(study, tmp_path / "one", progress=False, processes=1)
    assert one.finished == expected and _same_records(out, tmp_path / "one") == expected
    print(f"\nnode kill: {expected} worlds expected, {len(lines)} recorded, "
          f"{sum(n - 1 for n in lines.values())} duplicates, equal to single-process: yes; "
          f"killed after {killed['recorded']} worlds came back; resubmitted {entry['resubmitted_worlds']}; "
          f"node failures {entry['node_failures']}; {'stopped and resumed' if stopped else 'finished in one run'}")
