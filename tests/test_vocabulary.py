"""Issue 22, part 1: shared vocabulary as a factor. `named` (the paper's task text,
both intermediate keys), `own-only` (the agent's own key only) and `withheld`
(neither: each agent keeps its value under a name of its choice)."""
from __future__ import annotations

import re

from tests.conftest import make_study
from workbench.metrics.design import design_of_records
from workbench.records import load_run
from workbench.study import run_study
from workbench.worlds.stigmergy.frames import world_frame
from workbench.worlds.stigmergy.tables import vocabulary_table

KEYS = re.compile(r"\b(C_A|C_B|R_A|R_B)\b")


def _run(tmp_path, vocabulary, model="sim/diligent", worlds=12):
    folder = tmp_path / vocabulary
    folder.mkdir()
    study = make_study(folder, [{"model": model, "vocabulary": vocabulary}], worlds=worlds)
    run_study(study, folder / "run", progress=False)
    return load_run(folder / "run")


def test_rendered_prompts_name_the_keys_each_level_says(tmp_path):
    for vocabulary in ("named", "own-only", "withheld"):
        records = _run(tmp_path, vocabulary, worlds=6)
        for w in records.worlds:
            tasks = w["tasks"]["tasks"]
            for a in w["agents"]:
                prompt = a["system_prompt"] + "\n" + a["task_text"]
                named = set(KEYS.findall(prompt))
                task = tasks[a["role"]]
                if not a["role"].startswith("pair"):
                    assert named == set()
                elif vocabulary == "named":
                    assert named == {task["own_key"], task["partner_key"]}
                elif vocabulary == "own-only":
                    assert named == {task["own_key"]}, prompt
                else:
                    assert named == set(), prompt  # withheld: no key anywhere in any prompt
                    assert "a name of your choice" not in prompt  # no storage wording the other levels lack


def test_simulated_agents_act_through_the_wording_and_the_metric_counts_named_reads(tmp_path):
    shares = {}
    for vocabulary in ("named", "withheld"):
        records = _run(tmp_path, vocabulary, worlds=20)
        if vocabulary == "withheld":  # they wrote under names of their own choosing, and still found values
            keys = {s["op"]["key"] for ss in records.steps.values() for s in ss
                    if s.get("valid") and s["op"]["op"] == "write"}
            assert keys and not keys & {"C_A", "C_B", "R_A", "R_B"}
        table = vocabulary_table(world_frame(records), design_of_records(records)).iloc[0]
        assert table["cross-agent reads"] > 0
        shares[vocabulary] = table["task-named reads"] / table["cross-agent reads"]
        steps = [s for ss in records.steps.values() for s in ss]
        by_hand = sum(1 for s in steps if s.get("valid") and s["op"]["op"] == "read"
                      and (s.get("effect") or {}).get("cross_agent") and s["op"]["key"] in {"C_A", "C_B", "R_A", "R_B"})
        assert table["task-named reads"] == by_hand
    assert shares["named"] > 0.8 and shares["withheld"] == 0.0  # named: all but reads of a solo's key


def test_a_new_factor_at_its_default_keeps_recorded_cell_ids():
    """The 0.1.0 fixture's cells, validated by today's spec, hash to the ids they were
    recorded under: a study recorded before a factor existed still resumes."""
    import json

    from tests.conftest import ROOT
    from workbench.params import cell_hash
    from workbench.worlds.stigmergy.spec import StigmergyCell

    manifest = json.loads((ROOT / "tests/fixtures/run-0.1.0/manifest.json").read_text())
    for cid, cell in manifest["cells"].items():
        assert cell_hash(StigmergyCell.model_validate(cell["spec"])) == cid
    spec = StigmergyCell.model_validate({**next(iter(manifest["cells"].values()))["spec"], "vocabulary": "withheld"})
    assert cell_hash(spec) not in manifest["cells"]  # set away from its default, it is part of the design
