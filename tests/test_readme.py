"""Every shell command in README.md and in the documentation site's pages runs as
written: each ```sh block is read, and every command in it that needs no key, no
server left running and no download of model weights is run, in reading order
(README first, then the pages in the order of mkdocs.yml's nav), in one scratch copy
of the working tree (so `lock create` and the outputs never touch the checkout, and
a page may use what an earlier page made, as a reader following the docs would). A
command the docs gain is run by this test unless it is added to SKIP with the reason,
so the docs cannot drift from the tool. A command repeated word for word on a later
page runs once (README and the docs' home page share the quickstart), except
`workbench run`, whose repetition (a resume) is the point where it is repeated."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, copy_checkout

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)

# commands not run here, each with why (a regular expression over the whole command)
SKIP = {
    r"^make test$": "the test suite itself: this test runs inside it",
    r"jupyter lab": "starts a server that runs until stopped; tests/test_jupyterlab.py drives JupyterLab headless",
    r"models fetch": "downloads model weights (hundreds of MB) from the registry",
    r"models build-runtime": "compiles llama.cpp (about 6 minutes on 2 cores) into ~/.cache: a fresh machine would "
                             "spend the suite's time on it; tests/test_runtime_build.py runs it under the slow "
                             "marker in `make bench`, and tests/test_local_runtime.py tests the command's logic",
    r"params/open-weight\.yaml|bench_local\.py|bench_local_replay\.py": "needs open-weight weights fetched first "
                                                                         "(models fetch)",
    r"report outputs/demo$": "the demo's report again: `make demo` writes it and docs/index.md's `report outputs/demo "
                              "--figures` writes it again with its figures, both run here (8 s of the suite each)",
    r"profiles --check$": "the twins' calibration over five seeds (11 s): tests/test_calibration.py runs the same "
                          "check on every shipped twin and the command's exit codes",
    r"benchmarks/bench_grid\.py": "a benchmark (about 17 s of the suite): `make bench` runs every benchmark, this one "
                                  "included, and prints its figures",
    r"params/open-questions\.yaml|outputs/open-questions": "its open-weight cell needs weights fetched first (models "
                                                           "fetch); its simulated cells run in "
                                                           "tests/test_open_questions_study.py",
    r"run params/recall\.yaml|report outputs/recall$": "the shipped recall study: 7,500 worlds, about 2 minutes "
                                                        "to run and 1 to report on 2 shared cores; its cells run at "
                                                        "smoke size in tests/test_recall_*.py and "
                                                        "params/recall-smoke.yaml (run and reported here)",
}
# the docs' placeholders, filled from what the commands before them produced
PLACEHOLDERS = {
    "RUN_A": lambda tree: "outputs/smoke",
    "RUN_B": lambda tree: "outputs/smoke",
    "ID": lambda tree: json.loads((tree / "outputs/smoke/worlds.jsonl").read_text().splitlines()[0])["world_id"],
}
# a command that runs again whenever the docs repeat it (a resume is what the repetition shows)
RERUN = re.compile(r"^\.venv/bin/workbench (?:-\S+ )*run ")


def nav_pages() -> list[Path]:
    """The documentation's pages in the order of mkdocs.yml's nav (a reader's order)."""
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in walk(v)]
        if isinstance(node, list):
            return [p for v in node for p in walk(v)]
        return []

    nav = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))["nav"]
    return [DOCS / p for p in walk(nav) if not re.match(r"[a-z]+://", p)]


def doc_files() -> list[Path]:
    """README.md, then every page of the site in nav order."""
    return [README, *nav_pages()]


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
    """The shell commands of one Markdown text's ```sh blocks, comments stripped, continuation lines joined."""
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


def doc_commands() -> list[tuple[str, str]]:
    """(file, command) for every command of README.md and the docs, in reading order."""
    return [(str(path.relative_to(ROOT)), c) for path in doc_files()
            for c in readme_commands(path.read_text(encoding="utf-8"))]


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


def test_readme_keeps_the_two_fresh_machine_commands():
    """The developers' guide: `make demo` sets up and runs the main job (ending in the HTML
    report under outputs/), `make test` sets up and runs the tests; README.md shows both."""
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert "make demo" in commands and "make test" in commands
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250, "README.md is the front page; the manual is docs/"


def test_doc_commands_are_found_and_classified():
    commands = [c for _, c in doc_commands()]
    assert "make demo" in commands and any(c.startswith(".venv/bin/workbench report") for c in commands)
    skipped = [c for c in commands if _skip_reason(c)]
    assert len(skipped) < len(commands) // 4, skipped  # the docs are mostly run, not mostly excused
    assert not [c for c in commands if re.match(r"python3? ", c)], "use .venv/bin/python: `python` may lack the package"
    pages_with_commands = {f for f, c in doc_commands() if not _skip_reason(c)}
    assert len(pages_with_commands) >= 8, pages_with_commands  # the pages are read, not only the README


def _glossary_codes() -> set[str]:
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", (DOCS / "glossary.md").read_text(encoding="utf-8")))


# identifiers and flags of a world's metrics, never a quantity a reader is shown
_NOT_QUANTITIES = {"world_id", "cell_id", "seed", "world_index", "rescored", "simulated"}


def test_every_doc_command_runs_as_written(tmp_path):
    if not (ROOT / ".venv" / "bin" / "workbench").exists():
        pytest.fail("no .venv: run `make test`, which creates it")
    tree = _scratch_tree(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # a key would hide a docs lie
    env["NO_MKDOCS_2_WARNING"] = "1"
    ran: list[str] = []
    for where, command in doc_commands():
        if _skip_reason(command) or (command in ran and not RERUN.match(command)):
            continue
        filled = _fill(command, tree)
        res = subprocess.run(filled, shell=True, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (f"{where}: command failed (rc {res.returncode}): {filled}\n"
                                     f"{(res.stdout + res.stderr)[-3000:]}")
        ran.append(command)
    assert (tree / "outputs/demo/report.html").exists() and list((tree / "outputs/demo/figures").glob("*.svg"))
    assert (tree / "locks/e1-L1.json").exists()
    assert (tree / "outputs/site/index.html").exists()  # make docs
    assert len(ran) >= 40
    # the glossary names every quantity the three kinds' runs recorded
    codes = _glossary_codes()
    for run in ("outputs/smoke", "outputs/recall-smoke", "outputs/collusion-smoke"):
        metrics = json.loads((tree / run / "worlds.jsonl").read_text().splitlines()[0])["metrics"]
        quantities = {k for k, v in metrics.items() if isinstance(v, bool | int | float)} - _NOT_QUANTITIES
        assert quantities <= codes, f"docs/glossary.md does not name {sorted(quantities - codes)} ({run})"
