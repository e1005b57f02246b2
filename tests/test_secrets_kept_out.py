"""Secrets never persist: a key a server reflects into its reply and a password inside an
api_base URL appear in no file a run, its report, its viewer bundle or its Inspect export
writes; an api_base route without a key runs only when it declares `auth: none`."""
from __future__ import annotations

import yaml

from tests.conftest import PROMPTS
from tests.fake_openai import FakeOpenAI
from workbench.cli import main

KEY = "sk-canary-0123456789abcdefABCDEF"
PASSWORD = "pa55-canary-word"


def _catalogue(tmp_path, url: str, **extra) -> object:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"reflector": {
        "route": "openai/reflector", "api_base": url, "max_attempts": 1, "timeout_s": 5,
        "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0, **extra}}}))
    return path


def _study(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "secrets", "seed": 1, "worlds_per_cell": 2,
                                    "defaults": {"prompts": str(PROMPTS), "max_steps": 4, "scheduler": "lockstep"},
                                    "cells": [{"model": "reflector"}]}))
    return path


def test_a_reflected_key_and_a_url_password_reach_no_output(tmp_path, monkeypatch, capsys):
    server = FakeOpenAI()
    server.responder = lambda body: '{"op": "list"} ' + f"your key is {KEY}"
    server.start()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("WORKBENCH_MODELS", str(_catalogue(tmp_path, server.url)))
        out = tmp_path / "run"
        assert main(["-q", "run", str(_study(tmp_path)), "--out", str(out)]) == 0
        # a password in the api_base (the HTTP client refuses it beside a key: every call fails, and says so)
        credentialed = server.url.replace("http://", f"http://someone:{PASSWORD}@")
        monkeypatch.setenv("WORKBENCH_MODELS", str(_catalogue(tmp_path / "c", credentialed)))
        assert main(["-q", "run", str(_study(tmp_path / "c")), "--out", str(tmp_path / "c" / "run")]) == 1
    finally:
        server.stop()
    assert server.count > 0
    assert "[REDACTED]@127.0.0.1" in (tmp_path / "c" / "run" / "steps.jsonl").read_text()
    assert main(["-q", "report", str(out)]) == 0
    assert main(["-q", "view", str(out), "--static", str(tmp_path / "site")]) == 0
    assert main(["-q", "export", "inspect", str(out), "--out", str(tmp_path / "inspect")]) == 0
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "models.yaml"]
    assert len(files) > 10
    leaks = [str(p) for p in files if KEY.encode() in p.read_bytes() or PASSWORD.encode() in p.read_bytes()]
    assert leaks == []
    steps = (out / "steps.jsonl").read_text()
    assert "your key is [REDACTED]" in steps and "a key's value in the reply was replaced" in steps


def test_an_api_base_route_without_a_key_needs_auth_none(tmp_path, monkeypatch, capsys):
    server = FakeOpenAI(default_text='{"op": "submit", "answer": 0}').start()
    try:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("WORKBENCH_MODELS", str(_catalogue(tmp_path, server.url)))
        study = _study(tmp_path)
        assert main(["-q", "run", str(study), "--out", str(tmp_path / "a")]) == 2
        assert "auth: none" in capsys.readouterr().err and server.count == 0  # nothing sent
        monkeypatch.setenv("WORKBENCH_MODELS", str(_catalogue(tmp_path, server.url, auth="none")))
        assert main(["-q", "run", str(study), "--out", str(tmp_path / "b")]) == 0
        assert server.count > 0 and server.auth_seen == server.count  # the placeholder, to a server of our own
    finally:
        server.stop()
