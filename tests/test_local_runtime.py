"""The llama.cpp build that serves local models (workbench.local.runtime): a build
compiled for one CPU is used on that CPU and that xllamacpp version only, the server
imports from the build its settings name or refuses to serve, and a build appears
whole or not at all. The compile itself (minutes) runs in `make bench`, not here."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from workbench.local import runtime as R
from workbench.local.catalogue import LocalModel, server_settings

ROOT = Path(__file__).resolve().parents[1]
ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n")


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "runtime"
    monkeypatch.setenv("WORKBENCH_RUNTIME_CACHE", str(folder))
    monkeypatch.setattr(R, "installed_version", lambda: "1.2.3")
    return folder


def fake_build(folder: Path, *, marker: bool = True) -> Path:
    (folder / R.PACKAGE).mkdir(parents=True)
    (folder / R.PACKAGE / "__init__.py").write_text("BUILD = 'fake native'\n")
    if marker:
        (folder / R.MARKER).write_text("{}")
    return folder


def test_the_cpu_key_follows_the_instruction_sets_not_their_order():
    same = ZEN4.replace("fpu sse avx2 avx512f avx512_vnni", "avx512_vnni avx2 fpu avx512f sse")
    assert R.cpu_key(ZEN4, "x86_64") == R.cpu_key(same, "x86_64")
    assert R.cpu_key(ZEN4, "x86_64") != R.cpu_key(ZEN4.replace(" avx512_vnni", ""), "x86_64")  # one flag less
    assert R.cpu_key(ZEN4, "x86_64") != R.cpu_key(ZEN4.replace("AuthenticAMD", "GenuineIntel"), "x86_64")
    assert R.cpu_key(ZEN4, "x86_64") != R.cpu_key(ZEN4, "aarch64")
    assert len(R.cpu_key()) == 16  # this machine's, read from /proc/cpuinfo


def test_auto_takes_the_build_made_for_this_cpu_and_version(root):
    assert R.choose("auto").kind == "wheel"  # nothing built
    with pytest.raises(R.RuntimeBuildError, match="workbench models build-runtime"):
        R.choose("native")
    fake_build(R.native_dir("1.2.3", "0" * 16))  # another CPU's build
    fake_build(R.native_dir("1.2.2"))  # this CPU, another release (another Python API)
    fake_build(R.native_dir("1.2.4"), marker=False)  # unfinished
    assert R.choose("auto").kind == "wheel"
    mine = fake_build(R.native_dir("1.2.3"))
    assert R.choose("auto") == R.Chosen("native", mine, f"built for this CPU ({R.cpu_key()})")
    assert R.choose("native").path == mine
    assert R.choose("wheel") == R.Chosen("wheel", None, "the catalogue asks for the wheel")


def test_server_settings_name_the_build_that_serves(root):
    entry = LocalModel(name="m", packages=["p==1"], size=1, sha256="0" * 64)
    assert (server_settings(entry)["runtime"], server_settings(entry)["runtime_path"]) == ("wheel", None)
    mine = fake_build(R.native_dir("1.2.3"))
    assert (server_settings(entry)["runtime"], server_settings(entry)["runtime_path"]) == ("native", str(mine))
    wheel = LocalModel(name="m", packages=["p==1"], size=1, sha256="0" * 64, runtime="wheel")
    assert server_settings(wheel)["runtime_path"] is None
    with pytest.raises(ValueError, match="runtime"):
        LocalModel(name="m", packages=["p==1"], size=1, sha256="0" * 64, runtime="fastest")


def _import_as_server(settings: dict) -> subprocess.CompletedProcess:
    code = ("import json, sys; from workbench.local.serve import use_runtime; "
            "print(use_runtime(json.loads(sys.argv[1]))); import xllamacpp; print(getattr(xllamacpp, 'BUILD', 'wheel'))")
    return subprocess.run([sys.executable, "-c", code, json.dumps(settings)], capture_output=True, text=True,
                          cwd=ROOT)


def test_the_server_imports_the_build_its_settings_name(tmp_path):
    mine = fake_build(tmp_path / "native")
    out = _import_as_server({"runtime": "native", "runtime_path": str(mine)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [str((mine / R.PACKAGE).resolve()), "fake native"]


def test_the_server_refuses_to_serve_from_another_build(tmp_path):
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    empty = tmp_path / "no-build-here"
    empty.mkdir()
    out = _import_as_server({"runtime": "native", "runtime_path": str(empty)})
    assert out.returncode != 0
    assert f"native llama.cpp build in {empty} was asked for" in out.stderr


def test_build_compiles_the_installed_release_natively_and_keeps_it_whole(root, monkeypatch):
    calls: list[tuple[list[str], dict]] = []
    real_run = subprocess.run

    def pip_wheel(cmd, env=None, **kw):
        if "-c" in cmd:  # the build proving itself in a fresh process: really run
            return real_run(cmd, env=env, **kw)
        calls.append((cmd, env))
        out = Path(cmd[cmd.index("--wheel-dir") + 1])
        out.mkdir(parents=True)
        with zipfile.ZipFile(out / "xllamacpp-1.2.3-cp310-abi3-linux_x86_64.whl", "w") as whl:
            whl.writestr("xllamacpp/__init__.py", "BUILD = 'compiled here'\n")
        return subprocess.CompletedProcess(cmd, 0, stdout="built\n")

    monkeypatch.setattr(R.subprocess, "run", pip_wheel)
    monkeypatch.setattr(R.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setenv("XLLAMACPP_RELEASE", "1")  # would turn GGML_NATIVE off
    folder = R.build(jobs=3)
    (cmd, env), = calls
    assert cmd[-1] == "xllamacpp==1.2.3" and cmd[cmd.index("--no-binary") + 1] == "xllamacpp"
    assert "-DLLAMA_LLGUIDANCE=OFF" in env["CMAKE_ARGS"] and env["NPROC"] == "3"
    assert "XLLAMACPP_RELEASE" not in env
    assert folder == R.native_dir("1.2.3") and R.choose("auto").path == folder
    assert json.loads((folder / R.MARKER).read_text())["cpu_key"] == R.cpu_key()
    assert R.build() == folder and len(calls) == 1  # built once
    assert R.prove(folder) == (True, "imports and starts")  # proven before it was kept


def test_a_failed_build_says_why_and_leaves_nothing(root, monkeypatch):
    monkeypatch.setattr(R.subprocess, "run", lambda cmd, env, **kw: subprocess.CompletedProcess(
        cmd, 1, stdout="-- Configuring\nCMake Error: no CMAKE_CXX_COMPILER could be found\n"))
    monkeypatch.setattr(R.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    with pytest.raises(R.RuntimeBuildError, match="exit 1.*CMAKE_CXX_COMPILER"):
        R.build()
    assert R.choose("auto").kind == "wheel"
    assert not R.native_dir("1.2.3").exists()


def test_the_command_line_builds_and_lists_the_runtime(root, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.setattr(R, "build", lambda **kw: (_ for _ in ()).throw(R.RuntimeBuildError("no compiler here")))
    assert main(["models", "build-runtime"]) == 2
    assert "error: no compiler here" in capsys.readouterr().err
    assert main(["models", "list"]) == 0
    assert "wheel build (no native build for this CPU" in capsys.readouterr().out
    fake_build(R.native_dir("1.2.3"))
    monkeypatch.setattr(R, "build", lambda **kw: R.native_dir("1.2.3"))
    assert main(["models", "build-runtime"]) == 0
    assert str(R.native_dir("1.2.3")) in capsys.readouterr().out
    assert main(["models", "list"]) == 0
    assert "native build (built for this CPU" in capsys.readouterr().out


def crashing_build(folder: Path) -> Path:
    """A build that imports and dies of a segmentation fault, as a miscompiled llama.cpp did at start."""
    fake_build(folder)
    (folder / R.PACKAGE / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    return folder


def test_a_build_that_crashes_on_start_does_not_prove_itself(root):
    ok, why = R.prove(crashing_build(R.native_dir("1.2.3")))
    assert not ok and "signal 11" in why
    assert R.prove(fake_build(root / "good"))[0]


def test_a_native_build_that_crashes_the_server_is_set_aside_and_the_wheel_serves(root, tmp_path, capsys):
    pytest.importorskip("xllamacpp", reason="the [local] extra is installed by `make test`")
    from workbench.local.server import LocalServer, ServerError

    crashing = crashing_build(R.native_dir("1.2.3"))
    assert R.choose("auto").kind == "native"
    model = tmp_path / "not-a-model.gguf"
    model.write_bytes(b"GGUF but not really")
    entry = LocalModel(packages=["x==1"], size=1, sha256="0" * 64, runtime="auto", threads=1)
    server = LocalServer("fake", model, entry)
    try:
        with pytest.raises(ServerError):  # the wheel then refuses the bogus weights: but no crash loop
            server.start(timeout_s=60)
    finally:
        server.stop()
    assert "was set aside" in capsys.readouterr().err
    assert not crashing.exists() and (crashing.with_name(crashing.name + ".set-aside") / R.SET_ASIDE).is_file()
    chosen = R.choose("auto")
    assert chosen.kind == "wheel" and "crashed on start (signal 11)" in chosen.why
    with pytest.raises(R.RuntimeBuildError, match="set aside: crashed on start"):
        R.choose("native")
