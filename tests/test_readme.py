"""Every shell command in README.md runs as written: each ```sh block is read,
and every command in it that needs no key, no server left running and no
download of model weights is run, in README order, in a scratch copy of the
working tree (so `lock create` and the outputs never touch the checkout). A
command the README gains is run by this test unless it is added to SKIP with
the reason, so the README cannot drift from the tool."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, copy_checkout

README = ROOT / "README.md"
BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)

# commands not run here, each with why (a regular expression over the whole command)
SKIP = {
    r"^make test$": "the test suite itself: this test runs inside it",
    r"jupyter lab": "starts a server that runs until stopped; tests/test_jupyterlab.py drives JupyterLab headless",
    r"models fetch": "downloads model weights (hundreds of MB) from the registry",
    r"models build-runtime": "compiles llama.cpp (about 6 minutes on 2 cores) into ~/.cache: a fresh machine would "
                             "spend the suite's time on it; tests/test_runtime_build.py runs it under the slow "
                             "marker in `make bench`, and tests/test_local_runtime.py tests the command's logic",
    r"params/open-weight\.yaml|bench_local\.py": "needs open-weight weights fetched first (models fetch)",
    r"benchmarks/bench_grid\.py": "a benchmark (about 17 s of the suite): `make bench` runs every benchmark, this one "
                                  "included, and prints its figures",
    r"params/open-questions\.yaml|outputs/open-questions": "its open-weight cell needs weights fetched first (models "
                                                           "fetch); its simulated cells run in "
                                                           "tests/test_open_questions_study.py",
    r"run params/recall\.yaml|report outputs/recall$": "the shipped recall study: 6,900 worlds, about 9 minutes on "
                                                        "2 cores; its cells run at smoke size in tests/test_recall_*.py "
                                                        "and params/recall-smoke.yaml below",
}
# the README's placeholders, filled from what the commands before them produced
PLACEHOLDERS = {
    "RUN_A": lambda tree: "outputs/smoke",
    "RUN_B": lambda tree: "outputs/smoke",
    "ID": lambda tree: json.loads((tree / "outputs/smoke/worlds.jsonl").read_text().splitlines()[0])["world_id"],
}


def _strip_comment(line: str) -> str:
    """The line up to a ``#`` that starts a shell comment (not inside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "\"'":
            quote = None if quote == ch else (ch if quote is None else quote)
        if ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def readme_commands(text: str) -> list[str]:
    commands = []
    for block in BLOCK.findall(text):
        pending = ""
        for line in block.splitlines():
            code = _strip_comment(line).rstrip()
            if not code.strip():
                continue
            if code.endswith("\\"):
                pending += code[:-1] + " "
                continue
            commands.append((pending + code).strip())
            pending = ""
    return commands


def _skip_reason(command: str) -> str | None:
    return next((why for pattern, why in SKIP.items() if re.search(pattern, command)), None)


def _fill(command: str, tree: Path) -> str:
    for name, value in PLACEHOLDERS.items():
        if re.search(rf"\b{name}\b", command):
            command = re.sub(rf"\b{name}\b", value(tree), command)
    return command


def _scratch_tree(dest: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) in a fresh git repository
    of their own, with the checkout's virtual environment linked in."""
    copy_checkout(dest)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    stamp = ROOT / ".venv" / ".installed"
    if stamp.exists():  # make must see the environment as installed, never reinstall it for the copy
        t = stamp.stat().st_mtime - 10
        os.utime(dest / "pyproject.toml", (t, t))
    git = ["git", "-c", "user.name=readme-test", "-c", "user.email=readme-test@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "scratch copy"], cwd=dest, check=True)
    return dest


def test_readme_commands_are_found_and_classified():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert "make demo" in commands and any(c.startswith(".venv/bin/workbench report") for c in commands)
    skipped = [c for c in commands if _skip_reason(c)]
    assert len(skipped) < len(commands) // 4, skipped  # the README is mostly run, not mostly excused
    assert not [c for c in commands if re.match(r"python3? ", c)], "use .venv/bin/python: `python` may lack the package"


def test_every_readme_command_runs_as_written(tmp_path):
    if not (ROOT / ".venv" / "bin" / "workbench").exists():
        pytest.fail("no .venv: run `make test`, which creates it")
    tree = _scratch_tree(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # a key would hide a README lie
    ran = []
    for command in readme_commands(README.read_text(encoding="utf-8")):
        if _skip_reason(command):
            continue
        command = _fill(command, tree)
        res = subprocess.run(command, shell=True, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (f"README command failed (rc {res.returncode}): {command}\n"
                                     f"{(res.stdout + res.stderr)[-3000:]}")
        ran.append(command)
    assert (tree / "outputs/demo/report.html").exists() and list((tree / "outputs/demo/figures").glob("*.svg"))
    assert (tree / "locks/e1-L1.json").exists()
    assert len(ran) >= 20
