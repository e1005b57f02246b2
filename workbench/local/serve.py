"""Child process: serve one GGUF file on 127.0.0.1 until stdin closes or a signal.

Run as ``python -m workbench.local.serve PATH PORT SETTINGS_JSON`` where the settings
are :func:`workbench.local.catalogue.server_settings` of a catalogue entry."""
from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from workbench.local.catalogue import SPECULATIVE_TYPES


def params(path: str, port: int, settings: dict[str, Any]) -> Any:
    """xllamacpp's CommonParams for one model: every setting the catalogue tunes, and prompt caching on."""
    import xllamacpp as x

    p = x.CommonParams()
    p.model.path = path
    p.n_parallel = settings["slots"]
    p.n_ctx = settings["ctx"] * settings["slots"]  # the context is shared out among the slots
    p.cpuparams.n_threads = settings["threads"]  # generation
    p.cpuparams_batch.n_threads = settings["threads_batch"]  # prompt processing
    p.n_batch = settings["batch"]
    p.n_ubatch = min(settings["batch"], settings["ubatch"])
    p.port = port
    p.hostnames = ["127.0.0.1"]
    p.cache_prompt = True  # a slot keeps its conversation: each step processes only the new suffix
    p.cache_ram_mib = settings["cache_ram_mib"]  # slot states kept in memory, restored by prefix (across worlds)
    spec = SPECULATIVE_TYPES[settings.get("speculative", "none")]
    p.speculative.types = [getattr(x.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{spec}")]
    return p


def use_runtime(settings: dict[str, Any]) -> str:
    """Import xllamacpp from the build the settings name (a native build's folder first on
    the import path), and refuse to serve from any other: a study must not silently run on
    another build than the one its server says it runs."""
    folder = settings.get("runtime_path")
    if folder:
        sys.path.insert(0, folder)
    import xllamacpp

    where = Path(xllamacpp.__file__).resolve()
    if folder and not where.is_relative_to(Path(folder).resolve()):
        raise SystemExit(f"the native llama.cpp build in {folder} was asked for, but xllamacpp came from {where}")
    return str(where.parent)


def main() -> None:
    path, port, settings = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    print(f"xllamacpp ({settings.get('runtime', 'wheel')}) from {use_runtime(settings)}", file=sys.stderr, flush=True)
    import xllamacpp as x

    server = x.Server(params(path, port, settings))  # noqa: F841 - serves while referenced
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def _on_stdin_closed() -> None:  # the parent went away
        sys.stdin.read()
        done.set()

    threading.Thread(target=_on_stdin_closed, daemon=True).start()
    done.wait()


if __name__ == "__main__":
    main()
