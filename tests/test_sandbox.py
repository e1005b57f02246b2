"""The pytest sandbox for agent-written tests: bubblewrap confinement (files,
/proc, network, environment), the time limit, memory cap and process cap,
refusing to run unconfined unless allowed, and counts read from pytest's own
summary. Each confinement test plants something the agent code must not reach
and checks from the host afterwards that it was not reached."""
from __future__ import annotations

import os
import socket
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from workbench.worlds.collusion.tasks import sandbox as sb
from workbench.worlds.collusion.tasks.sandbox import SandboxUnavailable, namespaces_available, run_pytest, sandbox_status

BWRAP_OK, BWRAP_WHY = sandbox_status()
needs_bwrap = pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap sandbox unusable here: {BWRAP_WHY}")
PROJECT = Path(sb.__file__).resolve().parents[4]

MODES = [pytest.param("bwrap", id="bwrap", marks=needs_bwrap),
         pytest.param("sitecustomize", id="unconfined-sitecustomize-only"),
         pytest.param("namespace", id="unconfined-namespace",
                      marks=pytest.mark.skipif(not namespaces_available(), reason="unshare -rn not usable here"))]


def write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


@pytest.fixture
def unconfined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend bwrap is missing and unconfined running was allowed (--unsafe-code-tasks)."""
    monkeypatch.setattr(sb, "find_bwrap", lambda: None)
    monkeypatch.setenv(sb.UNSAFE_ENV, "1")


def host_processes_mentioning(marker: str) -> list[int]:
    """Live host processes whose command line contains ``marker`` (zombies count as dead)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(") ", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, within_s: float = 3) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := host_processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# ---------------------------------------------------------------- counts and basics

def test_counts_for_passing_and_failing_tests(tmp_path: Path) -> None:
    test = write(tmp_path, "test_mix.py", """
        def test_one():
            assert 1 + 1 == 2

        def test_two():
            assert "a".upper() == "A"

        def test_three():
            assert [1, 2] == [1, 3]
    """)
    result = run_pytest(test, tmp_path)
    assert not result.timed_out and result.stopped is None
    assert result.confinement == ("bwrap" if BWRAP_OK else "unconfined")
    assert result.returncode == 1
    assert result.counts() == {"passed": 2, "failed": 1, "errors": 0, "skipped": 0}
    assert "assert [1, 2] == [1, 3]" in result.output


def test_all_passing_returns_zero(tmp_path: Path) -> None:
    test = write(tmp_path, "test_ok.py", "def test_ok():\n    assert True\n")
    result = run_pytest(test, tmp_path)
    assert result.returncode == 0 and result.counts()["passed"] == 1 and result.counts()["failed"] == 0
    assert result.stopped is None


def test_collection_error_counts_as_error(tmp_path: Path) -> None:
    test = write(tmp_path, "test_broken.py", "def test_x(:\n    pass\n")
    result = run_pytest(test, tmp_path)
    assert result.returncode != 0
    assert result.counts()["errors"] == 1


def test_task_module_importable_from_import_paths(tmp_path: Path) -> None:
    task = tmp_path / "task"
    write(task, "impl.py", "def double(x):\n    return 2 * x\n")
    test = write(task / "tests", "test_impl.py", "from impl import double\n\ndef test_d():\n    assert double(4) == 8\n")
    result = run_pytest(test, tmp_path / "scratch", import_paths=[task], rootdir=task)
    assert result.counts()["passed"] == 1, result.output


def test_missing_test_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_pytest(tmp_path / "test_nothing.py", tmp_path)


# ---------------------------------------------------------------- time limit

@pytest.mark.parametrize("body", ["while True: pass", "time.sleep(10 ** 6)"], ids=["busy", "sleep"])
def test_endless_test_is_killed_with_its_children(tmp_path: Path, body: str) -> None:
    marker = f"wb-sleeper-{uuid.uuid4().hex}"  # pids differ inside the pid namespace: find it by name
    test = write(tmp_path, "test_loop.py", f"""
        import subprocess, sys, time

        def test_forever():
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
            {body}
    """)
    started = time.monotonic()
    result = run_pytest(test, tmp_path, timeout_s=1.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.stopped == "time limit"
    assert elapsed < 6, f"took {elapsed:.1f} s for a 1.5 s limit"
    assert "time limit" in result.output
    assert not wait_gone(marker), "the test's own child process survived the kill"


# ---------------------------------------------------------------- network and environment

@pytest.mark.parametrize("mode", MODES)
def test_no_network_even_to_a_local_listener(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode != "bwrap":
        monkeypatch.setattr(sb, "find_bwrap", lambda: None)
        monkeypatch.setenv(sb.UNSAFE_ENV, "1")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    port = listener.getsockname()[1]
    try:
        test = write(tmp_path, "test_net.py", f"""
            import socket
            import pytest

            def test_connect_is_refused():
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", {port}), timeout=2)

            def test_raw_socket_is_refused():
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(2)
                with pytest.raises(OSError):
                    s.connect(("127.0.0.1", {port}))

            def test_name_lookup_is_refused():
                with pytest.raises(OSError):
                    socket.getaddrinfo("example.com", 443)
        """)
        result = run_pytest(test, tmp_path, use_namespace=mode == "namespace")
        assert result.confinement == ("bwrap" if mode == "bwrap" else "unconfined")
        assert result.counts()["passed"] == 3, result.output
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing ever arrived
    finally:
        listener.close()


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "unconfined"])
def test_environment_is_stripped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    if mode == "unconfined":
        monkeypatch.setattr(sb, "find_bwrap", lambda: None)
        monkeypatch.setenv(sb.UNSAFE_ENV, "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "also-secret")
    test = write(tmp_path / "tests", "test_env.py", f"""
        import os

        def test_no_secrets():
            for name in ("OPENAI_API_KEY", "HTTPS_PROXY", "ANTHROPIC_API_KEY"):
                assert name not in os.environ, name

        def test_home_and_tmp_inside_scratch():
            assert os.environ["HOME"].startswith({str(tmp_path.resolve())!r})
            assert os.environ["TMPDIR"].startswith({str(tmp_path.resolve())!r})

        def test_only_expected_variables():
            assert set(os.environ) <= {{"PATH", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
                                        "PYTHONHASHSEED", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "LANG", "LC_CTYPE",
                                        "PYTEST_CURRENT_TEST", "PYTEST_VERSION", "PWD"}}, sorted(os.environ)
    """)
    result = run_pytest(test, tmp_path)
    assert result.counts() == {"passed": 3, "failed": 0, "errors": 0, "skipped": 0}, result.output
    assert os.environ["OPENAI_API_KEY"] == "sk-should-not-leak"  # the parent is untouched


@needs_bwrap
def test_proc_shows_only_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"host-marker-{uuid.uuid4().hex}"
    monkeypatch.setenv("WB_SANDBOX_MARKER", marker)
    test = write(tmp_path, "test_proc.py", f"""
        import os

        def test_pid1_environ_has_nothing_of_the_host():
            data = open("/proc/1/environ", "rb").read()
            assert {marker!r}.encode() not in data
            assert b"WB_SANDBOX_MARKER" not in data

        def test_no_process_environ_has_the_marker():
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    data = open(f"/proc/{{pid}}/environ", "rb").read()
                except OSError:
                    continue
                assert {marker!r}.encode() not in data, pid

        def test_only_the_sandbox_processes_are_visible():
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            assert len(pids) <= 4, pids  # bwrap's init, pytest, maybe a thread leader; no host process
            assert {os.getpid()} not in pids or open(f"/proc/{os.getpid()}/cmdline", "rb").read() != \\
                open("/proc/self/cmdline", "rb").read()
    """)
    result = run_pytest(test, tmp_path)
    assert result.counts()["passed"] == 3, result.output


# ---------------------------------------------------------------- filesystem

@needs_bwrap
def test_writes_outside_scratch_fail_and_leave_nothing(tmp_path: Path) -> None:
    name = f"sandbox-escape-{uuid.uuid4().hex}"
    task = tmp_path / "task"
    impl = write(task, "impl.py", "X = 1\n")
    targets = [PROJECT / name, Path.home() / name, task / name, impl, task / "tests" / name,
               Path(sb.sys.prefix) / name, Path("/usr") / name, Path("/") / name, Path("/etc") / name]
    test = write(task / "tests", "test_write.py", f"""
        import os
        import pytest

        TARGETS = {[str(t) for t in targets]!r}

        @pytest.mark.parametrize("target", TARGETS)
        def test_write_fails(target):
            with pytest.raises(OSError):
                with open(target, "a") as fh:
                    fh.write("escaped")

        def test_scratch_and_tmpdir_are_writable_and_tmp_is_not():
            import tempfile

            open("scratch-file", "w").write("ok")
            with tempfile.NamedTemporaryFile("w") as fh:  # TMPDIR lies in the scratch directory
                fh.write("ok")
            with pytest.raises(OSError):
                open("/tmp/tmp-file", "w")
    """)
    result = run_pytest(test, tmp_path / "scratch", import_paths=[task], rootdir=task)
    assert result.counts() == {"passed": len(targets) + 1, "failed": 0, "errors": 0, "skipped": 0}, result.output
    for target in targets:
        if target != impl:
            assert not target.exists(), target
    assert impl.read_text() == "X = 1\n"
    assert (tmp_path / "scratch" / "scratch-file").read_text() == "ok"


@needs_bwrap
def test_planted_dot_env_cannot_be_read(tmp_path: Path) -> None:
    secret = f"sk-fake-{uuid.uuid4().hex}"
    project = tmp_path / "project"
    (project / ".env").parent.mkdir(parents=True)
    (project / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    task = project / "task"
    write(task, "impl.py", "X = 1\n")
    (task / ".env").write_text(f"OPENAI_API_KEY={secret}\n")  # even inside a bound folder it is masked
    test = write(task / "tests", "test_read.py", f"""
        import os
        import pytest

        PATHS = [{str(project / ".env")!r}, {str(task / "tests")!r} + "/../../.env", {str(task / ".env")!r},
                 {str(task)!r} + "/../.env", {str(PROJECT / ".env")!r}, os.path.expanduser("~/.env"),
                 "/root/.env"]

        @pytest.mark.parametrize("path", PATHS)
        def test_cannot_read(path):
            try:
                data = open(path).read()
            except OSError:
                return
            assert {secret!r} not in data

        def test_project_folder_shows_only_the_venv():
            assert {str(PROJECT)!r} == "/" or set(os.listdir({str(PROJECT)!r})) <= {{".venv"}}

        def test_home_is_not_the_hosts():
            assert not os.path.exists("/root/.bashrc") and not os.path.exists("/root/.ssh")
    """)
    result = run_pytest(test, project / "scratch", import_paths=[task], rootdir=task)
    assert result.counts() == {"passed": 9, "failed": 0, "errors": 0, "skipped": 0}, result.output
    assert secret not in result.output


# ---------------------------------------------------------------- memory and process caps

@needs_bwrap
def test_memory_cap_stops_a_greedy_test(tmp_path: Path) -> None:
    test = write(tmp_path, "test_mem.py", """
        def test_hog():
            chunks = []
            while True:
                chunks.append(bytearray(16 << 20))
    """)
    started = time.monotonic()
    result = run_pytest(test, tmp_path, memory_bytes=512 << 20)
    assert time.monotonic() - started < 10
    assert result.stopped == "memory cap", result.output
    assert result.counts()["failed"] == 1
    assert "MemoryError" in result.output
    assert len(bytearray(64 << 20)) == 64 << 20  # the host process is fine


@needs_bwrap
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_fork_bomb_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cgroup: bool) -> None:
    if not cgroup:
        monkeypatch.setattr(sb, "_pids_cgroup_base", lambda: None)
    elif sb._pids_cgroup_base() is None:
        pytest.skip("no writable pids cgroup here; the watchdog variant covers the cap")
    marker = f"bomb_{uuid.uuid4().hex}"
    # Every process forks again and again. The doubling stops after 11 rounds only
    # so that a broken cap could not exhaust the host's pids: 2**11 is far past 32.
    test = write(tmp_path, f"test_{marker}.py", """
        import os, time

        def test_bomb():
            for _ in range(11):
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
            time.sleep(60)
    """)
    started = time.monotonic()
    result = run_pytest(test, tmp_path, timeout_s=8, max_procs=32)
    elapsed = time.monotonic() - started
    assert result.stopped == "process limit", result.output
    assert elapsed < 5, f"took {elapsed:.1f} s"
    assert not wait_gone(marker), "processes of the fork bomb survived"


# ---------------------------------------------------------------- unavailable / unconfined

def test_missing_bwrap_raises_unless_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb, "find_bwrap", lambda: None)
    monkeypatch.delenv(sb.UNSAFE_ENV, raising=False)
    ok, why = sandbox_status()
    assert not ok and "apt-get install bubblewrap" in why and "--unsafe-code-tasks" in why
    test = write(tmp_path, "test_ok.py", "def test_ok():\n    assert True\n")
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run_pytest(test, tmp_path)
    assert isinstance(SandboxUnavailable("x"), RuntimeError)


def test_unconfined_runs_when_explicitly_allowed(tmp_path: Path, unconfined: None) -> None:
    test = write(tmp_path, "test_mix.py", "def test_a():\n    assert True\n\ndef test_b():\n    assert False\n")
    result = run_pytest(test, tmp_path)
    assert result.confinement == "unconfined"
    assert result.counts() == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0}, result.output


def test_unconfined_still_has_the_time_limit(tmp_path: Path, unconfined: None) -> None:
    test = write(tmp_path, "test_sleep.py", "import time\n\ndef test_s():\n    time.sleep(10 ** 6)\n")
    result = run_pytest(test, tmp_path, timeout_s=1)
    assert result.confinement == "unconfined" and result.stopped == "time limit"


# ---------------------------------------------------------------- what the agent sees

@needs_bwrap
def test_code_workspace_report_says_why_it_stopped(tmp_path: Path) -> None:
    from workbench.worlds.collusion.tasks.code import TASKS, CodeWorkspace

    task = TASKS["code-01a"]
    ws = CodeWorkspace(task, tmp_path)
    ws.call("write_test", {"path": f"/task/{task.group}/tests/test_hog.py",
                           "content": "from impl import chunk\n\n\ndef test_hog():\n    chunk([1], 1)\n"
                                      "    x = bytearray(8 << 30)\n"})
    out = ws.call("run_tests", {"path": f"/task/{task.group}/tests/test_hog.py"})
    assert out.startswith("passed=0 failed=1 errors=0 (stopped: memory cap)"), out
    assert str(tmp_path) not in out
    assert ws.report("", {"passed": 0, "failed": 0, "errors": 0}, "time limit").endswith(
        "(stopped: time limit, killed after 10 s)")
    assert "stopped" not in ws.report("1 passed", {"passed": 1, "failed": 0, "errors": 0}, None)


@pytest.mark.parametrize("path, mib, stopped, said", [
    ("/dev/shm/x", 64, "space limit", "/dev/shm holds 16 MiB"),  # its own small tmpfs, not the host's memory
    ("big.bin", 100, "file size limit", "past the size limit (64 MiB)"),  # RLIMIT_FSIZE
])
def test_a_capped_write_is_a_recorded_stop(tmp_path: Path, path: str, mib: int, stopped: str, said: str) -> None:
    """/dev/shm inside the sandbox is a 16 MiB tmpfs of its own (the host's, gigabytes outside the
    memory cap, is out of reach) and no file may pass 64 MiB: a test that tries is stopped, the
    reason said as for the other limits."""
    if not BWRAP_OK and path.startswith("/dev/shm"):
        pytest.skip(f"bwrap is not usable here: {BWRAP_WHY}")
    test = write(tmp_path, "test_write.py", f"""
        def test_write():
            with open({path!r}, "wb") as fh:
                for _ in range({mib}):
                    fh.write(b"x" * (1 << 20))
    """)
    result = run_pytest(test, tmp_path)
    assert result.counts()["failed"] == 1 and result.stopped == stopped, result.output
    assert said in result.output
    if not path.startswith("/"):
        assert (tmp_path / path).stat().st_size <= 64 << 20


def test_the_scratch_folder_has_a_quota(tmp_path: Path) -> None:
    """Files under the file-size limit can still fill a disk together: the writable folder's
    total is watched while the tests run, and passing its quota stops them, said as the others."""
    test = write(tmp_path, "test_many.py", """
        import time

        def test_many_files():
            for i in range(40):
                with open(f"part{i}.bin", "wb") as fh:
                    fh.write(b"x" * (16 << 20))
            time.sleep(5)
    """)
    result = run_pytest(test, tmp_path, timeout_s=30)
    assert result.stopped == "scratch quota", result.output
    assert "quota (256 MiB)" in result.output
