"""Which llama.cpp build serves local models: PyPI's xllamacpp wheel, or the same
release compiled for this machine's CPU (`workbench models build-runtime`).

Why a second build: PyPI's wheel is compiled for any x86-64 with AVX2 (its release
builds turn llama.cpp's GGML_NATIVE off), so a CPU with AVX-512 and VNNI runs the
quantised matrix products on half-width vectors. The same source release (the sdist of
the installed version), compiled with GGML_NATIVE, served the same recorded 0.5B
requests at temperature 0 with prompts read 34 % faster and tokens generated 8-11 %
faster on a 2-core AMD EPYC with AVX-512 (benchmarks/bench_local_replay.py; 26 % and
9 % on the 1.5B). Generation gains least: it is bound by memory traffic, not by vectors.

Why it lives outside the virtual environment, under a key of the CPU: a binary built
with ``-march=native`` dies of an illegal instruction on a CPU that lacks one of its
instruction sets, and a cache directory or a checkout can move to another machine. A
build is used only where the CPU's key and the installed xllamacpp version (hence its
Python API) are the ones it was built for; anywhere else the wheel serves.

The two builds give the same replies in distribution but not bit for bit (float sums
in another order), so each run's manifest names the build that served (its
``local_servers``, from :func:`workbench.local.server.served`)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from workbench.errors import SetupError

Runtime = Literal["auto", "wheel", "native"]
PACKAGE = "xllamacpp"
MARKER = "BUILT.json"
# llama.cpp options the offline build needs: llguidance is a Rust crate fetched at build
# time and BoringSSL a source download; the server listens on 127.0.0.1 only, without TLS.
CMAKE_ARGS = "-DLLAMA_LLGUIDANCE=OFF -DLLAMA_BUILD_BORINGSSL=OFF"


class RuntimeBuildError(SetupError):
    pass


def runtime_root() -> Path:
    return Path(os.environ.get("WORKBENCH_RUNTIME_CACHE")
                or Path.home() / ".cache" / "stigmergy-workbench" / "runtime")


def cpu_key(cpuinfo: str | None = None, machine: str | None = None) -> str:
    """A short digest of what a native build depends on: the architecture, the CPU's
    vendor and model, and every instruction-set flag the kernel reports."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in ("vendor_id", "model name", "cpu family", "model", "flags", "Features", "CPU part") \
                and key not in first:
            first[key] = " ".join(sorted(value.split())) if key in ("flags", "Features") else value.strip()
    text = json.dumps({"machine": machine or platform.machine(), **first}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def installed_version() -> str | None:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return None


def native_dir(version: str, key: str | None = None, root: Path | None = None) -> Path:
    return (root or runtime_root()) / f"{PACKAGE}-{version}-native-{key or cpu_key()}"


SET_ASIDE = "SET_ASIDE.json"  # in a build folder moved aside: why


def set_aside(folder: Path, why: str) -> Path:
    """Move a native build that crashed out of the way (``<folder>.set-aside``, with the reason):
    ``runtime: auto`` then serves with the wheel, and ``models list`` says why."""
    folder = Path(folder)
    target = folder.with_name(folder.name + ".set-aside")
    if target.exists():
        shutil.rmtree(target)
    os.replace(folder, target)
    (target / SET_ASIDE).write_text(json.dumps({"why": why, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                               indent=1) + "\n")
    return target


def set_aside_reason(version: str | None = None, root: Path | None = None) -> str | None:
    """Why this CPU's build of the installed version was set aside, or None."""
    version = version or installed_version()
    if version is None:
        return None
    folder = native_dir(version, root=root)
    marker = folder.with_name(folder.name + ".set-aside") / SET_ASIDE
    if not marker.is_file():
        return None
    try:
        return str(json.loads(marker.read_text()).get("why"))
    except ValueError:
        return "set aside"


def prove(folder: Path, timeout_s: float = 120.0) -> tuple[bool, str]:
    """Whether a native build imports and initialises in a fresh process (a build made with
    instructions this CPU lacks, or one that crashes in llama.cpp's start, dies here)."""
    code = (f"import sys; sys.path.insert(0, {str(folder)!r}); import {PACKAGE} as x; "
            f"assert x.__file__.startswith({str(folder)!r}), x.__file__; "
            "getattr(x, 'get_system_info', lambda: None)(); print('ok')")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"it did not start within {timeout_s:.0f} s"
    if res.returncode == 0 and res.stdout.strip().endswith("ok"):
        return True, "imports and starts"
    how = f"signal {-res.returncode}" if res.returncode < 0 else f"exit {res.returncode}"
    return False, f"it died on start ({how}): {(res.stderr.strip().splitlines() or [''])[-1][:300]}"


@dataclass(frozen=True)
class Chosen:
    """The build that serves: ``kind`` is "wheel" or "native"; ``path`` is put first on
    the server process's import path (None: the installed wheel)."""

    kind: Literal["wheel", "native"]
    path: Path | None
    why: str


def native_build(root: Path | None = None) -> Path | None:
    """The native build for this CPU and the installed version, if one was completed."""
    version = installed_version()
    if version is None:
        return None
    folder = native_dir(version, root=root)
    return folder if (folder / MARKER).is_file() and (folder / PACKAGE).is_dir() else None


def choose(preference: Runtime, root: Path | None = None) -> Chosen:
    """``auto``: the native build where one was made for this CPU and version, else the wheel.
    ``native`` insists (an error names the command that builds it); ``wheel`` never uses one."""
    if preference == "wheel":
        return Chosen("wheel", None, "the catalogue asks for the wheel")
    found = native_build(root)
    if found is not None:
        return Chosen("native", found, f"built for this CPU ({cpu_key()})")
    aside = set_aside_reason(root=root)
    if preference == "native":
        raise RuntimeBuildError(f"the catalogue asks for a native llama.cpp build and none usable was made for this CPU "
                                f"({cpu_key()}) and xllamacpp {installed_version()}"
                                + (f" (the one built was set aside: {aside})" if aside else "")
                                + "; run: workbench models build-runtime")
    if aside:
        return Chosen("wheel", None, f"the native build for this CPU was set aside ({aside}); the wheel serves")
    return Chosen("wheel", None, "no native build for this CPU; `workbench models build-runtime` makes one")


def build(*, root: Path | None = None, force: bool = False, jobs: int | None = None,
          pip_args: list[str] | None = None) -> Path:
    """Compile the installed xllamacpp release from its PyPI source for this CPU and keep
    it under :func:`native_dir` (about 6 minutes on 2 cores; nothing is done when it is
    there, unless ``force``). The folder appears whole or not at all."""
    version = installed_version()
    if version is None:
        raise RuntimeBuildError("xllamacpp is not installed: pip install 'stigmergy-workbench[local]'")
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise RuntimeBuildError(f"building llama.cpp needs {tool!r} on PATH (Debian: cmake, g++)")
    key = cpu_key()
    target = native_dir(version, key, root)
    if (target / MARKER).is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CMAKE_ARGS": f"{CMAKE_ARGS} {os.environ.get('CMAKE_ARGS', '')}".strip(),
           "NPROC": str(jobs or os.cpu_count() or 2)}
    env.pop("XLLAMACPP_RELEASE", None)  # the release switch turns GGML_NATIVE off
    started = time.time()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheels = Path(tmp) / "wheels"
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-binary", PACKAGE, "--wheel-dir",
               str(wheels), *(pip_args or []), f"{PACKAGE}=={version}"]
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if res.returncode != 0:
            tail = [ln for ln in res.stdout.splitlines() if "error" in ln.lower()][-5:] or res.stdout.splitlines()[-5:]
            raise RuntimeBuildError(f"compiling xllamacpp {version} failed (exit {res.returncode}): "
                                    + " | ".join(tail)[:800])
        built = sorted(wheels.glob(f"{PACKAGE}-{version}-*.whl"))
        if not built:
            raise RuntimeBuildError(f"pip built no {PACKAGE} {version} wheel in {wheels}")
        staging = Path(tmp) / "runtime"
        with zipfile.ZipFile(built[0]) as whl:
            whl.extractall(staging)
        if not (staging / PACKAGE).is_dir():
            raise RuntimeBuildError(f"{built[0].name} holds no {PACKAGE} package")
        ok, why = prove(staging)  # a build proves itself before it is ever chosen
        if not ok:
            raise RuntimeBuildError(f"xllamacpp {version} was compiled for this CPU, but {why}; it is not kept, and "
                                    "runtime: auto serves with PyPI's wheel")
        (staging / MARKER).write_text(json.dumps({
            "package": PACKAGE, "version": version, "cpu_key": key, "machine": platform.machine(),
            "cmake_args": env["CMAKE_ARGS"], "ggml_native": True, "wheel": built[0].name,
            "build_s": round(time.time() - started, 1)}, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    return target
