"""What the faster analysis path must keep: the loader reads what it read before
(msgspec first, json for what msgspec refuses), the cached parse agrees with the
parser, and frames derived once per load are the frames computed afresh.
Speed itself is measured in benchmarks/bench_analysis.py, never here."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from workbench.records import WORLDS, load_run, read_jsonl
from workbench.worlds.stigmergy import frames as F
from workbench.worlds.stigmergy.parsing import parse_reply, reply_valid

FIXTURE = Path(__file__).parent / "fixtures" / "run-0.1.0"


def test_read_jsonl_reads_what_json_reads_including_what_msgspec_refuses(tmp_path):
    lines = ['{"a":"\\ud800 x","n":1}', '{"f":NaN,"g":Infinity}', '{"big":1e400}', "not json", "",
             '{"a":1,"a":2}', "[1,2]", '{"u":"\u00e9\u2603","long":123456789012345678901234567890}']
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems: list[str] = []
    got = list(read_jsonl(path, problems))
    want = [json.loads(x) for x in lines if x and x != "not json" and isinstance(json.loads(x), dict)]
    assert json.dumps(got) == json.dumps(want)  # NaN == NaN as text
    assert problems == ["x.jsonl:4: malformed line skipped"]


def test_fixture_loads_as_json_reads_it():
    assert list(read_jsonl(FIXTURE / WORLDS)) == [json.loads(x) for x in (FIXTURE / WORLDS).read_text().splitlines()
                                                   if x.strip()]


def test_cached_validity_agrees_with_the_parser():
    ops = ("read", "write", "list", "submit")
    texts = ['{"op":"read","key":"a"}', 'sure: {"op":"write","key":"a","value":3}', "```json\n{}\n```", "", "{",
             '{"op":"list"} {"op":"list"}', '{"op":"fly"}']
    for _ in range(2):  # the second pass is served from the cache
        for text in texts:
            for rule in ("strict", "lenient"):
                assert reply_valid(text, rule, ops) == parse_reply(text, rule, ops).valid
    assert reply_valid(None, "lenient", ops) is parse_reply(None, "lenient", ops).valid  # type: ignore[arg-type]


def test_frames_derived_once_equal_fresh_ones_and_callers_get_copies():
    records = load_run(FIXTURE)
    for name, build, fresh in (
        ("worlds", lambda: F.world_frame(records), lambda: F._world_frame(records, None, None)),
        ("strict", lambda: F.world_frame(records, "strict"), lambda: F._world_frame(records, "strict", None)),
        ("agents", lambda: F.agent_frame(records), lambda: F._agent_frame(records, None)),
        ("replies", lambda: F.reply_frame(records), lambda: F._reply_frame(records)),
        ("validity", lambda: F.validity_frame(records), lambda: F._validity_frame(records)),
    ):
        first = build()
        first["scribble"] = 1  # a table adding a column must not reach the next caller
        second = build()
        assert "scribble" not in second.columns, name
        pd.testing.assert_frame_equal(second, fresh(), obj=name)
    # new worlds (a different list) are never served the old frames
    records.worlds = records.worlds[:1]
    assert len(F.world_frame(records)) == 1
