"""The local server's tuning (issue 17, part 4): the catalogue's settings reach the
server process and xllamacpp's parameters as written. Speeds live in
benchmarks/bench_local.py, never here."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from workbench.local import server as S
from workbench.local.catalogue import (
    SERVER_SETTINGS,
    LocalModel,
    LocalModelError,
    load_local_catalogue,
    server_settings,
)


def entry(**kw) -> LocalModel:
    return LocalModel(name="m", packages=["p==1"], size=1, sha256="0" * 64, **kw)


def test_prompt_threads_default_to_generation_threads():
    assert server_settings(entry(threads=3))["threads_batch"] == 3
    assert server_settings(entry(threads=1, threads_batch=2))["threads_batch"] == 2
    assert set(server_settings(entry())) == {*SERVER_SETTINGS, "runtime_path"}


def test_catalogue_entries_set_every_tuned_setting():
    for m in load_local_catalogue().values():
        s = server_settings(m)
        assert s["slots"] >= 4, "one slot per agent of a world, so no agent waits for another's turn"
        assert s["ctx"] >= 2048 and m.max_tokens <= 256
        assert all(isinstance(v, int) for k, v in s.items() if k not in ("speculative", "runtime", "runtime_path"))
        assert m.runtime == "auto", "the build compiled for this CPU where there is one (workbench.local.runtime)"
        assert s["speculative"] == "ngram-map-k", "n-gram drafts: the same replies in fewer passes (see the catalogue)"


def test_a_bad_setting_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "cat.yaml"
    bad.write_text("m: {packages: [p==1], size: 1, sha256: \"" + "0" * 64 + "\", threads_batch: 0}\n")
    with pytest.raises(LocalModelError, match="threads_batch"):
        load_local_catalogue(bad)


def test_the_server_process_gets_the_catalogue_settings(tmp_path, monkeypatch):
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    monkeypatch.setenv("WORKBENCH_RUNTIME_CACHE", str(tmp_path / "no-native-build"))
    seen: list[list[str]] = []

    class Exited:
        returncode = 3

        def __init__(self, argv, **kw):
            seen.append(argv)

        def poll(self):
            return 3

    monkeypatch.setattr(S.subprocess, "Popen", Exited)
    e = entry(threads=1, threads_batch=2, slots=6, ctx=1024, batch=256, ubatch=128, cache_ram_mib=64)
    with pytest.raises(S.ServerError, match="exited with 3"):
        S.LocalServer("m", tmp_path / "m.gguf", e).start(timeout_s=5)
    (argv,) = seen
    assert argv[1:4] == ["-m", "workbench.local.serve", str(tmp_path / "m.gguf")]
    assert json.loads(argv[-1]) == {"threads": 1, "threads_batch": 2, "slots": 6, "ctx": 1024, "batch": 256,
                                    "ubatch": 128, "cache_ram_mib": 64, "speculative": "none", "runtime": "wheel",
                                    "runtime_path": None}


def test_xllamacpp_parameters_follow_the_settings():
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    from workbench.local.serve import params

    s = server_settings(entry(threads=1, threads_batch=2, slots=3, ctx=1024, batch=256, ubatch=512,
                              cache_ram_mib=64))
    p = params("/nowhere/m.gguf", 4321, s)
    assert (p.n_parallel, p.n_ctx) == (3, 3 * 1024)  # each slot gets its ctx
    assert (p.cpuparams.n_threads, p.cpuparams_batch.n_threads) == (1, 2)
    assert (p.n_batch, p.n_ubatch) == (256, 256)  # the physical batch never exceeds the logical one
    assert p.cache_prompt and p.cache_ram_mib == 64
    assert (p.port, list(p.hostnames), p.model.path) == (4321, ["127.0.0.1"], "/nowhere/m.gguf")
    assert [t.name for t in p.speculative.types] == ["COMMON_SPECULATIVE_TYPE_NONE"]
    for name, member in (("ngram-map-k", "NGRAM_MAP_K"), ("ngram-simple", "NGRAM_SIMPLE")):
        q = params("/nowhere/m.gguf", 4321, server_settings(entry(speculative=name)))
        assert [t.name for t in q.speculative.types] == [f"COMMON_SPECULATIVE_TYPE_{member}"]


def test_an_unknown_speculative_setting_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "cat.yaml"
    bad.write_text("m: {packages: [p==1], size: 1, sha256: \"" + "0" * 64 + "\", speculative: eagle}\n")
    with pytest.raises(LocalModelError, match="speculative"):
        load_local_catalogue(bad)


def test_serve_entry_point_reads_the_settings_json(tmp_path):
    """The child's command line round-trips: what server.py writes is what serve.py reads."""
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    code = ("import json,sys; from workbench.local import serve; "
            "p = serve.params(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])); "
            "print(p.n_parallel, p.cpuparams.n_threads, p.cpuparams_batch.n_threads, p.n_ctx)")
    s = server_settings(entry(threads=2, slots=4, ctx=2048))
    out = subprocess.run([S.sys.executable, "-c", code, str(tmp_path / "x.gguf"), "1", json.dumps(s)],
                         capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.split() == ["4", "2", "2", str(4 * 2048)]


def test_auto_threads_are_the_idle_cpus_at_start(monkeypatch):
    from workbench.local import catalogue as C

    assert [C.idle_cpus(2, load) for load in (0.0, 0.4, 0.6, 1.4, 9.0)] == [2, 2, 1, 1, 1]
    assert C.idle_cpus(16, 3.2) == 13 and C.idle_cpus(4, -1.0) == 4  # never more than the CPUs
    monkeypatch.setattr(C, "idle_cpus", lambda: 7)
    assert server_settings(entry(threads="auto"))["threads"] == 7
    assert server_settings(entry(threads="auto")).get("threads_batch") == 7  # prompts follow threads
    assert server_settings(entry(threads=1, threads_batch="auto"))["threads_batch"] == 7
    with pytest.raises(ValueError, match="threads"):
        entry(threads="all")
    with pytest.raises(ValueError, match="threads"):
        entry(threads=0)


def test_busy_cpus_are_measured_now_not_over_the_last_minute(monkeypatch, tmp_path):
    """From the kernel's counters over a short window: a job that ended seconds ago (which
    the 1-minute load average still counts) leaves the CPUs idle and `auto` uses them."""
    import time

    from workbench.local import catalogue as C

    stat = tmp_path / "stat"
    before, after = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n", "cpu  200 0 100 900 0 0 0 0 0 0\ncpu0 1 2 3\n"
    stat.write_text(before)
    monkeypatch.setattr(time, "sleep", lambda _s: stat.write_text(after))
    monkeypatch.setattr(C.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(C.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # a busy last minute, ignored
    assert C.busy_cpus(stat=stat) == pytest.approx(1.0)  # 100 of 200 ticks busy, on 2 CPUs
    stat.write_text(before)
    monkeypatch.setattr(time, "sleep", lambda _s: stat.write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n"))
    assert C.busy_cpus(stat=stat) == pytest.approx(0.0)
    assert C.busy_cpus(stat=tmp_path / "missing") == 9.0  # no counters: the load average
