"""One local OpenAI-compatible server per model, on 127.0.0.1 and a free port,
in a child process (so stopping it is certain, also on error or Ctrl-C), with
prompt caching on. Started on first use by a study, stopped at its end."""
from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from workbench.errors import SetupError
from workbench.local.catalogue import LocalModel, server_settings

log = logging.getLogger(__name__)
_SERVERS: dict[str, LocalServer] = {}


class ServerError(SetupError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, name: str, path: Path, entry: LocalModel, log: Path | None = None) -> None:
        self.name, self.path, self.entry = name, path, entry
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.settings: dict[str, Any] = {}  # what the running server was started with (auto resolved)

    def start(self, timeout_s: float = 180.0) -> LocalServer:
        try:
            import xllamacpp  # noqa: F401
        except ImportError:
            raise ServerError("local models need the optional runtime: pip install 'stigmergy-workbench[local]' "
                              "(xllamacpp)") from None
        try:
            return self._start(timeout_s)
        except NativeCrashed as crash:  # set the build aside and serve with the wheel (auto only)
            from workbench.local.runtime import set_aside

            aside = set_aside(Path(crash.folder), crash.why)
            print(f"warning: the native llama.cpp build {crash.folder} {crash.why}; it was set aside ({aside}) and "
                  f"{self.name} is served with PyPI's wheel", file=sys.stderr)
            if self.entry.runtime == "native":
                raise ServerError(f"the local server for {self.name}: the native build {crash.why} and the catalogue "
                                  "asks for runtime: native (set runtime: auto or wheel)") from None
            return self._start(timeout_s)

    def _start(self, timeout_s: float) -> LocalServer:
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.settings = server_settings(self.entry)
        log.info("serving %s on 127.0.0.1:%d with %s", self.name, self.port, self.settings)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.local.serve", str(self.path), str(self.port),
             json.dumps(self.settings)],
            stdin=subprocess.PIPE, stdout=out, stderr=out, start_new_session=False)
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                if code < 0 and self.settings.get("runtime") == "native" and self.settings.get("runtime_path"):
                    raise NativeCrashed(self.settings["runtime_path"], f"crashed on start (signal {-code})")
                raise ServerError(f"the local server for {self.name} exited with {code}"
                                  + (f"; see {self.log}" if self.log else ""))
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise ServerError(f"the local server for {self.name} did not answer within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class NativeCrashed(Exception):
    """The server process died of a signal while serving from a native build."""

    def __init__(self, folder: str, why: str) -> None:
        super().__init__(why)
        self.folder, self.why = folder, why


def server_for(name: str) -> LocalServer:
    """The running server of a model, started if needed (the weights must be fetched)."""
    from workbench.local.catalogue import get_local
    from workbench.local.fetch import model_path

    srv = _SERVERS.get(name)
    if srv is not None and srv.proc is not None and srv.proc.poll() is None:
        return srv
    entry = get_local(name)
    path = model_path(name)
    if not path.exists():
        raise ServerError(f"local model {name} is not installed; run: workbench models fetch {name}")
    log = Path(os.environ.get("WORKBENCH_LOCAL_LOG", "")) if os.environ.get("WORKBENCH_LOCAL_LOG") else None
    srv = _SERVERS[name] = LocalServer(name, path, entry, log).start()
    return srv


def served() -> dict[str, dict[str, Any]]:
    """What each local server of this process was started with, for the run's manifest:
    its settings (auto resolved), the llama.cpp build that served and the CPU it ran on
    (a native build's floating-point sums differ from the wheel's in the last bits)."""
    from workbench.local.runtime import cpu_key, installed_version

    return {name: {**srv.settings, "xllamacpp": installed_version(), "cpu_key": cpu_key(), "gguf_sha256":
                   srv.entry.sha256} for name, srv in _SERVERS.items() if srv.settings}


def stop_all() -> None:
    for srv in list(_SERVERS.values()):
        srv.stop()
    _SERVERS.clear()


atexit.register(stop_all)
