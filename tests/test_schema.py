"""The record schema: typed envelopes checked at load, the version in every record,
and the run set of release 0.1.0 (tests/fixtures/run-0.1.0, written before records
had a version) still loading, replaying and re-scoring identically."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import study_dict
from workbench.kinds import kind_of_records
from workbench.records import MANIFEST, STEPS, WORLDS, load_run
from workbench.replay import verify_world
from workbench.schema import SCHEMA_VERSION, RecordError

FIXTURE = Path(__file__).parent / "fixtures" / "run-0.1.0"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """The 0.1.0 records, with their manifest pointing at the fixture's study file here."""
    run = tmp_path / "run"
    run.mkdir()
    for name in (WORLDS, STEPS, MANIFEST):
        shutil.copy(FIXTURE / name, run / name)
    manifest = json.loads((run / MANIFEST).read_text())
    manifest["params"]["path"] = str(FIXTURE / "study.yaml")
    (run / MANIFEST).write_text(json.dumps(manifest))
    return run


def test_the_fixture_is_a_0_1_0_run_set():
    lines = [json.loads(x) for x in (FIXTURE / WORLDS).read_text().splitlines() if x.strip()]
    assert lines and not any("schema_version" in w for w in lines)  # written before the schema
    assert "schema_version" not in (FIXTURE / STEPS).read_text()


def test_0_1_0_records_load_migrated(old_run):
    records = load_run(old_run)
    assert len(records.worlds) == 4 and not records.problems
    assert {w["schema_version"] for w in records.worlds} == {SCHEMA_VERSION}
    assert all(s["schema_version"] == SCHEMA_VERSION for steps in records.steps.values() for s in steps)
    assert {w["world_index"] for w in records.worlds} == {0, 1}
    assert "schema_version" not in (old_run / WORLDS).read_text()  # migration never rewrites the files


def test_0_1_0_records_replay_identically(old_run):
    records = load_run(old_run)
    for w in records.worlds:
        assert verify_world(records, w["world_id"]) == [], w["world_id"]


def test_0_1_0_records_rescore_identically(old_run):
    records = load_run(old_run)
    kind = kind_of_records(records)
    added = {"cross_reads", "cross_reads_task_named", "pairs", "pairs_joint_success",  # issue 22; none changed
             "signalled_note"}  # issue 38
    for w in records.worlds:
        now = kind.world_metrics(w, records.steps[w["world_id"]])
        assert {k: now[k] for k in w["metrics"]} == w["metrics"], w["world_id"]
        assert set(now) - set(w["metrics"]) <= added, set(now) - set(w["metrics"])
    tables = kind.metric_tables(records)
    assert tables["coordination"]["cell_id"].nunique() == 2


def test_new_records_carry_the_schema_version(tmp_path, write_study):
    from workbench.params import load_study
    from workbench.study import run_study

    path = write_study(study_dict(name="v", worlds_per_cell=1))
    run_study(load_study(path), tmp_path / "out")
    world = json.loads((tmp_path / "out" / WORLDS).read_text().splitlines()[0])
    step = json.loads((tmp_path / "out" / STEPS).read_text().splitlines()[0])
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert world["schema_version"] == step["schema_version"] == manifest["schema_version"] == SCHEMA_VERSION


def test_a_record_that_does_not_fit_names_file_record_and_field(old_run):
    lines = (old_run / WORLDS).read_text().splitlines()
    bad = json.loads(lines[1])
    bad["world_index"] = "one"
    lines[1] = json.dumps(bad)
    (old_run / WORLDS).write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=r"worlds\.jsonl record 2: Expected `int`, got `str` - at `\$\.world_index`"):
        load_run(old_run)


def test_a_record_from_a_newer_release_is_refused(old_run):
    lines = (old_run / WORLDS).read_text().splitlines()
    rec = json.loads(lines[0])
    rec["schema_version"] = SCHEMA_VERSION + 1
    lines[0] = json.dumps(rec)
    (old_run / WORLDS).write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match="upgrade the workbench"):
        load_run(old_run)


def test_the_fixture_study_still_loads():
    from workbench.params import load_study

    study = load_study(FIXTURE / "study.yaml")
    recorded = {w["cell_id"] for w in map(json.loads, (FIXTURE / WORLDS).read_text().splitlines())}
    assert {c.cell_id for c in study.cells} == recorded  # the cells (and so their ids) are unchanged
