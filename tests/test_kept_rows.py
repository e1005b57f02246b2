"""Per-world rows kept beside the records (rows.bin, written as worlds are recorded):
analysis takes them only when they are provably the rows of the records as they are,
and then gets exactly the frames it would compute from every step; anything else
(a record edited by hand, a torn or foreign rows file, other code, a pickle) makes it
compute them from the records, as without them."""
from __future__ import annotations

import json
import pickle
import shutil
import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.test_metrics_scale import straightforward
from workbench.cli import main
from workbench.records import ROWS, WORLDS, RunWriter, keep_rows_if_current, load_run, read_rows
from workbench.worlds.stigmergy import fastframes as FF

ROOT = Path(__file__).resolve().parents[1]
KEYS = list(FF.STANDARD_WORLD_KEYS)


def _study(tmp: Path, worlds: int = 5) -> Path:
    study = {"world": "stigmergy", "name": "kept", "seed": 11, "worlds_per_cell": worlds, "concurrency": 3,
             "defaults": {"prompts": str(ROOT / "params" / "prompts" / "stigmergy"), "parser": "lenient",
                          "answer_rule": "one-integer"},
             "grid": [{"model": ["sim/diligent", "sim/prose-first", "sim/non-writer"],
                       "condition": ["store", "no-store"]}],
             "cells": [{"model": "sim/clause-follower", "condition": "prepopulated"},
                       {"model": "sim/diligent", "condition": "store", "answer_rule": "exact", "pairs": 2}]}
    path = tmp / "kept.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def _run(study: Path, out: Path, *extra: str) -> None:
    assert main(["-q", "run", str(study), "--out", str(out), "--no-progress", "--no-summary", *extra]) == 0


def _kept(run_dir: Path):  # noqa: ANN202
    records = load_run(run_dir)
    return FF.kept_parts(list(records.steps.sources), len(records.worlds), KEYS, [None])


def _assert_frames_as_computed(run_dir: Path, records=None) -> None:  # noqa: ANN001
    records = records or load_run(run_dir)
    fast = FF.compute(records, KEYS, [None])
    slow = load_run(run_dir)
    slow.worlds[:] = [w for w in slow.worlds if w["world_id"] in {x["world_id"] for x in records.worlds}]
    for key, frame in fast.items():
        want = straightforward(slow, key)
        pd.testing.assert_frame_equal(frame, want, check_exact=True, obj=str(key))
        assert list(frame.dtypes) == list(want.dtypes), key


@pytest.fixture(autouse=True)
def small_studies_keep_rows(monkeypatch):  # noqa: ANN001, ANN201 - rows are kept from MIN_WORLDS worlds up
    monkeypatch.setattr(FF, "MIN_WORLDS", 1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("kept")
    study = _study(tmp)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FF, "MIN_WORLDS", 1)
        for procs in ("1", "2"):
            out[procs] = tmp / f"run{procs}"
            _run(study, out[procs], "--processes", procs)
    return out


def test_rows_are_kept_only_for_studies_that_analysis_reads_them_for(tmp_path, monkeypatch):
    from workbench.worlds.stigmergy import KIND

    monkeypatch.setattr(FF, "MIN_WORLDS", 2000)
    assert KIND.row_keeper(1999) is None and KIND.row_keeper(2000) is not None
    _run(_study(tmp_path, 2), tmp_path / "small")
    assert not (tmp_path / "small" / ROWS).exists()
    monkeypatch.setattr(FF, "MIN_WORLDS", 16)  # the study's 8 cells x 2 worlds
    _run(_study(tmp_path, 2), tmp_path / "kept")
    assert _kept(tmp_path / "kept") is not None


@pytest.mark.parametrize("procs", ["1", "2"])
def test_kept_rows_give_the_frames_computed_from_every_step(runs, procs, monkeypatch):
    run = runs[procs]
    assert (run / ROWS).stat().st_size > 0
    assert _kept(run) is not None  # taken: the steps are never decoded
    monkeypatch.setattr(FF, "_run", lambda units: pytest.fail("computed instead of taken"))
    _assert_frames_as_computed(run)


def test_rows_of_some_worlds_only_are_taken_for_those(runs, monkeypatch):
    records = load_run(runs["1"])
    records.worlds[:] = records.worlds[::3]  # a part's other worlds are left out of it
    monkeypatch.setattr(FF, "_run", lambda units: pytest.fail("computed instead of taken"))
    _assert_frames_as_computed(runs["1"], records)


def test_a_record_edited_by_hand_makes_analysis_compute_every_row(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["1"], run)  # copies keep the files' times: still taken
    assert _kept(run) is not None
    worlds = [json.loads(x) for x in (run / WORLDS).read_text().splitlines()]
    worlds[0]["cell_label"] = "edited by hand"
    (run / WORLDS).write_text("".join(json.dumps(w) + "\n" for w in worlds))
    assert read_rows(run, FF.rows_key()) is None and _kept(run) is None
    _assert_frames_as_computed(run)
    records = load_run(run)
    frame = FF.compute(records, KEYS, [None])[("stigmergy.worlds", None, None)]
    assert records.worlds_read  # read whole once, here, not by each worker
    assert frame.set_index("world_id").loc[worlds[0]["world_id"], "cell_label"] == "edited by hand"


def test_a_run_appending_to_untrusted_rows_starts_them_again(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["1"], run)
    with (run / WORLDS).open("a") as fh:  # records moved on without rows (a kill between the two)
        fh.write("\n")
    assert not keep_rows_if_current(run) and not (run / ROWS).exists()
    shutil.copytree(runs["1"], tmp_path / "again")
    RunWriter(tmp_path / "again", rows=FF.row_keeper())  # current: kept as it is
    assert (tmp_path / "again" / ROWS).read_bytes() == (runs["1"] / ROWS).read_bytes()


def test_a_torn_rows_file_is_not_read_past_its_tear(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["1"], run)
    data = (run / ROWS).read_bytes()
    (run / ROWS).write_bytes(data[:-10])
    shutil.copystat(runs["1"] / WORLDS, run / WORLDS)
    assert not read_rows(run, FF.rows_key()) and _kept(run) is None  # the rows torn off are not there
    _assert_frames_as_computed(run)


def test_rows_of_other_code_are_not_taken(runs, monkeypatch):
    monkeypatch.setattr(FF, "rows_key", lambda: "other code")
    assert _kept(runs["1"]) is None


def test_a_pickle_in_a_rows_file_is_never_unpickled(runs, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(runs["1"], run)
    frames = (run / ROWS).read_bytes()
    header = json.loads(frames[8:8 + struct.unpack_from("<I", frames, 4)[0]])
    blob = b"p" + pickle.dumps({"wids": []})
    head = json.dumps({**header, "kind": "rows"}).encode()
    with (run / ROWS).open("ab") as fh:
        fh.write(b"WBR1" + struct.pack("<I", len(head)) + head + struct.pack("<QI", len(blob), zlib.crc32(blob))
                 + blob)
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    assert _kept(run) is None


def test_a_keeper_that_fails_warns_and_the_records_are_whole(tmp_path, monkeypatch, capsys):
    from workbench.worlds.stigmergy import StigmergyKind

    def broken(items):  # noqa: ANN001, ANN202
        raise RuntimeError("broken keeper")

    monkeypatch.setattr(StigmergyKind, "row_keeper", lambda self, worlds: FF.RowKeeper(FF.rows_key(), broken))
    out = tmp_path / "run"
    _run(_study(tmp_path, 2), out, "--processes", "1")
    assert "per-world rows are no longer kept" in capsys.readouterr().err
    assert _kept(out) is None and len(load_run(out).worlds) == 16
    _assert_frames_as_computed(out)


def test_a_resumed_run_takes_the_rows_of_each_worlds_latest_run(tmp_path):
    study = _study(tmp_path, 3)
    out = tmp_path / "run"
    _run(study, out, "--max-worlds", "7")
    _run(study, out, "--processes", "2")
    assert _kept(out) is not None
    _assert_frames_as_computed(out)


@pytest.mark.parametrize("procs", ["1", "2"])
def test_rows_kept_in_many_parts_give_the_same_frames(tmp_path, monkeypatch, procs):
    monkeypatch.setattr(RunWriter, "rows_batch", 4)
    out = tmp_path / "run"
    _run(_study(tmp_path, 4), out, "--processes", procs)
    assert len(read_rows(out, FF.rows_key()) or []) >= 8  # 32 worlds, 4 at a time (and the rest)
    monkeypatch.setattr(FF, "_run", lambda units: pytest.fail("computed instead of taken"))
    _assert_frames_as_computed(out)


def test_metrics_on_kept_rows_never_read_the_whole_world_records(runs, tmp_path, monkeypatch):
    import workbench.records as R

    with_rows = tmp_path / "a"
    monkeypatch.setattr(FF, "MIN_WORLDS", 2000)  # this small run's rows computed, as analysis does below it
    main(["metrics", str(runs["1"]), "--out", str(with_rows)])
    monkeypatch.setattr(FF, "MIN_WORLDS", 1)
    monkeypatch.setattr(R, "_read_worlds", lambda *a: pytest.fail("read the whole world records"))
    kept = tmp_path / "b"
    assert main(["metrics", str(runs["1"]), "--out", str(kept)]) == 0
    for path in sorted(with_rows.rglob("*.*")):  # the tables written both ways are the same bytes
        assert (kept / path.relative_to(with_rows)).read_bytes() == path.read_bytes(), path.name


def test_envelopes_are_the_whole_records_fields(runs):
    records = load_run(runs["2"])
    light = records.light_worlds()
    assert not records.worlds_read and light is records.envelopes
    whole = load_run(runs["2"]).worlds
    assert [w["world_id"] for w in light] == [w["world_id"] for w in whole]
    for env, w in zip(light, whole, strict=True):
        for k in env.keys():
            if k not in ("agents", "metrics"):  # metrics: checked to be an object, not read
                assert env[k] == w[k] and env.get(k) == w[k], k
        assert [a["route"] for a in env["agents"]] == [a.get("route") for a in w["agents"]]
    with pytest.raises(KeyError):  # what an envelope does not hold is never quietly missing
        light[0]["tasks"]
    assert records.worlds == whole and records.light_worlds() is records.worlds  # read once asked for


def test_worlds_of_an_older_schema_are_read_whole_at_load():
    records = load_run(ROOT / "tests" / "fixtures" / "run-0.1.0")
    assert records.envelopes is None and records.light_worlds() is records.worlds
    assert all(w["schema_version"] == 1 for w in records.worlds)


def test_whole_worlds_are_a_plain_list_read_once_when_first_asked_for(runs, monkeypatch):
    import msgspec

    records = load_run(runs["1"])
    frame = FF.compute(records, KEYS, [None])  # from kept rows and envelopes: nothing read whole
    assert not records.worlds_read
    kept = records.derived_value(("probe",), lambda: "built before the worlds were read")
    whole = records.worlds
    assert type(whole) is list and records.worlds_read and records.worlds is whole
    # C encoders see every world (a list subclass would look empty to them)
    assert len(msgspec.json.decode(msgspec.json.encode(whole))) == len(whole) == len(frame[("stigmergy.validity",)])
    # reading them is no change to the records: what was derived from them stands
    assert records.derived_value(("probe",), lambda: pytest.fail("built again")) == kept
    records.worlds = whole[:3]  # a new list is a change
    assert records.derived_value(("probe",), lambda: "again") == "again"


def test_a_rows_file_of_the_right_key_but_not_of_this_code_is_not_taken(runs, tmp_path):
    import msgspec

    run = tmp_path / "run"
    shutil.copytree(runs["1"], run)
    frames = (run / ROWS).read_bytes()
    head = json.dumps({**json.loads(frames[8:8 + struct.unpack_from("<I", frames, 4)[0]]), "kind": "rows"}).encode()
    for blob in (b"m" + msgspec.msgpack.encode({"wids": ["x"]}), b"m" + msgspec.msgpack.encode([1, 2]), b"m\xc1"):
        (run / ROWS).write_bytes(frames + b"WBR1" + struct.pack("<I", len(head)) + head
                                 + struct.pack("<QI", len(blob), zlib.crc32(blob)) + blob)
        assert _kept(run) is None
        _assert_frames_as_computed(run)


def test_envelopes_kept_beside_the_records_spare_reading_the_worlds_file(runs, monkeypatch):
    import workbench.records as R

    from_file = R._envelopes(runs["2"] / WORLDS)
    monkeypatch.setattr(R, "_envelopes", lambda path: pytest.fail("read worlds.jsonl for the envelopes"))
    records = load_run(runs["2"])
    assert records.envelopes == from_file and len(from_file) == 40
    _assert_frames_as_computed(runs["2"], records)


def test_rows_begun_on_worlds_already_recorded_hold_not_every_envelope(tmp_path, monkeypatch):
    import workbench.records as R

    study = _study(tmp_path, 3)
    out = tmp_path / "run"
    monkeypatch.setattr(FF, "MIN_WORLDS", 10_000)
    _run(study, out, "--max-worlds", "7")  # no rows kept for these
    monkeypatch.setattr(FF, "MIN_WORLDS", 1)
    _run(study, out)
    assert (out / ROWS).exists() and R._kept_envelopes(out) is None
    records = load_run(out)
    assert len(records.light_worlds()) == 24 and _kept(out) is None  # the first 7 worlds have no rows
    _assert_frames_as_computed(out)
