"""Imported episode sequences: a manifest in the source study's format (a folder with its
``sampled_manifest_record.json`` and ``repNNN_sampled_manifest.json`` files) imports, and a
malformed one is refused with a message that names the field. The fixture is synthetic: this
workbench's own task ids written in that format."""
from __future__ import annotations

import asyncio
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from workbench.kinds import WorldContext
from workbench.models.factory import make_client
from workbench.worlds import collusion as K
from workbench.worlds.collusion import tasks as T
from workbench.worlds.collusion.spec import CollusionCell
from workbench.worlds.collusion.tasks.sequences import SequenceFileError, load_sequence_file
from workbench.worlds.collusion.world import episode_sequence

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "collusion-sequences"
EXPECTED = [
    [("record-extraction", "rec-20", "rec-10"), ("code-analysis", "code-01a", "code-04a"),
     ("code-analysis", "code-10b", "code-12a"), ("data-search", "data-20", "data-10")],
    [("code-analysis", "code-05a", "code-14a"), ("record-extraction", "rec-08", "rec-01"),
     ("data-search", "data-07", "data-25"), ("code-analysis", "code-11a", "code-07a")],
]


def flat(seqs: Any) -> list[list[tuple[str, str, str]]]:
    return [[(e.family, e.alice, e.bob) for e in seq] for seq in seqs]


def test_folder_record_and_rep_files_import_alike() -> None:
    assert flat(load_sequence_file(FIXTURE)) == EXPECTED
    assert flat(load_sequence_file(FIXTURE / "sampled_manifest_record.json")) == EXPECTED
    assert flat(load_sequence_file(FIXTURE / "rep002_sampled_manifest.json")) == [EXPECTED[1]]


def test_folder_without_record_reads_rep_files_in_order(tmp_path: Path) -> None:
    for f in FIXTURE.glob("rep*_sampled_manifest.json"):
        shutil.copy(f, tmp_path / f.name)
    assert flat(load_sequence_file(tmp_path)) == EXPECTED


def record() -> dict[str, Any]:
    return json.loads((FIXTURE / "sampled_manifest_record.json").read_text())


def _set(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


_DELETE = object()
MALFORMED = [
    (["runs", 0, "pairs", 1, "task_ids", 1], "ca_08_phone", "runs[0].pairs[1].task_ids[1]", "no task 'ca_08_phone'"),
    (["runs", 0, "pairs", 2, "task_ids"], ["code-10b"], "runs[0].pairs[2].task_ids", "two task ids"),
    (["runs", 1, "pairs", 3, "task_ids", 1], "code-11b", "runs[1].pairs[3].task_ids[1]", "twin"),
    (["runs", 1, "pairs", 1, "task_ids", 1], "rec-08", "runs[1].pairs[1].task_ids[1]", "already appears"),
    (["runs", 0, "pairs", 0, "task_ids", 1], "data-01", "runs[0].pairs[0]", "different families"),
    (["runs", 0, "pairs", 3, "task_type"], "code_analysis", "runs[0].pairs[3].task_type", "data-search"),
    (["runs", 0, "pairs", 3, "task_type"], "poetry", "runs[0].pairs[3].task_type", "unknown task type"),
    (["runs", 0, "pairs", 2, "episode"], 7, "runs[0].pairs[2].episode", "expected 3"),
    (["runs", 1, "pair_count"], 5, "runs[1].pair_count", "says 5"),
    (["runs", 1, "rep"], 1, "runs[1].rep", "already used"),
    (["runs", 0, "pairs", 0, "task_ids"], _DELETE, "runs[0].pairs[0].task_ids", "missing"),
    (["runs"], [], ".runs", "non-empty"),
]


@pytest.mark.parametrize(("path", "value", "field", "why"), MALFORMED, ids=[m[2] + ":" + m[3] for m in MALFORMED])
def test_malformed_record_names_the_field(tmp_path: Path, path: list[Any], value: Any, field: str, why: str) -> None:
    bad = tmp_path / "sampled_manifest_record.json"
    bad.write_text(json.dumps(_set(record(), path, value)))
    with pytest.raises(SequenceFileError) as err:
        load_sequence_file(tmp_path)
    msg = str(err.value)
    assert field in msg and why in msg, msg
    assert msg.startswith("sampled_manifest_record.json"), msg


def test_malformed_rep_file_and_json_name_the_place(tmp_path: Path) -> None:
    rep = tmp_path / "rep001_sampled_manifest.json"
    rep.write_text(json.dumps({"pairs": [{"tasks": ["rec-01", "rec-02"], "note": "x"}]}))
    with pytest.raises(SequenceFileError, match=r"rep001_sampled_manifest.json.pairs\[0\]: unknown field\(s\) note"):
        load_sequence_file(rep)
    rep.write_text('{"pairs": [')
    with pytest.raises(SequenceFileError, match="not valid JSON .line 1"):
        load_sequence_file(rep)
    with pytest.raises(SequenceFileError, match="sequences_file: .* does not exist"):
        load_sequence_file(tmp_path / "nothing.json")


def test_cell_plays_imported_sequences_and_checks_their_length(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "seqs")
    cell = CollusionCell(episodes=4, sequences_file="seqs")
    assert flat([episode_sequence(cell, 1, tmp_path)]) == [EXPECTED[1]]
    with pytest.raises(SequenceFileError, match="world index 2 needs at least 3"):
        episode_sequence(cell, 2, tmp_path)
    longer = CollusionCell(episodes=3, warmup=2, sequences_file="seqs")
    with pytest.raises(SequenceFileError, match="warmup \\+ episodes = 5"):
        episode_sequence(longer, 0, tmp_path)
    assert all(T.get_task(e.alice).family == e.family for e in episode_sequence(cell, 0, tmp_path))


def test_world_runs_the_imported_tasks() -> None:
    cell = CollusionCell(episodes=4, sequences_file=str(FIXTURE), model="sim-collusion/pragmatic")

    def fac(route: str, slot: str, seed: int, options: dict[str, Any]):  # noqa: ANN202
        return make_client(route, seed=seed, **options)

    out = asyncio.run(K.KIND.run_world(cell, WorldContext(world_id="w-0001", cell_id="c", world_index=1, seed=5,
                                                          run=1, base_dir=ROOT / "params", client_factory=fac)))
    text = json.dumps(out.world, default=str)
    for _family, alice, bob in EXPECTED[1]:
        assert alice in text and bob in text


def test_imported_sequences_are_part_of_the_locked_design(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "seqs")
    files = K.KIND.design_files(CollusionCell(episodes=4, sequences_file="seqs"), tmp_path)
    assert {f.name for f in files} >= {"sampled_manifest_record.json", "rep001_sampled_manifest.json",
                                       "rep002_sampled_manifest.json", "sequences.py"}
    one = K.KIND.design_files(CollusionCell(episodes=4, sequences_file="seqs/rep001_sampled_manifest.json"), tmp_path)
    assert (tmp_path / "seqs" / "rep001_sampled_manifest.json") in one
