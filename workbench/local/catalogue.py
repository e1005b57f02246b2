"""The catalogue of local models (params/local-models.yaml)."""
from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.inputs import InputFileError, first_error, read_yaml_mapping

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "params" / "local-models.yaml"


class LocalModelError(InputFileError):
    pass


class LocalModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    description: str = ""
    packages: list[str] = Field(min_length=1, description="name==version of each part, in joining order")
    size: int = Field(gt=0, description="bytes of the joined file")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    agent: bool = Field(True, description="strong enough to act as an agent (not only a smoke test)")
    threads: int = Field(2, ge=1, le=256, description="CPU threads that generate tokens")
    threads_batch: int | None = Field(None, ge=1, le=256, description="CPU threads that process prompts "
                                                                       "(none: as threads)")
    ctx: int = Field(4096, ge=256, le=131072, description="context per slot")
    slots: int = Field(4, ge=1, le=64, description="requests decoded in parallel (one per agent)")
    batch: int = Field(2048, ge=32, le=65536, description="prompt tokens per decode call (logical batch)")
    ubatch: int = Field(512, ge=32, le=65536, description="prompt tokens per compute pass (physical batch)")
    cache_ram_mib: int = Field(1024, ge=-1, description="memory for slot states kept across requests and "
                                                        "restored by prefix (0: off, -1: no limit)")
    max_tokens: int = Field(256, ge=1, description="output cap sent unless the cell's sampling sets one")


SERVER_SETTINGS = ("threads", "threads_batch", "ctx", "slots", "batch", "ubatch", "cache_ram_mib")


def server_settings(entry: LocalModel) -> dict[str, int]:
    """What the server of ``entry`` is started with (see :mod:`workbench.local.serve`)."""
    out = {k: getattr(entry, k) for k in SERVER_SETTINGS}
    if out["threads_batch"] is None:
        out["threads_batch"] = entry.threads
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
        raise KeyError(f"unknown local model {name!r}; catalogued in {catalogue_path()}: {sorted(cat)}")
    return cat[name]
