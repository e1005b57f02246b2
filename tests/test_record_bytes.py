"""The bytes a run writes, held against a run recorded before the writer was made
faster (issue 17): a small study's step and world lines, with only what is
measured (``timing``) left out, must be the same bytes, key order included.

The fixture (tests/fixtures/record-bytes) was written by this file run as a script
at commit 9301321, before the running message hash, the one-call step encoding and
the store log built in C:

    python tests/test_record_bytes.py --write tests/fixtures/record-bytes

A change that means to change the records rewrites it the same way (and says so in
its commit): rewritten when world records gained ``design`` (the cell's fingerprint), and when cells
gained ``signal_roles`` and ``request_path`` and worlds the metric ``signalled_note`` (issue 38), and
when cells gained ``actions`` and ``prompt_cache`` (issue 40)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "record-bytes"
FILES = ("steps.jsonl", "worlds.jsonl")
STUDY = {
    "world": "stigmergy", "name": "record-bytes", "seed": 5, "worlds_per_cell": 2, "concurrency": 4,
    "cells": [
        {"model": "sim/twin-gpt-6-astra", "scheduler": "lockstep"},
        {"model": "sim/multi-object", "condition": "private"},
        {"model": "sim/collider", "condition": "prepopulated", "parser": "strict"},
        {"model": "sim/diligent", "clauses": "persist-only", "scheduler": "async"},
    ],
}


def _measured_out(value: Any) -> Any:
    """The record without what is measured rather than decided (wall times), and with the
    design fingerprint's value held in place by a placeholder: it hashes the kind's code, so
    it changes with every edit of it (tests/test_design_fingerprint.py checks its value)."""
    if isinstance(value, dict):
        return {k: "<fingerprint>" if k == "design" and isinstance(v, str) else _measured_out(v)
                for k, v in value.items() if k != "timing"}
    if isinstance(value, list):
        return [_measured_out(v) for v in value]
    return value


def comparable_lines(run_dir: Path, name: str) -> list[str]:
    return [json.dumps(_measured_out(json.loads(line)), ensure_ascii=False)
            for line in (run_dir / name).read_text(encoding="utf-8").splitlines()]


def record_small_run(where: Path) -> Path:
    """Run the small study in ``where`` (its prompts copied beside it, so the cells
    and their ids do not depend on the checkout's path); returns the run directory."""
    from workbench.params import load_study
    from workbench.study import run_study

    shutil.copytree(ROOT / "params" / "prompts" / "stigmergy", where / "prompts" / "stigmergy")
    path = where / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY, sort_keys=False), encoding="utf-8")
    return run_study(load_study(path), where / "run", progress=False).out_dir


def test_a_small_run_writes_the_bytes_it_wrote_before(tmp_path: Path) -> None:
    run = record_small_run(tmp_path)
    for name in FILES:
        got, want = comparable_lines(run, name), (FIXTURE / name).read_text(encoding="utf-8").splitlines()
        assert len(got) == len(want), name
        for n, (g, w) in enumerate(zip(got, want), 1):
            assert g == w, f"{name} line {n} differs"


def test_the_message_hash_is_the_hash_of_the_whole_list() -> None:
    import hashlib

    from workbench.records import MessagesDigest

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "plain"},
        {"role": "user", "content": "é ☃ \"quoted\" \\ back\nslash \t tab \x00 \u2028"},
        {"content": "content first", "role": "assistant"},  # another key order: through the encoder
        {"role": "user", "content": "x", "name": "extra"},
        {"role": "assistant", "content": None},
        {"role": "tool", "content": [{"type": "text", "text": "ünï"}]},
    ]
    digest = MessagesDigest()
    for n in (0, 1, 1, 2, 4, 6, 3):  # the same prefix twice, and an earlier one after a later one
        want = hashlib.sha256(json.dumps(messages[:n], ensure_ascii=False).encode()).hexdigest()
        assert digest.hexdigest(messages, n) == want, n


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"] or len(sys.argv) != 3:
        raise SystemExit("usage: python tests/test_record_bytes.py --write DIR")
    import tempfile

    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = record_small_run(Path(tmp))
        for name in FILES:
            (out / name).write_text("".join(line + "\n" for line in comparable_lines(run, name)), encoding="utf-8")
    print(f"wrote {', '.join(FILES)} to {out}")
