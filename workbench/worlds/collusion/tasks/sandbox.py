"""Running agent-written pytest files without letting them reach anything.

Agents write test files during code-analysis tasks, and those files are model
output, so they run as untrusted code. The confinement is bubblewrap
(``bwrap``):

* the filesystem is an empty tmpfs root holding only read-only binds of what
  the interpreter needs (``/usr`` and the ``/lib*``/``/bin`` links, the venv,
  the base Python prefix), read-only binds of the task's own files and one
  writable scratch directory (the ``workdir``); the user's home, the project
  directory and every ``.env`` stay outside (a ``.env`` that happens to lie in a
  bound folder is masked with ``/dev/null``);
* ``--unshare-all``: new user, pid, network, ipc, uts and cgroup namespaces, so
  there is no network but a loopback that is down, and a fresh ``/proc`` in
  which pid 1 is the sandbox's own init; when that init exits the kernel kills
  everything left in the namespace, so no process can outlive a run;
* the environment is built from nothing (``--clearenv``), and bwrap itself is
  started with an empty environment too, because ``/proc/1/environ`` inside the
  sandbox is bwrap's own;
* limits: a wall-clock limit (the whole tree is killed), a memory cap
  (``RLIMIT_AS``, inherited by everything in the sandbox) and a process cap.
  ``RLIMIT_NPROC`` is useless here because it is counted per real uid and a
  root-mapped user namespace is exempt from it, so the process cap is a
  ``pids`` cgroup with ``pids.max`` where one is writable (kernel-enforced,
  counts threads too), else a watchdog that counts the sandbox's process tree
  every few milliseconds. Reaching the cap stops the run at once.

Where bwrap or user namespaces are missing, :func:`run_pytest` raises
:class:`SandboxUnavailable` rather than silently running unconfined. Only when
``WORKBENCH_UNSAFE_CODE_TASKS=1`` is set (the CLI's ``--unsafe-code-tasks``)
does it fall back to the old, weak confinement: stripped environment, ``unshare
-rn`` where possible, a socket-blocking ``sitecustomize``, and the same limits
(without a pid namespace, so a process that detaches itself can escape the
kill); such results say ``confinement="unconfined"``.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import SetupError

MAX_OUTPUT_BYTES = 1_000_000  # read back at most this much of what the child wrote
SANDBOX_DIR = ".sandbox"  # holds sitecustomize.py; first on the child's PYTHONPATH (unconfined mode)
UNSAFE_ENV = "WORKBENCH_UNSAFE_CODE_TASKS"  # "1": running unconfined was explicitly allowed
DEFAULT_MEMORY_BYTES = 1 << 30  # address-space cap per process of the sandbox
DEFAULT_MAX_PROCS = 128  # processes + threads in the whole sandbox (bwrap's own two included)
POLL_S = 0.02  # how often the limits are checked while the child runs
# pytest's flags: the workbench's (quiet, short tracebacks, a summary of failures and errors) and the
# source study's (SALT-NLP/agent-collusion runs ``pytest FILE -vv --no-header -p no:cacheprovider``)
WORKBENCH_PYTEST_FLAGS: tuple[str, ...] = ("-q", "-p", "no:cacheprovider", "--tb=short", "-rfE", "--color=no")
ORIGINAL_PYTEST_FLAGS: tuple[str, ...] = ("-vv", "--no-header", "-p", "no:cacheprovider")
INSTALL_HINT = ("install bubblewrap (`apt-get install bubblewrap`), or pass --unsafe-code-tasks "
                f"({UNSAFE_ENV}=1) to run agent-written tests unconfined")

TIME_LIMIT = "time limit"
MEMORY_CAP = "memory cap"
PROCESS_LIMIT = "process limit"
FILE_SIZE_LIMIT = "file size limit"
SPACE_LIMIT = "space limit"  # a capped filesystem of the sandbox (/dev/shm) full
SCRATCH_QUOTA = "scratch quota"
DEFAULT_SCRATCH_BYTES = 256 << 20  # all the files of the one writable folder together (checked while it runs)
DEFAULT_MAX_FILE_BYTES = 64 << 20  # the largest file a sandboxed process may write (RLIMIT_FSIZE)
SHM_BYTES = 16 << 20  # /dev/shm inside the sandbox: its own small tmpfs, not the host's (memory outside the cap)

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

# Applies the limits and execs the real command. A tiny launcher instead of
# Popen's preexec_fn, which can deadlock when the caller has threads (tool calls
# run in worker threads): it joins the pids cgroup (argv[1], "" for none) and
# sets RLIMIT_AS to argv[2] bytes and RLIMIT_FSIZE to argv[3] bytes, inherited by everything bwrap starts.
LAUNCHER = """\
import os, resource, sys
procs, memory, fsize, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
if procs:
    with open(procs, "w") as fh:
        fh.write(str(os.getpid()))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.execvp(argv[0], argv)
"""

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_MEMORY_ERROR = re.compile(r"\bMemoryError\b")
_FILE_TOO_LARGE = re.compile(r"File too large|\[Errno 27\]")
_NO_SPACE = re.compile(r"No space left on device|\[Errno 28\]")
_PROJECT_ROOT = Path(__file__).resolve().parents[4]  # the checkout that holds the workbench package
_cgroup_serial = itertools.count()


class SandboxUnavailable(SetupError):
    """bwrap or user namespaces are missing and unconfined running was not allowed."""


@dataclass(frozen=True)
class SandboxResult:
    returncode: int
    output: str  # stdout and stderr together, as pytest wrote them
    timed_out: bool  # kept for callers that predate ``stopped``; same as stopped == "time limit"
    stopped: str | None = None  # "time limit", "memory cap", "process limit"; None: pytest ended by itself
    confinement: str = "bwrap"  # "bwrap" or "unconfined"
    pytest_args: tuple[str, ...] = ()  # what followed ``python -m pytest`` (the flags and the test path)
    timeout_s: float = 0.0  # the wall-clock limit the run had

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


# ---------------------------------------------------------------- availability

def find_bwrap() -> str | None:
    """Where bwrap is (None when it is not installed); a function so tests can pretend it is missing."""
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None)


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str | None) -> tuple[bool, str]:
    """Run a trivial command under the same namespaces a real run uses; cached per bwrap path."""
    if bwrap is None:
        return False, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    cmd = [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "--proc", "/proc",
           "--dev", "/dev", "--", "/bin/true" if Path("/bin/true").exists() else "/usr/bin/true"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, env={})
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"{bwrap} could not run ({exc}): {INSTALL_HINT}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return False, (f"{bwrap} cannot create namespaces here ({why[0]}); user namespaces may be "
                       f"disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces): "
                       f"{INSTALL_HINT}")
    cap = "cgroup pids.max" if _pids_cgroup_base() is not None else "process-tree watchdog"
    return True, f"bwrap at {bwrap} (--unshare-all); process cap: {cap}; memory cap: RLIMIT_AS"


def sandbox_status() -> tuple[bool, str]:
    """(usable?, one line saying what is used or what is missing) for a preflight check; cached."""
    return _probe(find_bwrap())


def unsafe_allowed() -> bool:
    """Whether the operator explicitly allowed unconfined runs (``--unsafe-code-tasks``)."""
    return os.environ.get(UNSAFE_ENV, "").strip() == "1"


@functools.lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether ``unshare -rn`` (user + network namespace) works here; checked once (unconfined mode)."""
    try:
        done = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


# ---------------------------------------------------------------- environment and binds

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


def _system_binds() -> list[str]:
    """/usr read-only, and the top-level /lib*, /bin, /sbin as the same symlinks or binds as on the host."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    if Path("/etc/ld.so.cache").is_file():  # the dynamic loader's index; holds no secrets
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop paths that lie inside another one of the list (binding the outer one covers them)."""
    out: list[Path] = []
    for p in sorted(set(paths), key=lambda q: len(q.parts)):
        if not any(p == o or p.is_relative_to(o) for o in out):
            out.append(p)
    return out


@functools.lru_cache(maxsize=1)
def interpreter_roots() -> tuple[Path, ...]:
    """The folders the running interpreter needs (venv, base prefix, its real executable's folder).

    /usr is bound anyway, so roots inside it are dropped. A root that holds the
    project checkout or the home folder is refused rather than exposed: the
    sandbox must never see the project beyond the venv.
    """
    candidates = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    candidates.add(Path(sys.executable).resolve().parent)
    roots = [p for p in _outermost(list(candidates)) if not (p == Path("/usr") or p.is_relative_to("/usr"))]
    for root in roots:
        for guarded in (_PROJECT_ROOT, Path.home().resolve()):
            if guarded == root or guarded.is_relative_to(root):
                raise SandboxUnavailable(f"the interpreter lives in {root}, which holds {guarded}; binding it "
                                         f"would expose it to agent code. Use a virtual environment.")
    return tuple(roots)


def _dot_envs(folder: Path, limit: int = 200_000) -> list[Path]:
    """Every file named ``.env`` (or ``.env.*``) under ``folder``, so it can be masked."""
    found: list[Path] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        seen += len(filenames) + len(dirnames)
        found += [Path(dirpath) / f for f in filenames if f == ".env" or f.startswith(".env.")]
        if seen > limit:
            break
    return found


@functools.lru_cache(maxsize=1)
def _interpreter_dot_envs() -> tuple[Path, ...]:
    return tuple(p for root in interpreter_roots() for p in _dot_envs(root))


def bwrap_command(bwrap: str, inner: list[str], workdir: Path, readonly: list[Path],
                  env: dict[str, str]) -> list[str]:
    """The bwrap command line: empty root, read-only system/interpreter/task binds, one writable workdir.

    Mounts are applied shortest path first, so a deeper bind (the workdir inside
    a task folder, or a task folder inside the workdir) sits on top of the
    shallower one. The root is remounted read-only last, so even the folders
    bwrap creates as mount points cannot be written.
    """
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
           *_system_binds(), "--proc", "/proc", "--dev", "/dev",
           # /dev/shm: a small tmpfs of its own (bwrap's /dev would hold whatever is written there in
           # the host's memory, outside the memory cap)
           "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    # No writable /tmp: TMPDIR is inside the workdir. A tmpfs on /tmp would also make any
    # folder under /tmp that holds a bound path (a checkout in /tmp/x with its venv bound)
    # look writable inside, which is confusing even though nothing reaches the host.
    mounts: list[tuple[Path, str]] = [(p, "--ro-bind") for p in interpreter_roots()]
    task = [p for p in _outermost([q for q in readonly if q.exists()]) if p != workdir]
    mounts += [(p, "--ro-bind") for p in task]
    mounts.append((workdir, "--bind"))
    for path, how in sorted(mounts, key=lambda m: len(m[0].parts)):
        cmd += [how, str(path), str(path)]
    masked = set(_interpreter_dot_envs())
    for folder in [*task, workdir]:
        masked.update(_dot_envs(folder))
    for secret in sorted(masked):
        cmd += ["--ro-bind", "/dev/null", str(secret)]
    cmd += ["--remount-ro", "/"]  # the root tmpfs too: only the workdir takes writes
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--chdir", str(workdir), "--", *inner]
    return cmd


# ---------------------------------------------------------------- process cap

@functools.lru_cache(maxsize=1)
def _pids_cgroup_base() -> Path | None:
    """This process's own pids cgroup folder when we may create children in it (v1, or v2 with pids)."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in own:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            v1 = rel
        elif controllers == "":
            v2 = rel
    for line in mounts:
        left, _, right = line.partition(" - ")
        fstype, _, opts = (right.split(" ") + ["", "", ""])[:3]
        point = left.split(" ")[4]
        if v1 is not None and fstype == "cgroup" and "pids" in opts.split(","):
            base = Path(point) / v1.lstrip("/")
        elif v1 is None and v2 is not None and fstype == "cgroup2":
            base = Path(point) / v2.lstrip("/")
        else:
            continue
        if _try_cgroup(base):
            return base
    return None


def _try_cgroup(base: Path) -> bool:
    probe = base / f"workbench-sandbox-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / "pids.max").exists()
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


class _ProcessCap:
    """The sandbox's process cap: a pids cgroup where possible, else a watchdog over the process tree.

    The cgroup is kernel-enforced: a fork past ``pids.max`` fails, and
    ``pids.events`` counts the refusals, which is how a hit is noticed. The
    watchdog is a fallback: it counts the bwrap process's descendants (the pid
    namespace keeps orphans inside that tree) at each poll and reports a hit
    when there are more than the cap. It counts processes, not threads, and
    can overshoot by what forks between two polls, but the kill that follows
    takes the whole pid namespace down.
    """

    def __init__(self, max_procs: int) -> None:
        self.max_procs = max_procs
        self.cgroup: Path | None = None
        base = _pids_cgroup_base()
        if base is not None:
            path = base / f"workbench-sandbox-{os.getpid()}-{next(_cgroup_serial)}"
            try:
                path.mkdir()
                (path / "pids.max").write_text(str(max_procs))
                self.cgroup = path
            except OSError:
                self._remove(path)
        self.kind = "cgroup" if self.cgroup is not None else "watchdog"

    def procs_file(self) -> str:
        """The file a process writes its pid to to join the cgroup ("" without one)."""
        return str(self.cgroup / "cgroup.procs") if self.cgroup is not None else ""

    def hit(self, root_pid: int) -> bool:
        if self.cgroup is not None:
            try:
                events = (self.cgroup / "pids.events").read_text()
            except OSError:
                return False
            found = re.search(r"^max (\d+)", events, re.MULTILINE)
            return bool(found and int(found.group(1)) > 0)
        return len(_descendants(root_pid)) + 1 > self.max_procs

    def members(self) -> list[int]:
        if self.cgroup is None:
            return []
        try:
            return [int(x) for x in (self.cgroup / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def close(self) -> None:
        if self.cgroup is not None:
            deadline = time.monotonic() + 5
            while self.members() and time.monotonic() < deadline:
                _kill_all(self.members())
                time.sleep(0.01)
            self._remove(self.cgroup)

    @staticmethod
    def _remove(path: Path) -> None:
        for _ in range(100):
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def _descendants(root: int) -> list[int]:
    """Pids of all processes below ``root``, from a scan of /proc (the fallback watchdog's count)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_tree(proc: subprocess.Popen, cap: _ProcessCap) -> None:
    """SIGKILL the process group, everything below it and everything in the cgroup."""
    _kill_group(proc.pid)
    _kill_all(_descendants(proc.pid))
    _kill_all(cap.members())


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # start_new_session made pid the group id
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- running

def run_pytest(test_path: Path | str, workdir: Path | str, timeout_s: float = 10, *,
               import_paths: list[Path] | None = None, rootdir: Path | None = None,
               use_namespace: bool | None = None, memory_bytes: int = DEFAULT_MEMORY_BYTES,
               max_procs: int = DEFAULT_MAX_PROCS, flags: tuple[str, ...] = WORKBENCH_PYTEST_FLAGS,
               env: dict[str, str] | None = None, readonly: list[Path] | None = None) -> SandboxResult:
    """Run pytest on ``test_path`` in a child process confined as described in the module docstring.

    ``workdir`` is the scratch directory (the only writable place; the child's
    cwd, HOME and TMPDIR live in it); ``import_paths`` go on PYTHONPATH and are
    bound read-only (default: the workdir, where the task's module lies);
    ``rootdir`` is pytest's rootdir and conftest cut-off (default: the workdir).
    ``memory_bytes`` caps each process's address space; ``max_procs`` caps the
    processes and threads of the whole sandbox. ``use_namespace`` matters only
    in unconfined mode: None uses ``unshare -rn`` when it works, False forces the
    sitecustomize layer alone. ``flags`` are pytest's options (the workbench's or
    the source study's, ``ORIGINAL_PYTEST_FLAGS``); ``env`` adds variables to the
    child's clean environment (the source study's ``TARGET_CODE_PATH``; the
    sandbox's own keys cannot be replaced); ``readonly`` are further files or
    folders bound read-only (a target module that is not on PYTHONPATH). Raises
    :class:`SandboxUnavailable` when bwrap cannot be used and
    ``WORKBENCH_UNSAFE_CODE_TASKS=1`` is not set.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    test_path = Path(test_path)
    if not test_path.is_absolute():
        test_path = workdir / test_path
    if not test_path.exists():
        raise FileNotFoundError(f"no test file or folder at {test_path}")
    test_path = test_path.resolve()
    ok, why = sandbox_status()
    if not ok and not unsafe_allowed():
        raise SandboxUnavailable(f"cannot run agent-written tests confined: {why}")
    rootdir = Path(rootdir).resolve() if rootdir is not None else workdir
    imports = [Path(p).resolve() for p in (import_paths if import_paths is not None else [workdir])]
    pytest_args = ["-m", "pytest", *flags, "--rootdir", str(rootdir), "--confcutdir", str(rootdir), str(test_path)]
    extra = dict(env or {})
    extra_binds = [Path(p).resolve() for p in (readonly or [])]
    if ok:
        confinement = "bwrap"
        child_env = {**extra, **stripped_env(workdir, imports)}
        binds = [*imports, *extra_binds, rootdir, test_path if test_path.is_dir() else test_path.parent]
        bwrap = find_bwrap()
        assert bwrap is not None  # sandbox_status() was ok
        cmd = bwrap_command(bwrap, [sys.executable, *pytest_args], workdir, binds, child_env)
        popen_env: dict[str, str] = {}  # bwrap's own environ is /proc/1/environ inside
    else:
        confinement = "unconfined"
        sandbox = install_sitecustomize(workdir)
        child_env = {**extra, **stripped_env(workdir, [sandbox, *imports])}
        cmd = [sys.executable, *pytest_args]
        if use_namespace is None:
            use_namespace = namespaces_available()
        if use_namespace:
            cmd = ["unshare", "-rn", *cmd]
        popen_env = child_env
    result = _supervise(cmd, workdir, popen_env, timeout_s, memory_bytes, max_procs, confinement)
    return dataclasses.replace(result, pytest_args=tuple(pytest_args[2:]), timeout_s=float(timeout_s))


def _folder_bytes(folder: Path, limit: int) -> int:
    """The bytes of the files under ``folder``, counted until ``limit`` is passed (a quota check,
    cheap for the small folders tests write)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > limit:
                return total
    return total


def _supervise(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float, memory_bytes: int,
               max_procs: int, confinement: str) -> SandboxResult:
    """Start ``cmd`` under the limits, poll them, kill the whole tree when one is reached."""
    cap = _ProcessCap(max_procs)
    cmd = [sys.executable, "-I", "-S", "-c", LAUNCHER, cap.procs_file(), str(memory_bytes), str(DEFAULT_MAX_FILE_BYTES),
           *cmd]
    stopped: str | None = None
    try:
        # Output goes to a file, not a pipe: a grandchild that escaped the group
        # cannot then keep the parent waiting for end-of-file.
        with tempfile.TemporaryFile() as sink:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + timeout_s
            next_quota_check = 0.0
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if cap.hit(proc.pid):
                    stopped = PROCESS_LIMIT
                elif time.monotonic() >= deadline:
                    stopped = TIME_LIMIT
                elif time.monotonic() >= next_quota_check:  # a folder walk: a few times a second, not every poll
                    next_quota_check = time.monotonic() + 0.25
                    if _folder_bytes(cwd, DEFAULT_SCRATCH_BYTES) > DEFAULT_SCRATCH_BYTES:
                        stopped = SCRATCH_QUOTA
                if stopped:
                    _kill_tree(proc, cap)
                    proc.wait()
                    break
            if stopped is None and cap.cgroup is not None and cap.hit(proc.pid):
                stopped = PROCESS_LIMIT  # a fork was refused, even if pytest then ended by itself
            sink.seek(0)
            out = sink.read(MAX_OUTPUT_BYTES)
    finally:
        cap.close()
    text = out.decode("utf-8", errors="replace")
    if stopped is None and _MEMORY_ERROR.search(text):
        stopped = MEMORY_CAP  # RLIMIT_AS makes allocations fail, which Python reports as MemoryError
    elif stopped is None and (_FILE_TOO_LARGE.search(text) or proc.returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ)):
        stopped = FILE_SIZE_LIMIT  # RLIMIT_FSIZE: a write past it fails (EFBIG) or the writer gets SIGXFSZ
    elif stopped is None and _NO_SPACE.search(text):
        stopped = SPACE_LIMIT
    elif stopped is None and proc.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
        stopped = "killed by SIGKILL"  # not by us: most likely the kernel's out-of-memory killer
    said = {  # what the test's output says of a stop, one line after it
        TIME_LIMIT: f"killed after {timeout_s:g} s (time limit)",
        PROCESS_LIMIT: f"killed: more than {max_procs} processes/threads (process limit)",
        MEMORY_CAP: f"a test ran out of memory (memory cap {memory_bytes // (1 << 20)} MiB)",
        SCRATCH_QUOTA: f"killed: the scratch folder passed its quota ({DEFAULT_SCRATCH_BYTES // (1 << 20)} MiB)",
        SPACE_LIMIT: f"a test filled a capped filesystem (/dev/shm holds {SHM_BYTES // (1 << 20)} MiB)",
        FILE_SIZE_LIMIT: f"a test wrote a file past the size limit ({DEFAULT_MAX_FILE_BYTES // (1 << 20)} MiB)",
    }.get(stopped or "")
    if said:
        text += f"\n[sandbox] {said}\n"
    return SandboxResult(returncode=proc.returncode, output=text, timed_out=stopped == TIME_LIMIT,
                         stopped=stopped, confinement=confinement)
