"""A bug looks like a bug: anything but a WorkbenchError is an internal error (exit 1, a
traceback kept in a file under the run directory, shown with -v); input errors stay one
line with exit 2."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture
def smoke_dir(tmp_path):
    from workbench.cli import main

    out = tmp_path / "run"
    assert main(["-q", "run", str(ROOT / "params/smoke.yaml"), "--out", str(out), "--max-worlds", "2"]) == 0
    return out


def _break_metrics(monkeypatch):
    """An injected bug: metrics' loader raises a KeyError no user input could cause."""
    import workbench.records

    def boom(*_a, **_k):
        raise KeyError("internal_bug_key")

    monkeypatch.setattr(workbench.records, "load_run", boom)


def test_an_internal_error_exits_1_with_a_traceback_file(smoke_dir, monkeypatch, capsys):
    from workbench.cli import main

    _break_metrics(monkeypatch)
    assert main(["metrics", str(smoke_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: KeyError: 'internal_bug_key'") and "Traceback" not in err
    kept = re.search(r"traceback kept in (\S+);", err)
    assert kept, err
    path = Path(kept.group(1))
    assert path.parent == smoke_dir / "internal-errors"
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "def boom" not in text and "boom" in text


def test_verbose_shows_the_traceback(smoke_dir, monkeypatch, capsys):
    from workbench.cli import main

    _break_metrics(monkeypatch)
    assert main(["-v", "metrics", str(smoke_dir)]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'internal_bug_key'" in err


def test_without_a_run_directory_the_traceback_goes_to_the_temp_folder(tmp_path, monkeypatch, capsys):
    import tempfile

    import workbench.params
    from workbench.cli import main

    def boom(*_a, **_k):
        raise RuntimeError("bug in the loader")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(workbench.params, "load_study", boom)
    monkeypatch.setattr("workbench.cli.load_study", boom)
    assert main(["validate", str(ROOT / "params/smoke.yaml")]) == 1
    err = capsys.readouterr().err
    kept = Path(re.search(r"traceback kept in (\S+);", err).group(1))
    assert kept.parent == tmp_path and "bug in the loader" in kept.read_text()


@pytest.mark.parametrize("argv, expected", [
    (["validate", "no/such/study.yaml"], "no/such/study.yaml"),
    (["metrics", "no/such/run"], "no/such/run"),
    (["report", "no/such/run"], "no/such/run"),
    (["replay", "no/such/run", "--world", "w"], "no/such/run"),
])
def test_input_errors_stay_one_line_exit_2(argv, expected, tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and expected in err and "\n" not in err and "internal" not in err


def test_import_contracts_ignore_no_import():
    """The layers hold as written: no contract excuses an import (ignore_imports), so a new cycle
    or a kind reaching the runner fails lint-imports instead of being listed away."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    assert len(contracts) >= 10
    assert [c["name"] for c in contracts if c.get("ignore_imports")] == []
    names = " ".join(c["name"] for c in contracts)
    assert "cycles" in names and "Explorers above the study runner" in names
