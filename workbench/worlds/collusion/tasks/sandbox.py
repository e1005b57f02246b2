"""Running agent-written pytest files without letting them reach anything.

Agents write test files during code-analysis tasks, and those files are model
output: they run in a child process with a wall-clock limit that kills the
whole process group, a stripped environment (no API keys, no proxies, HOME and
TMPDIR inside the scratch directory) and no network. The network block has two
layers: a fresh user+network namespace (``unshare -rn``: only a loopback
interface that is down) where the machine allows it, and always a
``sitecustomize`` that makes the socket calls raise, so the block holds even
where namespaces are unavailable.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_BYTES = 1_000_000  # read back at most this much of what the child wrote
SANDBOX_DIR = ".sandbox"  # holds sitecustomize.py; first on the child's PYTHONPATH

SITECUSTOMIZE = '''"""Injected by the workbench sandbox: no network from agent-written tests."""
import socket as _socket


def _blocked(*_args, **_kwargs):
    raise OSError(101, "network access is disabled in the workbench sandbox")


_socket.socket.connect = _blocked
_socket.socket.connect_ex = _blocked
_socket.socket.sendto = _blocked
_socket.create_connection = _blocked
_socket.getaddrinfo = _blocked
_socket.gethostbyname = _blocked
_socket.gethostbyname_ex = _blocked
'''

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


@dataclass(frozen=True)
class SandboxResult:
    returncode: int
    output: str  # stdout and stderr together, as pytest wrote them
    timed_out: bool

    def counts(self) -> dict[str, int]:
        """passed/failed/errors/skipped from pytest's final summary line (zeros when absent)."""
        out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
        lines = [ln for ln in self.output.splitlines() if ln.strip()]
        for line in reversed(lines):
            found = _COUNT.findall(line)
            if found:
                for n, word in found:
                    key = "errors" if word.startswith("error") else word
                    if key in out:
                        out[key] = int(n)
                break
        return out


@functools.lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether ``unshare -rn`` (user + network namespace) works here; checked once."""
    try:
        done = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def stripped_env(workdir: Path, pythonpath: list[Path]) -> dict[str, str]:
    """The child's whole environment: nothing inherited but a plain PATH."""
    home, tmp = workdir / ".home", workdir / ".tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # faster start; agent tests need no plugins
        "LANG": "C.UTF-8",
    }


def install_sitecustomize(workdir: Path) -> Path:
    """Write the socket-blocking sitecustomize into the scratch directory; returns its folder."""
    folder = workdir / SANDBOX_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def run_pytest(test_path: Path | str, workdir: Path | str, timeout_s: float = 10, *,
               import_paths: list[Path] | None = None, rootdir: Path | None = None,
               use_namespace: bool | None = None) -> SandboxResult:
    """Run pytest on ``test_path`` in a child process confined as described above.

    ``workdir`` is the scratch directory (the child's cwd, HOME and TMPDIR live in
    it); ``import_paths`` go on PYTHONPATH after the sandbox folder (default: the
    workdir, where the task's module lies); ``rootdir`` is pytest's rootdir and
    conftest cut-off (default: the workdir). ``use_namespace=None`` uses ``unshare``
    when it works here; False forces the sitecustomize layer alone (for tests).
    """
    workdir = Path(workdir).resolve()
    test_path = Path(test_path)
    if not test_path.is_absolute():
        test_path = workdir / test_path
    if not test_path.exists():
        raise FileNotFoundError(f"no test file or folder at {test_path}")
    sandbox = install_sitecustomize(workdir)
    rootdir = Path(rootdir).resolve() if rootdir is not None else workdir
    env = stripped_env(workdir, [sandbox, *(import_paths if import_paths is not None else [workdir])])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "-rfE",
           "--color=no", "--rootdir", str(rootdir), "--confcutdir", str(rootdir), str(test_path)]
    if use_namespace is None:
        use_namespace = namespaces_available()
    if use_namespace:
        cmd = ["unshare", "-rn", *cmd]
    # Output goes to a file, not a pipe: a grandchild that escaped the group
    # cannot then keep the parent waiting for end-of-file.
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            timed_out = True
        sink.seek(0)
        out = sink.read(MAX_OUTPUT_BYTES)
    text = out.decode("utf-8", errors="replace")
    if timed_out:
        text += f"\n[sandbox] killed after {timeout_s:g} s (time limit)\n"
    return SandboxResult(returncode=proc.returncode, output=text, timed_out=timed_out)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # start_new_session made pid the group id
    except ProcessLookupError:
        pass
