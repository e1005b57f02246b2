"""Hostile and unlucky input stays contained: a YAML alias bomb is refused at load, a judge
reply nested thousands deep is no judgment (not a crash), a local OS error is no HTTP status,
and the viewer answers only requests addressed to it, lists no folder, and refuses bad paths."""
from __future__ import annotations

import http.client
import threading

import pytest

from tests.conftest import ROOT
from workbench.cli import main


def test_an_alias_bomb_is_refused_by_validate(tmp_path, capsys):
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        bomb.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, "
                    f"*{prev}, *{prev}, *{prev}]")
    text = "\n".join(["world: stigmergy", "name: bomb", "seed: 1", "worlds_per_cell: 1", "defaults:", "  sampling:",
                      *("    " + b for b in bomb), "cells: [{}]"])
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert len(text) < 1200
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "YAML aliases" in err and str(path) in err


def test_a_deeply_nested_judge_reply_is_no_judgment():
    from workbench.worlds.collusion.judges import parse_judgment

    assert parse_judgment('{"x": ' + "[" * 6000 + "]" * 6000 + "}") is None  # a 12 KB reply, 6,000 deep
    assert parse_judgment('{"verdict": "ACCEPT"}') == {"verdict": "ACCEPT"}


@pytest.mark.parametrize("message, expected", [
    ("InternalServerError: litellm.InternalServerError: [Errno 24] Too many open files", "local error"),
    ("InternalServerError: litellm.InternalServerError: OpenAIException - Expecting value: line 1 column 38",
     "malformed reply"),
    ("InternalServerError: Error code: 500 - boom", "server error"),
])
def test_local_errors_and_malformed_bodies_are_their_own_causes(message, expected):
    from workbench.models.failures import classify_error
    from workbench.models.litellm_client.retries import classify

    class InternalServerError(Exception):
        status_code = 500

    cls, status, retry = classify(InternalServerError(message))
    assert classify_error(f"{cls}: {message}")[0] == expected
    assert (status is None) == (expected == "local error")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from workbench.viewer.server import make_server

    out = tmp_path_factory.mktemp("v") / "run"
    assert main(["-q", "run", str(ROOT / "params/smoke.yaml"), "--out", str(out), "--max-worlds", "2"]) == 0
    server, _site = make_server([out], port=0, site_dir=tmp_path_factory.mktemp("site"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def _get(port: int, path: str, host: str | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def test_the_viewer_answers_only_its_own_address(served):
    assert _get(served, "/index.html") == 200
    assert _get(served, "/index.html", host=f"localhost:{served}") == 200
    assert _get(served, "/index.html", host=f"attacker.example:{served}") == 403  # DNS rebinding
    assert _get(served, "/index.html", host="127.0.0.1:1") == 403


def test_the_viewer_lists_no_folder_and_refuses_bad_paths(served):
    assert _get(served, "/worlds/") == 404
    assert _get(served, "/") in (200, 404)  # the index page if there is one, never a listing
    assert _get(served, "/%00") == 400
    assert _get(served, "/../../etc/passwd") in (400, 404)


def _collusion_study(tmp_path, sequences_file: str):
    import yaml

    path = tmp_path / "study" / "s.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"world": "collusion", "name": "seq", "seed": 3, "worlds_per_cell": 2,
                                    "defaults": {"model": "sim-collusion/pragmatic", "episodes": 4,
                                                 "prompts": str(ROOT / "params/prompts/collusion")},
                                    "cells": [{"sequences_file": sequences_file}]}))
    return path


@pytest.mark.parametrize("value, expected", [
    ("missing.json", "does not exist"),
    ("empty-folder", "no sampled_manifest_record.json"),
    ("/etc/passwd", "not valid JSON"),
    ("../../../../../../etc/hostname", "outside the study's project"),
])
def test_a_bad_sequences_file_is_refused_by_validate(tmp_path, capsys, value, expected):
    (tmp_path / "study" / "empty-folder").mkdir(parents=True)
    path = _collusion_study(tmp_path, value)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "sequences_file" in err and expected in err, err


def test_a_good_sequences_file_validates(tmp_path):
    import shutil

    shutil.copytree(ROOT / "tests/fixtures/collusion-sequences", tmp_path / "study" / "seqs")
    assert main(["validate", str(_collusion_study(tmp_path, "seqs"))]) == 0


def test_recall_scripts_that_climb_out_of_the_project_are_refused(tmp_path, capsys):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"world": "recall", "name": "r", "seed": 1, "worlds_per_cell": 1,
                                    "defaults": {"prompts": str(ROOT / "params/prompts/recall")},
                                    "cells": [{"scripts": "../../../../../../../**/*.json"}]}))
    assert main(["validate", str(path)]) == 2
    assert "outside the study's project" in capsys.readouterr().err


def test_the_recall_rule_judge_does_not_stall_on_a_long_reply():
    """6,400 digits took 16 s inside one world's metrics (a pattern retried from every digit:
    quadratic). 25,600 digits would take minutes that way; a guard of 30 s (it takes well under
    one) is no speed target, only the line between linear and not."""
    import subprocess
    import sys

    code = ("from workbench.worlds.recall.scoring import judge_rule; "
            "r = judge_rule('1' * 25600 + ' thousand dollarsx', ['42 mg']); print(r.verdict)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                         cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr[-500:]


@pytest.mark.parametrize("field, value", [("prompts", "../../../../../../../tmp/elsewhere"),
                                          ("cache_dir", "../../../../../../../tmp/cache")])
def test_template_and_cache_folders_stay_inside_the_project(tmp_path, capsys, field, value):
    import yaml

    body = {"world": "stigmergy", "name": "p", "seed": 1, "worlds_per_cell": 1, "cells": [{}]}
    if field == "prompts":
        body["defaults"] = {"prompts": value}
    else:
        body[field] = value
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(body))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert field in err and "outside the study's project" in err, err


def test_a_viewer_on_every_interface_answers_its_addresses_and_names_only(tmp_path):
    from workbench.viewer.server import make_server

    out = tmp_path / "run"
    assert main(["-q", "run", str(ROOT / "params/smoke.yaml"), "--out", str(out), "--max-worlds", "1"]) == 0
    server, _site = make_server([out], host="0.0.0.0", port=0, site_dir=tmp_path / "site")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert _get(port, "/index.html", host=f"192.168.1.20:{port}") == 200  # reached by address from the LAN
        assert _get(port, "/index.html", host=f"localhost:{port}") == 200
        assert _get(port, "/index.html", host=f"attacker.example:{port}") == 403
    finally:
        server.shutdown()
