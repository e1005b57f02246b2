"""Issue 22, part 3: writing in order to be read. reader_signal: none | told |
receipts, what a writer knows of its readers."""
from __future__ import annotations

import re

from tests.conftest import make_study, run_world, scripted
from workbench.metrics.design import design_of_records
from workbench.records import load_run
from workbench.study import run_study
from workbench.worlds.stigmergy.frames import agent_frame
from workbench.worlds.stigmergy.tables import writing_for_readers_table

W = '{"op":"write","key":"$own_key","value":$own_value}'
L = '{"op":"list"}'
READ_PARTNER = '{"op":"read","key":"$partner_key"}'
READ_C = '{"op":"read","key":"C_B"}'
WRONG = '{"op":"submit","answer":0}'


def test_told_adds_the_sentence_and_receipts_count_reads_by_others_never_who(write_study):
    # pair_b writes its key (t=0.5) and reads it back (t=1); pair_a reads it (t=1, 2); pair_b lists at t=1.5, 2, 2.5
    agents = {"pair_b": {"script": [W, '{"op":"read","key":"$own_key"}', L, L, L, WRONG], "latency_s": 0.5},
              "pair_a": {"script": [READ_PARTNER, READ_PARTNER, WRONG], "latency_s": 1.0},
              "solo_1": {"script": [L, WRONG], "latency_s": 0.4}, "solo_2": {"script": [WRONG], "latency_s": 0.3}}
    out = run_world(write_study(scripted(agents, reader_signal="receipts", task_form="digits")))
    steps = out.steps
    b = next(a for a in out.world["agents"] if a["role"] == "pair_b")["agent"]
    lists = [s for s in steps if s["agent"] == b and s["op"] and s["op"]["op"] == "list"]
    key = out.world["tasks"]["tasks"]["pair_b"]["own_key"]
    # by hand: pair_b's own read-back does not count; pair_a's two reads do, whenever they came before the list
    reads_before = [sum(1 for s in steps if s["seq"] < ls["seq"] and s["agent"] != b and s["op"]
                        and s["op"]["op"] == "read" and s["op"]["key"] == key) for ls in lists]
    for ls, n in zip(lists, reads_before):
        assert f"{key} (read {n} times)" in ls["result"]
        assert ls["effect"]["receipts"] == {key: n}
        assert not re.search(r"agent-\d|pair_|solo_|another agent", ls["result"])  # never who read
    assert reads_before[-1] == 2
    # the solo's list shows no receipt for a key it did not write
    solo = next(s for s in steps if s["role"] == "solo_1" and s["op"] and s["op"]["op"] == "list")
    assert "(read" not in solo["result"]

    told = run_world(write_study(scripted(agents, reader_signal="told"), name="told.yaml"))
    assert "Other processes may also read this workspace." in told.world["agents"][0]["system_prompt"]
    none = run_world(write_study(scripted(agents), name="none.yaml"))
    assert "Other processes" not in none.world["agents"][0]["system_prompt"]
    assert all("(read" not in (s["result"] or "") for s in none.steps)


def test_simulated_writers_respond_and_the_table_shows_it(tmp_path):
    study = make_study(tmp_path, [{"model": "sim/diligent", "reader_signal": v} for v in ("none", "told", "receipts")],
                       worlds=20)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    table = writing_for_readers_table(agent_frame(records), design_of_records(records)).set_index("cell_id")
    notes = {c.spec.reader_signal: int(table.at[c.cell_id, "wrote_note:k/n"].split("/")[0]) for c in study.cells}
    assert notes["none"] == 0 and notes["told"] > notes["receipts"] > 0
