"""Bring your own tasks (issue 41 part 4): a pool in the source study's layout (tests/fixtures/collusion-import:
``task/`` with a code manifest and code files, an extraction manifest and sources with ``[ID]`` markers, a data
manifest with a SQLite file and reference SQL, and two sequences) is validated, copied and made usable in a
``sequences_file:``; a broken pool is refused with the file and field named; a sequence naming an id that no pool
holds fails at ``validate`` (check_inputs), not at run time."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from workbench.errors import InputError
from workbench.worlds import collusion as K
from workbench.worlds.collusion import tasks as T
from workbench.worlds.collusion.commands import COMMANDS
from workbench.worlds.collusion.spec import CollusionCell
from workbench.worlds.collusion.tasks import imported
from workbench.worlds.collusion.tasks.sequences import load_sequence_file

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "collusion-import"
SEQ = "sequences/task_sequences_2x3"


@pytest.fixture(autouse=True)
def _no_pool_leaks():
    """Imported pools register process-wide; each test here starts and ends with none."""
    from workbench.worlds.collusion.tasks import imported as _imported

    _imported.forget_pools()
    yield
    _imported.forget_pools()


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "src"
    shutil.copytree(FIXTURE, dest)
    return dest


def _edit(path: Path, index: int, **changes: object) -> None:
    doc = json.loads(path.read_text())
    doc[index].update(changes)
    path.write_text(json.dumps(doc))


def test_the_fixture_round_trips_into_sequences_and_scores(tmp_path: Path):
    index = T.import_task_pool(FIXTURE, tmp_path / "pool")
    assert index["sequences"] == ["task_sequences_2x3"]
    assert sorted(r["family"] for r in index["tasks"]) == ["code-analysis"] * 4 + ["data-search"] * 2 + [
        "record-extraction"] * 2
    seqs = load_sequence_file(tmp_path / "pool" / SEQ)
    assert [(e.family, e.alice, e.bob) for e in seqs[0]] == [
        ("code-analysis", "ca_01_add", "ca_03_max"), ("record-extraction", "text_01_chores", "text_02_bookings"),
        ("data-search", "data_01_escalations", "data_02_escalations")]
    assert T.code_label(T.get_task("ca_02_add")) == "bug" and T.code_label(T.get_task("ca_01_add")) == "no_bug"
    assert json.loads(T.reference_answer(T.get_task("text_01_chores"))) == ["REC01-a1b2c3", "REC01-0a0b0c"]
    assert json.loads(T.reference_answer(T.get_task("data_02_escalations"))) == [
        {"case_id": "SC-01"}, {"case_id": "SC-05"}, {"case_id": "SC-06"}]  # the reference SQL's multi-join rows
    for task_id in ("ca_01_add", "ca_02_add", "text_01_chores", "data_01_escalations"):
        task = T.get_task(task_id)
        ref = T.reference_answer(task)
        assert T.evaluate(task, ref) and T.validate_answer(task.family, task, ref) is None
        bad = T.corrupt_answer(task, ref)
        assert not T.evaluate(task, bad) and T.validate_answer(task.family, task, bad) is None
    data = T.get_task("data_01_escalations")
    # the source's row rule: objects with exactly the answer_key columns, not lists
    assert "row[0] is not an object" in (T.validate_answer(data.family, data, '[["SC-01"]]') or "")
    assert T.evaluate(data, '[{"case_id": "SC-03"}, {"case_id": "SC-01"}]')  # order does not matter
    assert T.task_fingerprint(data) != T.task_fingerprint(T.get_task("data_02_escalations"))
    # twins (one spec_key) never share a sequence
    bad_seq = tmp_path / "pool" / "sequences" / "twins.json"
    bad_seq.write_text(json.dumps({"pairs": [{"tasks": ["ca_01_add", "ca_02_add"]}]}))
    with pytest.raises(InputError, match=r"twins.json.pairs\[0\].tasks\[1\]: task 'ca_02_add' is a twin"):
        load_sequence_file(bad_seq)


def test_an_imported_pool_is_checked_against_its_hashes(tmp_path: Path):
    T.import_task_pool(FIXTURE, tmp_path / "pool")
    src = next((tmp_path / "pool" / "files" / "record-extraction").glob("text_01*"))
    src.write_text(src.read_text() + "[REC01-ffffff] one more line\n")
    with pytest.raises(InputError, match=r"task_pool.json.tasks\[4\].spec.source_path: text_01_chores.txt is "
                                         r"missing or changed since the import"):
        imported.load_index(tmp_path / "pool" / "task_pool.json")


@pytest.mark.parametrize("manifest,index,changes,message", [
    ("code-analysis/task_manifest_code4.json", 1, {"expected_verdict": "pass"},
     r"code-analysis/task_manifest_code4.json\[1\].expected_verdict: 'pass' contradicts is_buggy True"),
    ("code-analysis/task_manifest_code4.json", 2, {"function_name": "biggest"},
     r"task_manifest_code4.json\[2\].function_name: 'biggest' is not defined in ca_03_max.py"),
    ("code-analysis/task_manifest_code4.json", 0, {"task_id": "code-01a"},
     r"task_manifest_code4.json\[0\].task_id: 'code-01a' is also an id of this workbench's own pool"),
    ("code-analysis/task_manifest_code4.json", 0, {"code_path": "task/code-analysis/nowhere.py"},
     r"task_manifest_code4.json\[0\].code_path: 'task/code-analysis/nowhere.py' is not a file inside the pool"),
    ("text-extraction/task_manifest_text2.json", 1, {"reference_items": [{"id": "REC02-000000"}]},
     r"task_manifest_text2.json\[1\].reference_items\[0\].id: 'REC02-000000' is not a record of text_02_bookings.txt"),
    ("text-extraction/task_manifest_text2.json", 0, {"reference_item_count": 3},
     r"task_manifest_text2.json\[0\].reference_item_count: says 3 but reference_items has 2"),
    ("data-search/task_manifest_data_search2.json", 0, {"reference_row_count": 5},
     r"task_manifest_data_search2.json\[0\].reference_row_count: says 5 but reference_sql returns 2 rows"),
    ("data-search/task_manifest_data_search2.json", 1, {"answer_key": ["case_ref"]},
     r"task_manifest_data_search2.json\[1\].answer_key: \['case_ref'\] not among answer_columns"),
    ("data-search/task_manifest_data_search2.json", 1, {"reference_sql": "SELECT nope FROM support_cases"},
     r"task_manifest_data_search2.json\[1\].reference_sql: fails on ops_small.sqlite"),
    ("data-search/task_manifest_data_search2.json", 0, {"search_prompt": ""},
     r"task_manifest_data_search2.json\[0\].search_prompt: must not be empty"),
])
def test_a_broken_pool_is_refused_naming_file_and_field(tmp_path: Path, manifest: str, index: int,
                                                         changes: dict, message: str):
    src = _copy(tmp_path)
    _edit(src / "task" / manifest, index, **changes)
    with pytest.raises(InputError, match=message):
        T.import_task_pool(src, tmp_path / "out")
    assert not (tmp_path / "out" / "task_pool.json").exists()


def test_the_command_imports_and_refuses_a_folder_it_would_overwrite(tmp_path: Path, capsys):
    [cmd] = [c for c in COMMANDS if c.name == "import-tasks"]
    parser = argparse.ArgumentParser()
    cmd.configure(parser)
    assert cmd.run(parser.parse_args([str(FIXTURE / "task"), "--out", str(tmp_path / "pool")])) == 0
    assert "8 tasks imported" in capsys.readouterr().err
    other = tmp_path / "busy"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="--out .*busy: exists and is not an imported pool"):
        cmd.run(parser.parse_args([str(FIXTURE), "--out", str(other)]))


def test_unknown_task_ids_fail_at_validate_and_imported_ones_pass(tmp_path: Path):
    T.import_task_pool(FIXTURE, tmp_path / "pool")
    cell = CollusionCell(model="sim-collusion/honest", episodes=3, sequences=2, sequences_file=f"pool/{SEQ}")
    K.KIND.check_inputs(cell, tmp_path, 2)  # the imported ids resolve
    bad = tmp_path / "pool" / "sequences" / "bad"
    bad.mkdir()
    (bad / "rep001_sampled_manifest.json").write_text(json.dumps({"pairs": [{"tasks": ["ca_01_add", "ca_99_gone"]}]}))
    cell = CollusionCell(model="sim-collusion/honest", episodes=1, sequences_file="pool/sequences/bad")
    with pytest.raises(InputError, match=r"sequences_file: rep001_sampled_manifest.json.pairs\[0\].tasks\[1\]: "
                                         r"no task 'ca_99_gone'"):
        K.KIND.check_inputs(cell, tmp_path, 1)
