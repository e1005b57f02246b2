"""Issue 40, part 2: the shared-store world with a tool-call action interface
(``actions: tools``). Its reply rules are a counterpart of the JSON-text ones, so a
rule that silently accepted several calls, or re-scoring that read only the reply
text, would change which worlds count: each is checked here against records."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PROMPTS, make_study
from workbench.models.base import ModelReply, ModelRequest
from workbench.params import ParamsError, load_study
from workbench.records import load_run
from workbench.replay import verify_world
from workbench.study import run_study
from workbench.templates import template_set
from workbench.worlds.stigmergy import prompts as P
from workbench.worlds.stigmergy.parsing import (
    parse_tool_both,
    parse_tool_reply,
    tool_invalid_shape,
    tool_invalid_shapes,
)
from workbench.worlds.stigmergy.simulated import SimulatedClient, get_profile
from workbench.worlds.stigmergy.spec import StigmergyCell
from workbench.worlds.stigmergy.world import StigmergyWorld

STORE = ("list", "read", "write", "submit")
NO_STORE = ("submit",)


def call(name: str, args: Any = None, i: int = 0) -> dict[str, Any]:
    raw = args if isinstance(args, str) else json.dumps(args or {})
    return {"id": f"c{i}", "name": name, "arguments": raw}


# name, text, calls, ops, strict class, lenient class (None: valid), op expected under lenient, shape flags set
CASES = [
    ("one call", "", [call("read", {"key": "C_B"})], STORE, None, None, {"op": "read", "key": "C_B"}, set()),
    ("empty arguments for list", "", [call("list", "")], STORE, None, None, {"op": "list"}, set()),
    ("text beside the call", "Let me look.", [call("list")], STORE, None, None, {"op": "list"}, {"text_with_call"}),
    ("two calls", "", [call("write", {"key": "C_A", "value": 7}), call("submit", {"answer": 7}, 1)], STORE,
     "several calls", None, {"op": "write", "key": "C_A", "value": 7}, {"multi_call"}),
    ("two calls, the first unknown", "", [call("calculator", {"x": 1}), call("list", {}, 1)], STORE,
     "several calls", None, {"op": "list"}, {"multi_call", "unknown_tool"}),
    ("two calls, both malformed", "", [call("read", {}), call("search", {}, 1)], STORE, "several calls",
     "bad arguments", None, {"multi_call", "unknown_tool", "bad_args"}),
    ("no call, an operation as text", '{"op": "list"}', [], STORE, "no call", None, {"op": "list"}, {"no_call"}),
    ("no call, a call written as text", '<tool_call>\n{"name": "read", "arguments": {"key": "C_A"}}\n</tool_call>',
     [], STORE, "no call", None, {"op": "read", "key": "C_A"}, {"no_call", "prose_wrapped"}),
    ("no call, a fenced call", '```json\n{"tool": "submit", "parameters": {"answer": 12}}\n```', [], STORE,
     "no call", None, {"op": "submit", "answer": 12}, {"no_call", "fenced"}),
    ("no call, prose only", "I will list the store now.", [], STORE, "no call", "no call", None, {"no_call"}),
    ("empty reply", "", [], STORE, "no call", "no call", None, {"no_call", "empty"}),
    ("no call, an unknown operation as text", '{"op": "delete", "key": "x"}', [], STORE, "no call", "unknown tool",
     None, {"no_call"}),
    ("no call, an unknown tool written as text", '```json\n{"name": "computeX", "arguments": {"C_A": 3}}\n```', [],
     STORE, "no call", "unknown tool", None, {"no_call", "fenced"}),
    ("no call, bad arguments written as text", '{"name": "read", "arguments": {"key": {"type": "string"}}}', [],
     STORE, "no call", "bad arguments", None, {"no_call"}),
    ("no call, an operation missing a field as text", '{"op": "write", "key": "C_A"}', [], STORE, "no call",
     "bad arguments", None, {"no_call"}),
    ("no call, broken JSON in the text", '{"name": "submit", "arguments": {"answer": 3 % 2}}', [], STORE, "no call",
     "no call", None, {"no_call"}),
    ("unknown tool", "", [call("delete", {"key": "C_A"})], STORE, "unknown tool", "unknown tool", None,
     {"unknown_tool"}),
    ("a store tool where the condition offers none", "", [call("list")], NO_STORE, "unknown tool", "unknown tool",
     None, {"unknown_tool"}),
    ("arguments cut off", "", [call("write", '{"key": "C_A", "value": 7')], STORE, "bad arguments",
     "bad arguments", None, {"bad_args"}),
    ("a required argument missing", "", [call("read", {})], STORE, "bad arguments", "bad arguments", None,
     {"bad_args"}),
    ("an argument of the wrong type", "", [call("read", {"key": 5})], STORE, "bad arguments", "bad arguments",
     None, {"bad_args"}),
    ("arguments that are not an object", "", [call("submit", "[12]")], STORE, "bad arguments", "bad arguments",
     None, {"bad_args"}),
    ("submit without an answer", "", [call("submit", {"value": 3})], STORE, "bad arguments", "bad arguments",
     None, {"bad_args"}),
]
FLAGS = ("no_call", "multi_call", "unknown_tool", "bad_args", "text_with_call", "fenced", "prose_wrapped", "empty")


@pytest.mark.parametrize("name,text,calls,ops,strict,lenient,op,flags", CASES, ids=[c[0] for c in CASES])
def test_tool_replies_under_both_rules(name, text, calls, ops, strict, lenient, op, flags) -> None:
    parsed = parse_tool_both(text, calls, ops)
    assert tool_invalid_shape(parsed["strict"]) == strict, parsed["strict"]
    assert tool_invalid_shape(parsed["lenient"]) == lenient, parsed["lenient"]
    assert parsed["strict"]["valid"] == (strict is None) and parsed["lenient"]["valid"] == (lenient is None)
    assert parsed["lenient"]["op"] == op
    if strict is None:
        assert parsed["strict"]["op"] == op
    assert {f for f in FLAGS if parsed["shape"][f]} == flags
    assert parsed["shape"]["n_calls"] == len(calls)
    # the record is JSON as written, and the classes are read back from a recorded reply alone
    assert json.loads(json.dumps(parsed)) == parsed
    assert tool_invalid_shapes({"text": text, "tool_calls": calls}, ops) == (strict, lenient)


def test_the_lenient_rule_names_the_call_it_took() -> None:
    calls = [call("calculator", {}), call("read", {"key": "C_A"}, 1), call("list", {}, 2)]
    assert parse_tool_reply("", calls, "lenient", STORE).call == 1
    assert parse_tool_reply("", calls, "strict", STORE).call is None
    assert "call" not in parse_tool_reply('{"op": "list"}', [], "lenient", STORE).to_record()  # taken from text


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                           max_leaves=10)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.none(), st.text(max_size=40)),
       calls=st.one_of(json_values, st.lists(st.one_of(json_values, st.fixed_dictionaries(
           {"name": st.sampled_from(["list", "read", "write", "submit", "x", ""]) | json_values,
            "arguments": st.text(max_size=30) | json_values})), max_size=3)))
def test_tool_parsing_never_raises(text, calls) -> None:
    parsed = parse_tool_both(text, calls, STORE)
    json.dumps(parsed)
    for rule in ("strict", "lenient"):
        if parsed[rule]["valid"]:
            assert parsed[rule]["op"]["op"] in STORE


# -- one world, its conversation ------------------------------------------------------------
class Capturing:
    """A scripted agent that replies with given tool calls and keeps every request it was sent."""

    virtual_time = True

    def __init__(self, replies: list[tuple[str, list[dict[str, Any]]]]) -> None:
        self.route, self.replies, self.requests = "capture", list(replies), []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        text, calls = self.replies.pop(0) if self.replies else ("", [call("submit", {"answer": 0})])
        return ModelReply(text=text, latency_s=1.0, route=self.route, tool_calls=calls)


def _world(cell: StigmergyCell, clients: dict[str, Capturing]) -> StigmergyWorld:
    def factory(route: str, slot: str, seed: int, options: dict[str, Any]) -> Capturing:
        return clients.setdefault(slot, Capturing([]))

    return StigmergyWorld(cell, world_id="w", seed=5, templates=template_set(PROMPTS), client_factory=factory)


def _well_formed(messages: list[dict[str, Any]]) -> None:
    """Every call is answered by a tool message with its id, right after the turn that made it."""
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert [a["role"] for a in answers] == ["tool"] * len(ids), messages[i:]
            assert [a["tool_call_id"] for a in answers] == ids
        if m["role"] == "tool":
            assert messages[i - 1]["role"] in ("assistant", "tool")


@pytest.mark.parametrize("parser", ["strict", "lenient"])
def test_two_calls_in_a_world_invalid_under_strict_and_counted(parser: str) -> None:
    cell = StigmergyCell(model="scripted", actions="tools", parser=parser, agents={
        r: {"script": ["x"]} for r in ("pair_a", "pair_b", "solo_1", "solo_2")})
    two = ("Two at once.", [call("write", {"key": "C_A", "value": 7}), call("list", {}, 1)])
    clients = {"agent-0": Capturing([two, ("", [call("list", {}, 0)]), ("", [call("submit", {"answer": 3})])])}
    world = _world(cell, clients)
    outcome = asyncio.run(world.run())
    first = next(s for s in outcome.steps if s["agent"] == "agent-0")
    assert first["parse"]["shape"]["multi_call"] and first["parse"]["shape"]["n_calls"] == 2
    assert first["parse"]["strict"]["valid"] is False and first["parse"]["lenient"]["valid"] is True
    assert first["request"]["tools"] == list(STORE)
    assert outcome.world["validity"]["strict"]["valid"] is False
    assert outcome.world["validity"]["lenient"]["valid"] is True
    assert outcome.world["valid"] is (parser == "lenient")
    # the store saw the write only where the rule took it
    wrote = [e for e in outcome.world["store_log"] if e.get("key") == "C_A"]
    assert bool(wrote) is (parser == "lenient")
    from workbench.worlds.stigmergy.metrics import agent_rows

    rows = agent_rows(outcome.world, outcome.steps)
    assert {r["agent"]: r["multi_call_replies"] for r in rows}["agent-0"] == 1
    assert sum(r["no_call_replies"] + r["bad_args_replies"] + r["unknown_tool_replies"] for r in rows) == 0
    # what the agent was sent next: both calls answered, the second (lenient) as not run
    sent = clients["agent-0"].requests[1]
    assert sent.tools == P.tool_definitions(template_set(PROMPTS), P.STORE_OPS)
    _well_formed(sent.messages)
    answers = [m["content"] for m in sent.messages if m["role"] == "tool"]
    if parser == "lenient":
        assert answers == ["ok", "Error: one operation per reply; this call was not run."]
    else:
        assert len(answers) == 2 and all(a.startswith("Error: several tool calls") for a in answers)
        assert all(a.endswith("Reply with exactly one tool call.") for a in answers)


def test_a_text_reply_in_a_tools_world_is_answered_as_a_user_message() -> None:
    cell = StigmergyCell(model="scripted", actions="tools", parser="lenient", agents={
        r: {"script": ["x"]} for r in ("pair_a", "pair_b", "solo_1", "solo_2")})
    clients = {"agent-1": Capturing([('{"op": "list"}', []), ("", [call("submit", {"answer": 1})])])}
    outcome = asyncio.run(_world(cell, clients).run())
    step = next(s for s in outcome.steps if s["agent"] == "agent-1")
    assert step["valid"] and step["op"] == {"op": "list"} and step["parse"]["shape"]["no_call"]
    assert step["parse"]["strict"]["error"].startswith("no tool call")
    sent = clients["agent-1"].requests[1].messages
    assert sent[-2] == {"role": "assistant", "content": '{"op": "list"}'} and sent[-1]["role"] == "user"


def test_a_constrained_tools_cell_forces_a_call() -> None:
    for condition, choice in (("store", "required"), ("no-store", {"type": "function", "function": {"name": "submit"}})):
        cell = StigmergyCell(model="scripted", actions="tools", constrained=True, condition=condition, agents={
            r: {"script": ["x"]} for r in ("pair_a", "pair_b", "solo_1", "solo_2")})
        clients: dict[str, Capturing] = {}
        asyncio.run(_world(cell, clients).run())
        request = clients["agent-0"].requests[0]
        assert request.params["tool_choice"] == choice and "response_format" not in request.params
        assert [t["function"]["name"] for t in request.tools] == list(P.allowed_ops(condition))


# -- a study: records, replay, re-scoring -------------------------------------------------------
@pytest.fixture(scope="module")
def tools_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tools")
    study = make_study(tmp, [
        {"model": "sim/multi-object", "actions": "tools"},
        {"model": "sim/fencer", "actions": "tools", "parser": "strict"},
        {"model": "sim/diligent", "actions": "tools", "condition": "no-store"},
        {"model": "scripted", "actions": "tools", "agents": {
            "pair_a": {"script": ['{"tool_calls": [{"name": "write", "arguments": {"key": "$own_key", '
                                 '"value": $own_value}}]}',
                                 '{"tool_calls": [{"name": "read", "arguments": "{\\"key\\": \\"$partner_key\\"}"}],'
                                 ' "text": "reading"}',
                                 '{"op": "submit", "answer": $answer}']},
            "pair_b": {"script": ['{"tool_calls": [{"name": "write", "arguments": {"key": "$own_key"}}]}',
                                  '{"tool_calls": [{"name": "submit", "arguments": {"answer": $answer}}, '
                                  '{"name": "list", "arguments": {}}]}']},
            "solo_1": {"script": ['{"tool_calls": [{"name": "erase", "arguments": {}}]}',
                                  '{"tool_calls": [{"name": "submit", "arguments": {"answer": $answer}}]}']},
            "solo_2": {"script": ['{"tool_calls": [{"name": "submit", "arguments": {"answer": $answer}}]}']}}},
    ], worlds=6, seed=41, name="tools")
    out = tmp / "run"
    run_study(study, out, progress=False)
    return load_run(out)


def test_a_tools_world_replays_identically(tools_run) -> None:
    for w in tools_run.worlds:
        assert verify_world(tools_run, w["world_id"]) == [], w["world_id"]


def test_a_tools_world_rescores_identically_from_its_replies(tools_run) -> None:
    """Validity parsed again from the recorded replies (text and tool calls) matches the
    recorded outcomes under both rules; read from the text alone it would not."""
    from workbench.worlds.stigmergy.metrics import reparse_validity

    differ = 0
    for w in tools_run.worlds:
        steps = tools_run.steps[w["world_id"]]
        for rule in ("strict", "lenient"):
            assert reparse_validity(w, steps, rule) == w["validity"][rule], (w["world_id"], rule)
        differ += w["validity"]["strict"]["valid"] != w["validity"]["lenient"]["valid"]
        text_only = {**w, "cell": {**w["cell"], "actions": "json-text"}}
        if any(s["reply"]["tool_calls"] for s in steps):
            assert reparse_validity(text_only, steps, "lenient") != w["validity"]["lenient"]
    assert differ > 0  # the rules disagree somewhere: re-scoring under the other rule is not a no-op


def test_tool_shapes_are_recorded_and_counted(tools_run) -> None:
    from workbench.worlds.stigmergy.frames import agent_frame

    af = agent_frame(tools_run)
    by_cell = af.groupby("cell_id")[["multi_call_replies", "no_call_replies", "unknown_tool_replies",
                                     "bad_args_replies"]].sum()
    labels = {w["cell_id"]: w["cell"]["model"] for w in tools_run.worlds}
    counts = {labels[c]: row.to_dict() for c, row in by_cell.iterrows() if labels[c] != "sim/diligent"}
    assert counts["sim/multi-object"]["multi_call_replies"] > 0  # its several-objects style, as two calls
    assert counts["sim/fencer"]["no_call_replies"] > 0  # fenced JSON in text, no call
    # the scripted cell: pair_b's two calls, solo_1's unknown tool, pair_b's missing value, pair_a's text reply
    scripted = counts["scripted"]
    assert scripted == {"multi_call_replies": 6, "no_call_replies": 6, "unknown_tool_replies": 6,
                        "bad_args_replies": 6}, scripted
    fencer = [w for w in tools_run.worlds if w["cell"]["model"] == "sim/fencer"]
    assert not any(w["valid"] for w in fencer)  # strict: a fenced operation in text is no call
    assert all(w["validity"]["lenient"]["valid"] for w in fencer)


# -- simulated agents act through the interface the cell uses ---------------------------------------
def _ops(outcome: Any, slot: str) -> list[Any]:
    return [s["op"] for s in outcome.steps if s["agent"] == slot]


def test_twins_act_through_tools_with_the_same_decisions(tmp_path: Path) -> None:
    from workbench.study import run_one_world

    study = make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/diligent", "actions": "tools"}],
                       seed=3, name="interfaces")

    async def go() -> tuple[Any, Any]:
        return (await run_one_world(study, study.cells[0], 0), await run_one_world(study, study.cells[1], 0))

    text_world, tools_world = asyncio.run(go())
    for s in tools_world.steps:
        assert len(s["reply"]["tool_calls"]) == 1 and "{" not in s["reply"]["text"], s["reply"]
        assert s["parse"]["shape"]["n_calls"] == 1
    for s in text_world.steps:
        assert not s["reply"]["tool_calls"]
    # a hand-set profile decides the same in both interfaces (one random stream): only the form differs
    for slot in {s["agent"] for s in text_world.steps}:
        assert _ops(text_world, slot) == _ops(tools_world, slot)
    ids = ("world_id", "cell_id", "prompt_tokens", "completion_tokens")  # the texts differ, so their lengths do
    assert ({k: v for k, v in text_world.world["metrics"].items() if k not in ids}
            == {k: v for k, v in tools_world.world["metrics"].items() if k not in ids})


def test_a_simulated_agent_reads_the_store_from_the_tool_list() -> None:
    task = "Compute the sum of the decimal digits of 123456 and submit it as an integer."
    system = P.system_prompt(template_set(PROMPTS), "store", "both", 20, actions="tools")
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    tools = P.tool_definitions(template_set(PROMPTS), P.STORE_OPS)
    reply = asyncio.run(SimulatedClient(get_profile("diligent"), 1).complete(ModelRequest(msgs, tools=tools)))
    assert [c["name"] for c in reply.tool_calls] == ["list"] and reply.text == ""
    only_submit = P.tool_definitions(template_set(PROMPTS), P.NO_STORE_OPS)
    reply = asyncio.run(SimulatedClient(get_profile("diligent"), 1).complete(ModelRequest(msgs, tools=only_submit)))
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [("submit", {"answer": 21})]


def test_a_cut_off_reply_is_bad_arguments_through_tools(tmp_path: Path) -> None:
    from workbench.study import run_one_world

    profiles = {"cutter": {"base": "diligent", "p_malformed": 1.0}}
    path = tmp_path / "cut.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "cut", "seed": 2, "worlds_per_cell": 1,
                                    "profiles": profiles, "defaults": {"prompts": str(PROMPTS)},
                                    "cells": [{"model": "sim/cutter", "actions": "tools"}]}))
    study = load_study(path)
    outcome = asyncio.run(run_one_world(study, study.cells[0], 0))
    cut = [s for s in outcome.steps if s["reply"]["extra"].get("style") == "truncated"]
    assert len(cut) == 4 and all(s["parse"]["shape"]["bad_args"] for s in cut)
    assert all(tool_invalid_shape(s["parse"][r]) == "bad arguments" for s in cut for r in ("strict", "lenient"))


def _cues_study(tmp_path: Path, model: str, **extra: Any) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "t", "seed": 1, "worlds_per_cell": 2,
                                    "defaults": {"prompts": str(PROMPTS)},
                                    "cells": [{"model": model, "actions": "tools"}], **extra}))
    return path


def test_a_tools_cell_is_refused_for_a_twin_unless_uncalibrated(tmp_path: Path) -> None:
    with pytest.raises(ParamsError) as err:
        load_study(_cues_study(tmp_path, "sim/twin-gpt-6-astra"))
    msg = str(err.value)
    assert "json-text action interface only" in msg and "system_tools.txt" in msg and "twin-gpt-6-astra" in msg
    assert "rehearsal: uncalibrated" in msg
    study = load_study(_cues_study(tmp_path, "sim/twin-gpt-6-astra", rehearsal="uncalibrated"))
    assert any("json-text action interface only" in p for p in study.uncalibrated[study.cells[0].label])
    # a hand-set profile is fitted on nothing: it acts through tools without a declaration
    assert not load_study(_cues_study(tmp_path, "sim/diligent")).uncalibrated


def test_a_store_tool_cue_that_finds_no_tool_is_refused(tmp_path: Path) -> None:
    profiles = {"blind": {"base": "diligent", "cues": {"store_tool": "ls"}}}
    with pytest.raises(ParamsError, match="store_tool.*matches none of the tools offered"):
        load_study(_cues_study(tmp_path, "sim/blind", profiles=profiles))


def test_the_fitted_hashes_leave_out_the_tools_interface() -> None:
    """The twins' fitted templates are the JSON-text interface's; a json-text cell renders none of
    the tools templates and a tools cell none of the JSON-text interface's own."""
    from workbench.worlds.stigmergy import KIND
    from workbench.worlds.stigmergy.fitted import fitted_on
    from workbench.worlds.stigmergy.fitting import rendered_templates

    tools_only = set(P.INTERFACE_TEMPLATES["tools"])
    assert tools_only <= {str(p.relative_to(PROMPTS)) for p in PROMPTS.rglob("*.txt")}
    assert not tools_only & set(fitted_on())
    assert not tools_only & set(rendered_templates(KIND, StigmergyCell(), PROMPTS))
    rendered = set(rendered_templates(KIND, StigmergyCell(actions="tools"), PROMPTS))
    assert tools_only <= rendered and not set(P.INTERFACE_TEMPLATES["json-text"]) & rendered


# -- the design changes one thing ------------------------------------------------------------------
def test_prompts_for_the_actions_factor_differ_only_in_the_interface(tmp_path: Path) -> None:
    from workbench.prompt_diff import prompt_diffs

    for condition, ops in (("store", P.STORE_OPS), ("no-store", P.NO_STORE_OPS)):
        study = make_study(tmp_path, [{"model": "sim/diligent", "condition": condition},
                                      {"model": "sim/diligent", "condition": condition, "actions": "tools"}],
                           name=f"actions-{condition}")
        diffs = prompt_diffs(study, "actions")
        assert {d.role for d in diffs} == {"pair_a", "pair_b", "solo_1", "solo_2"}
        t = template_set(PROMPTS)
        json_lines = {"[system] Each of your replies must be exactly one JSON object describing one operation, "
                      "with no other text. The operations available to you are:",
                      *(f"[system] {t.render(f'ops/{op}')}" for op in ops)}
        tools_lines = {"[system] Each of your replies must be exactly one tool call describing one operation. "
                       "The operations available to you are:", *(f"[system] {t.render(f'ops_tools/{op}')}" for op in ops)}
        for d in diffs:
            assert set(d.only_a) == json_lines and set(d.only_b) == tools_lines, d.unified


def test_cell_ids_at_the_default_interface_are_those_recorded_before_it() -> None:
    """A study recorded before the factor existed keeps its cell ids (and resumes)."""
    import hashlib

    from workbench.params import cell_hash

    cell = StigmergyCell(model="sim/diligent", condition="private")
    before = {k: v for k, v in cell.model_dump(mode="json").items()
              if k not in ("actions", *StigmergyCell.HASH_OMITS_DEFAULT)}
    assert cell_hash(cell) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:10]
    assert cell_hash(cell.model_copy(update={"actions": "tools"})) != cell_hash(cell)


# -- the report's attrition by shape, and each cell's design (rows.py and the kind's unrendered_templates) --
def test_attrition_by_shape_counts_tool_replies(tools_run) -> None:
    from workbench.metrics.design import design_of_records
    from workbench.worlds.stigmergy.frames import reply_frame, validity_frame
    from workbench.worlds.stigmergy.tables import attrition_table

    t = attrition_table(validity_frame(tools_run), reply_frame(tools_run), design_of_records(tools_run))
    model = {w["cell_id"]: w["cell"]["model"] for w in tools_run.worlds}
    rows = {model[r["cell_id"]]: r for r in t.to_dict("records")}
    for r in rows.values():  # a valid call is never counted as an empty or JSON-text reply
        assert not any(r[f"{p}: {s}"] for p in ("strict", "lenient")
                       for s in ("empty", "bad JSON", "fenced", "prose-wrapped", "several objects"))
    assert rows["sim/multi-object"]["strict: several calls"] > 0 == rows["sim/multi-object"]["lenient: several calls"]
    assert rows["sim/fencer"]["strict: no call"] > 0 == rows["sim/fencer"]["lenient: no call"]
    scripted = {k: rows["scripted"][k] for k in rows["scripted"] if k.endswith(("call", "calls", "tool", "arguments"))}
    assert scripted == {"strict: no call": 6, "strict: several calls": 6, "strict: unknown tool": 6,
                        "strict: bad arguments": 6, "lenient: no call": 0, "lenient: several calls": 0,
                        "lenient: unknown tool": 6, "lenient: bad arguments": 6}, scripted
    assert rows["sim/diligent"]["invalid replies (strict)"] == 0


def test_a_cells_design_holds_only_its_own_interface(tmp_path: Path) -> None:
    from workbench.design import cell_designs

    study = make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/diligent", "actions": "tools"}])
    text, tools = (cell_designs(study)[c.cell_id] for c in study.cells)
    assert "template system.txt" in text.parts and "template system_tools.txt" not in text.parts
    assert "template system_tools.txt" in tools.parts and "template ops/list.txt" not in tools.parts
    assert not [p for p in text.parts if p.startswith(("template tools/", "template ops_tools/"))]


def test_prompt_cache_off_reaches_every_real_agents_client_and_is_recorded_in_the_cell():
    """prompt_cache is a cell factor (issue 40): off goes to each agent's client as an option,
    auto (the default) sends nothing, so the client follows its catalogue entry."""
    import asyncio

    from tests.conftest import PROMPTS
    from workbench.models.factory import make_client
    from workbench.templates import template_set
    from workbench.worlds.stigmergy.spec import StigmergyCell
    from workbench.worlds.stigmergy.world import StigmergyWorld

    seen: list[dict] = []

    def factory(route, slot, seed, options):  # noqa: ANN001, ANN202
        seen.append(dict(options))
        return make_client(route, seed=seed, **{k: v for k, v in options.items() if k != "prompt_cache"})

    for value, expected in (("off", "off"), ("auto", None)):
        seen.clear()
        cell = StigmergyCell(model="sim/diligent", prompt_cache=value)
        world = StigmergyWorld(cell, world_id="w", seed=1, templates=template_set(PROMPTS), client_factory=factory)
        asyncio.run(world.run())
        assert len(seen) == 4 and all(o.get("prompt_cache") == expected for o in seen)
    assert StigmergyCell().model_dump()["prompt_cache"] == "auto"
