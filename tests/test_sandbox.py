"""The pytest sandbox for agent-written tests: time limit, network block,
stripped environment, and counts read from pytest's own summary."""
from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from workbench.worlds.collusion.tasks.sandbox import namespaces_available, run_pytest

MODES = [pytest.param(False, id="sitecustomize-only"),
         pytest.param(True, id="namespace", marks=pytest.mark.skipif(not namespaces_available(),
                                                                     reason="unshare -rn not usable here"))]


def write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


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
    assert not result.timed_out
    assert result.returncode == 1
    assert result.counts() == {"passed": 2, "failed": 1, "errors": 0, "skipped": 0}
    assert "assert [1, 2] == [1, 3]" in result.output


def test_all_passing_returns_zero(tmp_path: Path) -> None:
    test = write(tmp_path, "test_ok.py", "def test_ok():\n    assert True\n")
    result = run_pytest(test, tmp_path)
    assert result.returncode == 0 and result.counts()["passed"] == 1 and result.counts()["failed"] == 0


def test_collection_error_counts_as_error(tmp_path: Path) -> None:
    test = write(tmp_path, "test_broken.py", "def test_x(:\n    pass\n")
    result = run_pytest(test, tmp_path)
    assert result.returncode != 0
    assert result.counts()["errors"] == 1


def test_endless_test_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    test = write(tmp_path, "test_loop.py", f"""
        import subprocess

        def test_forever():
            child = subprocess.Popen(["sleep", "300"])
            open({str(pidfile)!r}, "w").write(str(child.pid))
            while True:
                pass
    """)
    started = time.monotonic()
    result = run_pytest(test, tmp_path, timeout_s=2)
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert elapsed < 8, f"took {elapsed:.1f} s for a 2 s limit"
    assert "time limit" in result.output
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the test's own child process survived the group kill"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1].split()[0] != "Z"  # a zombie is dead but not yet reaped
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("use_namespace", MODES)
def test_no_network_even_to_a_local_listener(tmp_path: Path, use_namespace: bool) -> None:
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
                    socket.getaddrinfo("localhost", {port})
        """)
        result = run_pytest(test, tmp_path, use_namespace=use_namespace)
        assert result.counts()["passed"] == 3, result.output
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing ever arrived
    finally:
        listener.close()


def test_environment_is_stripped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
                                        "PYTEST_CURRENT_TEST", "PYTEST_VERSION"}}, sorted(os.environ)
    """)
    result = run_pytest(test, tmp_path)
    assert result.counts() == {"passed": 3, "failed": 0, "errors": 0, "skipped": 0}, result.output
    assert os.environ["OPENAI_API_KEY"] == "sk-should-not-leak"  # the parent is untouched


def test_task_module_importable_from_import_paths(tmp_path: Path) -> None:
    task = tmp_path / "task"
    write(task, "impl.py", "def double(x):\n    return 2 * x\n")
    test = write(task / "tests", "test_impl.py", "from impl import double\n\ndef test_d():\n    assert double(4) == 8\n")
    result = run_pytest(test, tmp_path / "scratch", import_paths=[task], rootdir=task)
    assert result.counts()["passed"] == 1, result.output


def test_missing_test_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_pytest(tmp_path / "test_nothing.py", tmp_path)
