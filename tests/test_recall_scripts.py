"""Recall-world scenario scripts: validation errors, the shipped set, the generator,
and the retrieval mechanism each authority-collapse probe is designed around."""
from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from workbench.inputs import InputFileError
from workbench.worlds.recall.domains import DOMAINS, ROLE_BRIEFS, role_authority
from workbench.worlds.recall.generator import TOPICS, generate_all_scripts, generate_script
from workbench.worlds.recall.scripts import (
    FAILURE_MODES,
    Script,
    ScriptError,
    answer_matches,
    load_script,
    load_scripts,
    normalise_answer,
    script_from_dict,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "params" / "recall" / "scripts"


# ------------------------------------------------------------------ helpers

def _turn(n: int, role: str, content: str, **kw: Any) -> dict[str, Any]:
    base = {
        "turn": n, "role": role, "content": content, "is_recall": False, "target_fact_id": None,
        "ground_truth": [], "recall_query": None, "failure_mode": "", "write_to_memory": False,
    }
    base.update(kw)
    return base


def valid() -> dict[str, Any]:
    return {
        "script_id": "t_01",
        "domain": "legal",
        "initial_facts": [
            {"id": "F1", "text": "The brief is due on July 22, 2026.", "tier": "structural", "authority_level": 1.0},
            {"id": "F2", "text": "The hearing is in courtroom 4B.", "tier": "contextual", "authority_level": 0.6},
        ],
        "turns": [
            _turn(1, "user", "The matter file is open."),
            _turn(2, "paralegal", "Docket note: the brief is due on June 30, 2026.", write_to_memory=True, fact_id="F1"),
            _turn(3, "associate", "When is the brief due?", is_recall=True, target_fact_id="F1",
                  ground_truth=["July 22, 2026"], recall_query="When is the brief due?", failure_mode="authority_collapse"),
        ],
    }


def error_of(data: Any, source: str = "case.json") -> str:
    with pytest.raises(ScriptError) as info:
        script_from_dict(data, source)
    assert isinstance(info.value, InputFileError)
    return str(info.value)


# ------------------------------------------------------------------ domains

def test_domains_and_authority() -> None:
    assert set(DOMAINS) == {"legal", "medical", "finance"}
    assert role_authority("legal", "client_rep") == 0.2
    assert role_authority("medical", "patient") == 0.0
    assert role_authority("finance", "risk_officer") == 0.85
    assert role_authority("finance", "user") == 0.5
    for domain, roles in DOMAINS.items():
        assert len(roles) == 5 and set(ROLE_BRIEFS[domain]) == set(roles)
    with pytest.raises(KeyError, match="known roles: senior_lawyer"):
        role_authority("legal", "judge")
    with pytest.raises(KeyError, match="known domains"):
        role_authority("maritime", "captain")


# ------------------------------------------------------------------ validation

def _teams() -> dict[str, Any]:
    import yaml

    from workbench.worlds.recall.domains import DOMAINS_FILE

    return yaml.safe_load(DOMAINS_FILE.read_text(encoding="utf-8"))


def test_roles_and_authorities_are_data_read_from_the_packaged_file() -> None:
    from workbench.worlds.recall.domains import DOMAINS_FILE, TEAMS, load_domains

    assert Path(TEAMS.path) == DOMAINS_FILE and DOMAINS_FILE.suffix == ".yaml"
    again = load_domains(DOMAINS_FILE)
    assert {d: dict(r) for d, r in again.authority.items()} == {d: dict(r) for d, r in DOMAINS.items()}
    assert (again.narrator, again.narrator_authority, again.record) == ("user", 0.5, "record")


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d["domains"]["legal"]["paralegal"].update(authority=1.4),
     r"domains\.legal\.paralegal\.authority: expected a number from 0 to 1 \(got 1\.4\)"),
    (lambda d: d["domains"]["legal"]["paralegal"].update(authority="high"),
     r"domains\.legal\.paralegal\.authority: expected a number from 0 to 1 \(got 'high'\)"),
    (lambda d: d["domains"]["medical"]["nurse"].pop("brief"), r"domains\.medical\.nurse\.brief: required field is missing"),
    (lambda d: d["domains"]["medical"]["nurse"].update(brief=" "), r"domains\.medical\.nurse\.brief: expected a non-empty string"),
    (lambda d: d["domains"]["finance"]["trader"].update(rank=2), r"domains\.finance\.trader\.rank: unknown field"),
    (lambda d: d["domains"]["finance"].update({"Head Trader": {"authority": 1, "brief": "x"}}),
     r"domains\.finance\.Head Trader: expected a role name"),
    (lambda d: d["domains"]["finance"].update({"user": {"authority": 1, "brief": "x"}}),
     r"domains\.finance\.user: 'user' is reserved"),
    (lambda d: d["domains"].update(maritime={"captain": {"authority": 1, "brief": "x"}}),
     r"domains\.maritime: expected a team of at least 2 roles"),
    (lambda d: d["narrator"].update(authority=None), r"narrator\.authority: expected a number from 0 to 1"),
    (lambda d: d.pop("record"), r"record: required field is missing"),
    (lambda d: d.update(teams=[]), r"teams: unknown field"),
])
def test_a_bad_teams_file_names_the_file_and_field(tmp_path: Path, edit: Any, expected: str) -> None:
    import yaml

    from workbench.worlds.recall.domains import DomainsError, load_domains

    data = _teams()
    edit(data)
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(DomainsError, match=re.escape(str(path)) + ": " + expected) as info:
        load_domains(path)
    assert isinstance(info.value, InputFileError)


def test_a_teams_file_that_is_missing_or_not_yaml(tmp_path: Path) -> None:
    from workbench.worlds.recall.domains import DomainsError, load_domains

    with pytest.raises(DomainsError, match="nope.yaml: file not found"):
        load_domains(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains: [legal\n", encoding="utf-8")
    with pytest.raises(DomainsError, match=r"bad\.yaml: line \d+, column \d+: not valid YAML"):
        load_domains(bad)


def test_a_value_must_occur_in_its_text_and_name_its_fact() -> None:
    ok = valid()
    ok["initial_facts"][0]["value"] = "July 22, 2026"
    ok["turns"][1]["value"] = "June 30, 2026"
    s = script_from_dict(ok)
    assert s.initial_facts[0].value == "July 22, 2026" and s.turns[1].value == "June 30, 2026" and s.turns[0].value is None
    assert script_from_dict(s.to_dict()) == s and "value" not in s.to_dict()["turns"][0]
    bad = valid()
    bad["initial_facts"][0]["value"] = "July 2, 2026"
    assert "case.json: initial_facts[0].value: the value 'July 2, 2026' does not occur in the text" in error_of(bad)
    bad = valid()
    bad["turns"][1].update(value="June 30, 2026", fact_id=None)
    assert "turns[1] (turn 2).value: a statement's value needs the fact it is about" in error_of(bad)
    bad = valid()
    bad["turns"][2]["value"] = "July 22, 2026"
    bad["turns"][2]["content"] = "Is it July 22, 2026?"
    assert "turns[2] (turn 3).value: a recall turn states no value" in error_of(bad)


def test_valid_script_parses() -> None:
    s = script_from_dict(valid())
    assert s.script_id == "t_01" and s.domain == "legal" and s.path is None
    assert [f.id for f in s.initial_facts] == ["F1", "F2"]
    (r,) = s.recalls()
    assert r.turn == 3 and r.ground_truth == ("July 22, 2026",) and r.failure_mode == "authority_collapse"
    assert s.turns[1].fact_id == "F1" and s.writes_about("F1") == [s.turns[1]]
    assert script_from_dict(s.to_dict()) == s


def mutate(path: list[Any], value: Any = None, delete: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(valid())
    obj: Any = data
    for key in path[:-1]:
        obj = obj[key]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return data


@pytest.mark.parametrize("path,value,delete,expected", [
    (["script_id"], None, True, "case.json: script_id: required field is missing"),
    (["turns", 2, "content"], None, True, "case.json: turns[2] (turn 3).content: required field is missing"),
    (["turns", 1, "turn"], None, True, "case.json: turns[1].turn: required field is missing"),
    (["turns", 1, "is_recall"], "no", False, "case.json: turns[1] (turn 2).is_recall: expected true or false (got \"no\")"),
    (["turns", 1, "turn"], "2", False, "case.json: turns[1].turn: expected a whole number >= 1 (got \"2\")"),
    (["turns", 1, "turn"], 0, False, "turns[1].turn: expected a whole number >= 1 (got 0)"),
    (["domain"], "maritime", False, "case.json: domain: unknown domain 'maritime' (expected one of: legal, medical, finance)"),
    (["turns", 1, "role"], "judge", False, "case.json: turns[1] (turn 2).role: unknown role 'judge' for domain 'legal'"),
    (["turns", 2, "ground_truth"], [], False,
     "case.json: turns[2] (turn 3).ground_truth: expected a non-empty list of accepted answers (got [])"),
    (["turns", 2, "ground_truth"], "July 22, 2026", False, "turns[2] (turn 3).ground_truth: expected a list of accepted answer strings"),
    (["turns", 2, "target_fact_id"], None, False, "case.json: turns[2] (turn 3).target_fact_id: a recall turn needs the id of the fact"),
    (["turns", 2, "target_fact_id"], "F9", False, "case.json: turns[2] (turn 3).target_fact_id: no initial fact 'F9' (known: F1, F2)"),
    (["turns", 2, "recall_query"], "", False, "case.json: turns[2] (turn 3).recall_query: a recall turn needs a non-empty recall_query"),
    (["turns", 2, "recall_query"], None, False, "turns[2] (turn 3).recall_query: a recall turn needs a non-empty recall_query"),
    (["turns", 2, "failure_mode"], "", False, "case.json: turns[2] (turn 3).failure_mode: a recall turn needs a failure mode"),
    (["turns", 2, "failure_mode"], "amnesia", False, "case.json: turns[2] (turn 3).failure_mode: unknown failure mode 'amnesia'"),
    (["turns", 2, "role"], "user", False, "turns[2] (turn 3).role: a recall turn must be spoken by a team role"),
    (["turns", 2, "write_to_memory"], True, False, "turns[2] (turn 3).write_to_memory: a recall turn is a question"),
    (["turns", 1, "ground_truth"], ["x"], False, "turns[1] (turn 2).ground_truth: only recall turns have accepted answers"),
    (["turns", 1, "fact_id"], "F7", False, "turns[1] (turn 2).fact_id: no initial fact 'F7'"),
    (["turns", 1, "grund_truth"], [], False, "turns[1] (turn 2).grund_truth: unknown field"),
    (["turns", 2, "turn"], 2, False, "case.json: turns[2] (turn 2).turn: turn numbers must strictly increase (previous turn is 2)"),
    (["initial_facts", 1, "id"], "F1", False, "case.json: initial_facts[1].id: duplicate fact id 'F1'"),
    (["initial_facts", 0, "authority_level"], 1.5, False,
     "case.json: initial_facts[0].authority_level: expected a number from 0 to 1 (got 1.5)"),
    (["initial_facts", 0, "authority_level"], True, False, "initial_facts[0].authority_level: expected a number from 0 to 1 (got true)"),
    (["initial_facts", 0, "text"], None, True, "case.json: initial_facts[0].text: required field is missing"),
    (["turns"], [], False, "case.json: turns: expected a non-empty list of turns (got [])"),
])
def test_malformed_scripts_name_file_turn_and_field(path: list[Any], value: Any, delete: bool, expected: str) -> None:
    assert expected in error_of(mutate(path, value, delete))


def test_recall_must_be_answerable_from_memory() -> None:
    data = mutate(["turns", 2, "ground_truth"], ["August 1, 2026"])
    msg = error_of(data)
    assert "turns[2] (turn 3).ground_truth: none of the accepted answers" in msg and "fact_id 'F1'" in msg
    # a write about the fact AFTER the recall does not count
    data["turns"].append(_turn(4, "senior_lawyer", "The brief is now due August 1, 2026.", write_to_memory=True, fact_id="F1"))
    assert "none of the accepted answers" in error_of(data)
    # one BEFORE the recall does
    data["turns"].insert(2, _turn(2.5, "senior_lawyer", "The brief is now due August 1, 2026.", write_to_memory=True, fact_id="F1"))
    data["turns"][2]["turn"] = 3
    for i, t in enumerate(data["turns"]):
        t["turn"] = i + 1
    assert script_from_dict(data).recalls()[0].ground_truth == ("August 1, 2026",)


def test_not_an_object() -> None:
    assert error_of([1, 2]) == "case.json: expected a script (a JSON object), got a list"
    assert "initial_facts[0]: expected a fact (a JSON object), got a string" in error_of(mutate(["initial_facts", 0], "F1"))


def test_files_invalid_json_and_duplicate_ids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "script_id": "x",\n  "domain": "legal",\n  oops\n}\n')
    with pytest.raises(ScriptError, match=r"bad\.json: line 4, column 3: not valid JSON"):
        load_script(bad)
    with pytest.raises(ScriptError, match="file not found"):
        load_script(tmp_path / "missing.json")

    folder = tmp_path / "set"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    (folder / "a" / "one.json").write_text(json.dumps(valid()))
    good = load_script(folder / "a" / "one.json")
    assert good.path == str(folder / "a" / "one.json")
    (folder / "b" / "two.json").write_text(json.dumps(valid()))
    with pytest.raises(ScriptError, match=r"two\.json: script_id: duplicate script id 't_01' \(also used in .*one\.json\)"):
        load_scripts(folder)
    other = valid() | {"script_id": "t_00"}
    (folder / "b" / "two.json").write_text(json.dumps(other))
    assert [s.script_id for s in load_scripts(folder)] == ["t_00", "t_01"]
    assert [s.script_id for s in load_scripts(str(folder / "*" / "one.json"))] == ["t_01"]
    with pytest.raises(ScriptError, match="no script files found"):
        load_scripts(tmp_path / "empty*")


def test_answer_matching_is_whole_word() -> None:
    assert normalise_answer("  $1,250,000  on July 22, 2026!") == "1 250 000 on july 22 2026"
    assert answer_matches("Give 5 MG daily.", ["5 mg"])
    assert not answer_matches("Give 25 mg daily.", ["5 mg"])
    assert not answer_matches("anything", [])


# ------------------------------------------------------------------ the shipped set

@pytest.fixture(scope="module")
def shipped() -> list[Script]:
    return load_scripts(SHIPPED)


def test_all_shipped_scripts_load_and_follow_the_design(shipped: list[Script]) -> None:
    per_domain = Counter(s.domain for s in shipped)
    assert all(per_domain[d] >= 10 for d in DOMAINS), per_domain
    several = Counter(s.domain for s in shipped if min(Counter(r.failure_mode for r in s.recalls()).get(m, 0)
                                                         for m in FAILURE_MODES) >= 2)
    assert all(several[d] >= 5 for d in DOMAINS), several  # scripts with two or more recalls of every mode
    for s in shipped:
        assert Path(s.path or "").parent.name == s.domain, s.path
        assert 10 <= len(s.turns) <= 40, s.script_id
        assert 3 <= len(s.initial_facts) <= 10, s.script_id
        recalls = s.recalls()
        assert 2 <= len(recalls) <= 8, s.script_id
        assert len({r.failure_mode for r in recalls}) >= 2, s.script_id
        assert any(not t.is_recall and t.fact_id not in {r.target_fact_id for r in recalls} for t in s.turns), \
            f"{s.script_id}: no distractor turn about another fact"


def test_failure_mode_coverage(shipped: list[Script]) -> None:
    modes = Counter(r.failure_mode for s in shipped for r in s.recalls())
    assert all(modes[m] >= 40 for m in FAILURE_MODES), modes


# value-like tokens: what a simulated agent reads as a statement's "value"
_VALUE = re.compile(r"\$?\d[\d,.:/]*%?|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b")


def _values(text: str) -> set[str]:
    return {v.strip(".,").lower() for v in _VALUE.findall(text)}


def check_ground_truth(scripts: list[Script]) -> None:
    for s in scripts:
        for r in s.recalls():
            where = f"{s.script_id} turn {r.turn}"
            fid = r.target_fact_id
            assert fid is not None
            statements = [s.fact(fid).text, *(t.content for t in s.writes_about(fid, r.turn))]
            assert any(answer_matches(x, r.ground_truth) for x in statements), where
            forms = [_values(a) for a in r.ground_truth]
            assert all(forms), f"{where}: an accepted answer has no value-like token"
            assert not set().union(*forms) & _values(r.recall_query or ""), f"{where}: the query gives the answer away"
            holds = lambda x, forms=forms: any(f <= _values(x) for f in forms)  # noqa: E731
            wrong = [x for x in statements if not holds(x)]
            if r.failure_mode in ("authority_collapse", "memory_anchoring"):
                need = 1 if r.failure_mode == "authority_collapse" else 2
                writes_wrong = [t for t in s.writes_about(fid, r.turn) if not holds(t.content)]
                assert len(writes_wrong) >= need, f"{where}: expected >= {need} wrong memory writes"
                if r.failure_mode == "memory_anchoring":
                    assert len({t.role for t in writes_wrong}) >= 2, f"{where}: the early value is repeated by one role only"
            for x in wrong:
                # neither whole-word nor a looser punctuation-free substring match may accept it
                squeeze = lambda v: re.sub(r"[^a-z0-9]", "", v.lower())  # noqa: E731
                assert not answer_matches(x, r.ground_truth), f"{where}: wrong statement contains the answer: {x!r}"
                assert not any(squeeze(a) in squeeze(x) for a in r.ground_truth), f"{where}: {x!r} contains {r.ground_truth}"


def check_belief_setup(scripts: list[Script]) -> None:
    for s in scripts:
        for r in s.recalls():
            if r.failure_mode != "belief_asymmetry":
                continue
            own = [t for t in s.turns if t.turn < r.turn and t.role == r.role and not t.is_recall and t.fact_id == r.target_fact_id]
            assert own and not any(answer_matches(t.content, r.ground_truth) for t in own), f"{s.script_id} turn {r.turn}"
            updates = [t for t in s.writes_about(r.target_fact_id or "", r.turn)
                       if t.role != r.role and answer_matches(t.content, r.ground_truth)]
            assert updates and min(u.turn for u in updates) > min(t.turn for t in own), f"{s.script_id} turn {r.turn}"


_STOP = set("""a an the and or of to in on at for by with from as is are was were be this that it its what which who
when where how do does did current now our your their we you they i me my us has have had will not than then there
please new old file team record""".split())


def _content(text: str) -> set[str]:
    return {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if len(w) >= 3 and w.lower() not in _STOP}


def check_no_stray_own_statements(scripts: list[Script]) -> None:
    """A recaller's own earlier statements about OTHER facts must not look relevant to its
    question (shared content words plus a value), or a self-trusting agent would answer
    from them and the probe would measure the wrong failure mode."""
    for s in scripts:
        for r in s.recalls():
            q = _content(r.recall_query or "")
            for t in s.turns:
                if t.turn < r.turn and t.role == r.role and not t.is_recall and t.fact_id != r.target_fact_id:
                    assert not (q & _content(t.content) and _values(t.content)), \
                        f"{s.script_id} turn {r.turn}: own turn {t.turn} looks relevant: {t.content!r}"
            if r.failure_mode != "belief_asymmetry":
                mine = [t.turn for t in s.turns if t.turn < r.turn and t.role == r.role and t.fact_id == r.target_fact_id]
                assert not mine, f"{s.script_id} turn {r.turn}: the recaller itself spoke about the fact at {mine}"


def test_shipped_ground_truth_available_and_absent_from_wrong_statements(shipped: list[Script]) -> None:
    check_ground_truth(shipped)


def test_shipped_belief_asymmetry_recaller_voiced_the_old_value(shipped: list[Script]) -> None:
    check_belief_setup(shipped)


def test_shipped_recallers_have_no_stray_own_statements(shipped: list[Script]) -> None:
    check_no_stray_own_statements(shipped)


# ------------------------------------------------------------------ the generator

def test_generator_is_deterministic_and_seed_dependent() -> None:
    for domain in DOMAINS:
        a = generate_script(domain, list(FAILURE_MODES), seed=11)
        assert json.dumps(a) == json.dumps(generate_script(domain, list(FAILURE_MODES), seed=11))
        assert json.dumps(a) != json.dumps(generate_script(domain, list(FAILURE_MODES), seed=12))
    with pytest.raises(ValueError, match="unknown domain"):
        generate_script("maritime", ["authority_collapse"], 1)
    with pytest.raises(ValueError, match="unknown failure mode"):
        generate_script("legal", ["amnesia"], 1)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_generated_scripts_are_valid_and_follow_the_design(domain: str) -> None:
    scripts = []
    for seed in range(40):
        modes = [FAILURE_MODES[(seed + j) % 3] for j in range(2 + seed % 2)]
        data = generate_script(domain, modes, seed)
        s = script_from_dict(data, f"gen-{seed}")
        assert [r.failure_mode for r in s.recalls()] != [] and sorted(r.failure_mode for r in s.recalls()) == sorted(modes)
        assert 10 <= len(s.turns) <= 20 and 3 <= len(s.initial_facts) <= 6
        scripts.append(s)
    check_ground_truth(scripts)
    check_belief_setup(scripts)
    check_no_stray_own_statements(scripts)


def test_generate_all_scripts(tmp_path: Path) -> None:
    paths = generate_all_scripts(tmp_path / "a", scripts_per_domain=3, seed=5)
    assert len(paths) == 9 and all(p.parent.parent == tmp_path / "a" for p in paths)
    scripts = load_scripts(tmp_path / "a")
    assert Counter(s.domain for s in scripts) == {d: 3 for d in DOMAINS}
    assert Counter(r.failure_mode for s in scripts for r in s.recalls()) == {m: 18 for m in FAILURE_MODES}
    for s in scripts:  # several recalls per failure mode, distractor facts, values
        assert Counter(r.failure_mode for r in s.recalls()) == {m: 2 for m in FAILURE_MODES}, s.script_id
        targets = {r.target_fact_id for r in s.recalls()}
        assert len(targets) == 6 and len([f for f in s.initial_facts if f.id not in targets]) == 2, s.script_id
        assert all(f.value for f in s.initial_facts)
        assert all(t.value for t in s.turns if t.fact_id and not t.is_recall)
    one = load_scripts(generate_all_scripts(tmp_path / "one", scripts_per_domain=1, seed=5, recalls_per_mode=1)[0])
    assert Counter(r.failure_mode for r in one[0].recalls()) == {m: 1 for m in FAILURE_MODES}
    again = generate_all_scripts(tmp_path / "b", scripts_per_domain=3, seed=5)
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]
    other = generate_all_scripts(tmp_path / "c", scripts_per_domain=3, seed=6)
    assert [p.read_text() for p in paths] != [p.read_text() for p in other]
    with pytest.raises(ValueError):
        generate_all_scripts(tmp_path / "d", 0, 1)


# ------------------------------------------------------------------ the mechanism (retrieval only)

def collapse_rankings(scripts: list[Script], weights: tuple[float, float, float], mode: str = "authority_collapse",
                      invalidation: bool = False) -> list[tuple[str, int, list[Any]]]:
    """For every recall of ``mode``, replay the memory a world would hold at that turn
    (initial facts at turn 0 by "record", then every write_to_memory turn before it)
    and rank all entries for the recall query under ``weights``."""
    vector = pytest.importorskip("workbench.stores.vector", reason="workbench.stores.vector not available yet")
    from workbench.embeddings import get_embedder

    out = []
    for s in scripts:
        for r in s.recalls():
            if r.failure_mode != mode:
                continue
            memory = vector.VectorMemory(get_embedder("lexical"), vector.Weights(*weights), invalidation=invalidation)
            for f in s.initial_facts:
                memory.add(f.text, author_role="record", authority=f.authority_level, turn=0, namespace="shared", fact_id=f.id)
            for t in s.turns:
                if t.write_to_memory and t.turn < r.turn:
                    memory.add(t.content, author_role=t.role, authority=role_authority(s.domain, t.role), turn=t.turn,
                               namespace=t.role, fact_id=t.fact_id)
            hits = memory.search(r.recall_query or "", current_turn=r.turn, k=len(memory.entries))
            out.append((s.script_id, r.turn, hits))
    return out


def _first(hits: list[Any], r_truth: tuple[str, ...], fact_id: str, correct: bool) -> int:
    return min(i for i, h in enumerate(hits) if h.entry.fact_id == fact_id and answer_matches(h.entry.text, r_truth) == correct)


def test_authority_collapse_arises_from_retrieval_weights(shipped: list[Script]) -> None:
    """Naive weights (1, 0, 0.3) must put the low-authority wrong entry above the right
    one; lightweight (1, 0.4, 0.3) must put the right one first: that contrast is what
    the authority-collapse probes measure. Counts are printed for the report."""
    recalls = {(s.script_id, r.turn): r for s in shipped for r in s.recalls()}
    naive = collapse_rankings(shipped, (1.0, 0.0, 0.3))
    light = collapse_rankings(shipped, (1.0, 0.4, 0.3))
    wrong_above = right_first = 0
    for (sid, turn, hits), (_, _, lhits) in zip(naive, light):
        r = recalls[(sid, turn)]
        fid = r.target_fact_id or ""
        wrong_above += _first(hits, r.ground_truth, fid, False) < _first(hits, r.ground_truth, fid, True)
        right_first += lhits[0].entry.fact_id == fid and answer_matches(lhits[0].entry.text, r.ground_truth)
        # the wrong entry is written by a role of lower authority than the right one
        w, c = hits[_first(hits, r.ground_truth, fid, False)], hits[_first(hits, r.ground_truth, fid, True)]
        assert w.entry.authority < c.entry.authority, f"{sid} turn {turn}"
    n = len(naive)
    print(f"authority collapse: naive wrong-above-right {wrong_above}/{n}, lightweight right-first {right_first}/{n}")
    assert n >= 8
    assert wrong_above >= 0.8 * n and right_first >= 0.8 * n, (wrong_above, right_first, n)


def test_anchoring_and_belief_retrieval_profile(shipped: list[Script]) -> None:
    """Anchoring: under naive weights the repeated early value holds rank 1 and at least two
    of the top 3; lightweight weights bring the one correction into the top 3; with
    invalidation it ranks first. Belief asymmetry: the update ranks first under naive and
    lightweight weights, so a wrong answer comes from the agent's private history, not from
    retrieval."""
    recalls = {(s.script_id, r.turn): r for s in shipped for r in s.recalls()}

    def count(rows: list[tuple[str, int, list[Any]]], pred: Any) -> int:
        return sum(bool(pred(recalls[(sid, turn)], hits)) for sid, turn, hits in rows)

    right = lambda r, h: answer_matches(h.entry.text, r.ground_truth)  # noqa: E731
    old = lambda r, h: h.entry.fact_id == r.target_fact_id and not right(r, h)  # noqa: E731
    naive = collapse_rankings(shipped, (1.0, 0.0, 0.3), "memory_anchoring")
    light = collapse_rankings(shipped, (1.0, 0.4, 0.3), "memory_anchoring")
    inval = collapse_rankings(shipped, (1.0, 0.4, 0.3), "memory_anchoring", invalidation=True)
    n = len(naive)
    old_first = count(naive, lambda r, h: old(r, h[0]) and sum(old(r, x) for x in h[:3]) >= 2)
    light_top3 = count(light, lambda r, h: any(right(r, x) for x in h[:3]))
    inval_first = count(inval, lambda r, h: right(r, h[0]))
    print(f"anchoring: naive old-value-first {old_first}/{n}, lightweight correction-in-top3 {light_top3}/{n}, "
          f"invalidation correction-first {inval_first}/{n}")
    assert n >= 8 and old_first >= 0.8 * n and light_top3 >= 0.8 * n and inval_first >= 0.8 * n

    for weights in ((1.0, 0.0, 0.3), (1.0, 0.4, 0.3)):
        rows = collapse_rankings(shipped, weights, "belief_asymmetry")
        first = count(rows, lambda r, h: right(r, h[0]))
        print(f"belief asymmetry {weights}: update first {first}/{len(rows)}")
        assert first >= 0.8 * len(rows)


def test_generated_scripts_show_the_same_retrieval_contrast(tmp_path: Path) -> None:
    generate_all_scripts(tmp_path, scripts_per_domain=4, seed=3)
    scripts = load_scripts(tmp_path)
    recalls = {(s.script_id, r.turn): r for s in scripts for r in s.recalls()}
    right = lambda sid, turn, h: answer_matches(h.entry.text, recalls[(sid, turn)].ground_truth)  # noqa: E731
    naive = collapse_rankings(scripts, (1.0, 0.0, 0.3))
    light = collapse_rankings(scripts, (1.0, 0.4, 0.3))
    assert sum(not right(sid, t, h[0]) for sid, t, h in naive) >= 0.8 * len(naive)
    assert sum(right(sid, t, h[0]) for sid, t, h in light) >= 0.8 * len(light)
    anchored = collapse_rankings(scripts, (1.0, 0.0, 0.3), "memory_anchoring")
    assert sum(not right(sid, t, h[0]) for sid, t, h in anchored) >= 0.8 * len(anchored)
    fixed = collapse_rankings(scripts, (1.0, 0.4, 0.3), "memory_anchoring", invalidation=True)
    assert sum(right(sid, t, h[0]) for sid, t, h in fixed) >= 0.8 * len(fixed)


def test_the_generator_is_reachable_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    assert main(["recall", "generate", "--per-domain", "2", "--seed", "9", "--out", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 6 and all(Path(p).is_file() for p in printed)
    direct = generate_all_scripts(tmp_path / "direct", scripts_per_domain=2, seed=9)
    assert [Path(p).read_bytes() for p in printed] == [p.read_bytes() for p in direct]
    scripts = load_scripts(tmp_path / "cli")
    assert Counter(s.domain for s in scripts) == {d: 2 for d in DOMAINS}
    assert main(["recall", "generate", "--per-domain", "0", "--seed", "9", "--out", str(tmp_path / "x")]) == 2
    assert "--per-domain must be at least 1" in capsys.readouterr().err


def test_generated_scripts_vary_their_wording() -> None:
    """Several templates per statement kind: across a set, the same kind of statement is
    worded in more than one way (values and subjects taken out)."""
    shapes: dict[str, set[str]] = {}
    for seed in range(6):
        data = generate_script("finance", list(FAILURE_MODES) * 2, seed)
        subjects = sorted((t.subject for t in TOPICS["finance"]), key=len, reverse=True)
        for t in data["turns"]:
            text = t["content"] if not t["is_recall"] else t["recall_query"]
            for subj in subjects:
                text = text.replace(subj, "S")
            if t.get("value"):
                text = text.replace(t["value"], "V")
            kind = t["failure_mode"] or ("statement" if t["fact_id"] else "other")
            shapes.setdefault(kind, set()).add(text if t["is_recall"] or t["fact_id"] else "")
    assert len(shapes["statement"]) >= 10 and all(len(shapes[m]) >= 3 for m in FAILURE_MODES), shapes


def test_the_shipped_study_plays_every_script_ten_times_under_every_condition() -> None:
    from workbench.params import load_study
    from workbench.worlds.recall.spec import CONDITIONS
    from workbench.worlds.recall.world import cell_scripts

    study = load_study(ROOT / "params" / "recall.yaml")
    assert {c.spec.condition for c in study.cells} == set(CONDITIONS)
    for c in study.cells:
        n = len(cell_scripts(c.spec, study.base_dir))
        assert n >= 30 and study.worlds_per_cell == 10 * n, (c.spec.describe(), n, study.worlds_per_cell)
    header = (ROOT / "params" / "recall.yaml").read_text(encoding="utf-8").split("world:", 1)[0]
    assert f"{n} shipped scenario scripts" in header and "10 repetitions" in header and f"= {10 * n}" in header
