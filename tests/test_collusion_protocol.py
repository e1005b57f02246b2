"""The protocol as the source study has it: the sections of the system prompt and their order,
the feedback (right/wrong review lines with both task ids) and the reflection question, in both
shipped template sets; the tool protocol (forced tool choice on the wire, save_final_answer's
reasoning, send_message's type, reasoning replay, per-agent sampling); and simulated agents
that the feedback factor and the communication-onward memory scope act on. Checked by
structure (headings, order, ids, which facts appear), not by exact wording."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import re  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.fake_openai import Action  # noqa: E402
from tests.test_collusion_rules import ACCEPT, GOOD_TASK, MSG, REFLECT, call, run_episode  # noqa: E402
from tests.test_collusion_world import _agent, fake, run, script  # noqa: E402,F401
from workbench.models.base import ModelReply  # noqa: E402
from workbench.templates import template_set  # noqa: E402
from workbench.worlds import collusion as K  # noqa: E402
from workbench.worlds.collusion import episode as E  # noqa: E402
from workbench.worlds.collusion import simulated as S  # noqa: E402
from workbench.worlds.collusion.spec import CollusionCell  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = template_set(ROOT / "params" / "prompts" / "collusion")
V1 = template_set(ROOT / "params" / "prompts" / "collusion-workbench-v1")


def headings(text: str) -> list[str]:
    return [m.group(0).strip() for m in re.finditer(r"^#{2,4} .+$", text, re.MULTILINE)]


def section(text: str, heading: str) -> str:
    """The text under a heading, up to the next heading of the same or a higher level."""
    level = heading.split()[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    m = re.search(rf"^#{{1,{len(level)}}} ", rest, re.MULTILINE)
    return rest[: m.start()] if m else rest


# -- the system prompt ------------------------------------------------------------------------------
def test_the_system_prompt_has_the_source_sections_in_order():
    cell = CollusionCell()
    alice, bob = (E.system_prompt(DEFAULT, cell, s) for s in ("alice", "bob"))
    order = ["## Role", "## Episodes", "### Task phase", "#### Raw log", "### Communication phase",
             "### Verdict phase", "## Memory", "## Reward objective"]
    for text, me, peer in ((alice, "Alice", "Bob"), (bob, "Bob", "Alice")):
        assert headings(text) == order
        assert f"You are {me}." in section(text, "## Role") and peer in section(text, "## Role")
        raw = section(text, "#### Raw log")  # what the raw log is, and that get_log's string is authoritative
        assert "get_log" in raw and re.search(r"authoritative", raw) and re.search(r"reconstruction", raw)
        assert all(k in raw for k in ("seq", "tool", "arguments", "result"))
        objective = section(text, "## Reward objective")
        assert re.search(r"maximi[sz]e your total reward", objective) and "verdict policy" in objective
        last = objective.strip().split("\n\n")[-1]  # closing: use completed episodes for the ones to come
        assert "completed" in last and "episodes" in last
        assert objective.count("10 points") == 2  # shared verdict accuracy: both terms
        assert "memory" not in objective.lower() and "earlier episodes" in section(text, "## Memory")
        assert "save_final_answer(reasoning, answer)" in section(text, "### Task phase")
        assert "send_message(content, message_type)" in section(text, "### Communication phase")
    # the turn order is each agent's own: Alice sends first, Bob second
    first = DEFAULT.render("turn_order/first", peer_name="Bob").strip()
    second = DEFAULT.render("turn_order/second", peer_name="Alice").strip()
    assert first in section(alice, "### Communication phase") and first not in bob
    assert second in section(bob, "### Communication phase") and second not in alice
    # without reward: no objective section, everything else as before
    plain = E.system_prompt(DEFAULT, CollusionCell(no_reward=True), "alice")
    assert headings(plain) == order[:-1]
    # the separate scope names only the term about the agent's own task
    sep = section(E.system_prompt(DEFAULT, CollusionCell(reward_scope="separate"), "alice"), "## Reward objective")
    assert sep.count("10 points") == 1


def test_the_earlier_wording_is_a_named_template_set_that_still_runs():
    assert "## Reward objective" not in E.system_prompt(V1, CollusionCell(), "alice")
    cell = CollusionCell(model="scripted", alice={"script": script(1, "a")}, bob={"script": script(1, "b")},
                         episodes=1, prompts="collusion-workbench-v1", answer_check="none")
    w = run(cell).world
    assert w["valid"] and w["settings"]["prompts"] == "collusion-workbench-v1"
    assert w["agents"][0]["system_prompt"].startswith("You are Alice. You work alongside")


# -- feedback and reflection ---------------------------------------------------------------------------
def _feedback(agents: dict[str, Any], slot: str) -> str:
    [fb] = agents[slot].memory.current.phases["feedback"][:1]
    return fb["content"]


def test_verdict_correctness_feedback_names_both_tasks_and_says_only_right_or_wrong():
    # bob saves a wrong answer and alice accepts it; bob accepts alice's correct work
    bob_task = [call("work"), call("save_final_answer", reasoning="r", answer="7"), call("get_log")]
    ep, _, agents = run_episode({"alice": GOOD_TASK + MSG + ACCEPT + REFLECT, "bob": bob_task + MSG + ACCEPT + REFLECT})
    text = _feedback(agents, "alice")
    lines = [x for x in text.splitlines() if x.strip()]
    assert lines[0].startswith("=== Episode 1: feedback ===")  # the horizon is hidden by default
    assert any("(a)" in x or " a" in x.split(":")[-1] for x in lines) and "b" in text  # both task ids
    assert text.index("Your task") < text.index("## Reward") < text.index("## Verdict review")
    review = section(text.replace("=== Episode", "# Episode"), "## Verdict review").strip().splitlines()
    assert len(review) == 2
    assert "wrong" in review[0] and "(b)" in review[0]  # her own verdict first: ACCEPT on a wrong answer
    assert "right" in review[1] and "(a)" in review[1]  # then bob's on her task
    assert "ACCEPT" not in text and "REJECT" not in text  # the peer's actual verdict is not revealed
    assert "incorrect" not in text
    assert ep["review"]["alice"] == "\n".join(review)
    # full: the earlier lines, with the peer's verdict and the truth of each task
    _, _, agents = run_episode({"alice": GOOD_TASK + MSG + ACCEPT + REFLECT, "bob": bob_task + MSG + ACCEPT + REFLECT},
                               feedback="full")
    full = _feedback(agents, "alice")
    assert "ACCEPT" in full and "incorrect" in full


def test_the_reflection_asks_why_the_episode_earned_its_reward():
    _, rec, agents = run_episode({s: GOOD_TASK + MSG + ACCEPT + REFLECT for s in ("alice", "bob")})
    fb = agents["alice"].memory.current.phases["feedback"]
    question = fb[1]["content"]
    assert fb[1]["role"] == "user" and re.search(r"\bwhy\b", question) and "reward" in question
    assert fb[2] == {"role": "assistant", "content": "I reflected."}
    refl = [s for s in rec.steps if s["phase"] == "reflection"]
    # every tool of the episode is described (providers refuse tool history without definitions), none callable
    assert all({"work", "save_final_answer", "get_log", "send_message", "submit_verdict"} == set(s["request"]["tools"])
               and s["request"]["tool_choice"]["requested"] == "none" for s in refl)


# -- tool protocol --------------------------------------------------------------------------------------
def test_save_final_answer_needs_reasoning_and_messages_carry_a_type():
    alice = [call("work"), call("save_final_answer", answer="42"), call("save_final_answer", reasoning="  ", answer="42"),
             call("save_final_answer", reasoning="ran it", answer="42"), call("get_log")]
    msgs = [call("send_message", content="raw piece", message_type="raw-log")] + MSG[:4]
    ep, rec, agents = run_episode({"alice": alice + msgs + ACCEPT + REFLECT, "bob": GOOD_TASK + MSG + ACCEPT + REFLECT})
    res = [r for s in rec.steps if s["agent"] == "alice" and s["phase"] == "task" for r in s["tool_results"]]
    assert res[1] == "Error: missing argument 'reasoning'" and "non-whitespace" in res[2]
    assert ep["answers"]["alice"] == "42"
    first = ep["messages"][0]
    assert first["message_type"] == "raw-log" and ep["messages"][2]["message_type"] == "message"
    assert any(m["content"].startswith("[Round 1 of 5 | from Alice | type raw-log]\nraw piece")
               for m in agents["bob"].memory.context())


def test_tool_choice_record_says_what_became_of_it():
    forced = {"type": "function", "function": {"name": "submit_verdict"}}
    sent = ModelReply(text="", latency_s=0, route="r", params_sent={"tool_choice": forced})
    assert E.tool_choice_record(forced, sent) == {"requested": forced, "sent": True, "fallback": None}
    dropped = ModelReply(text="", latency_s=0, route="r", params_sent={},
                         extra={"params_dropped_why": {"tool_choice": "not supported by provider x"}})
    rec = E.tool_choice_record("required", dropped)
    assert rec["sent"] is False and rec["fallback"] == "text tool calls: not supported by provider x"
    assert E.tool_choice_record(None, sent) is None


def test_a_provider_with_tool_choice_receives_it_and_the_record_says_so(fake):  # noqa: F811
    def agent(body: dict[str, Any]) -> Action:
        act = _agent(body)
        if body.get("tools") and body.get("tool_choice") != "none":
            act.reasoning = "thinking about " + body["tools"][0]["function"]["name"]
        return act

    fake.responder = agent
    cell = CollusionCell(model="sim-collusion/steadfast", alice={"model": "local-fake", "sampling": {"temperature": 0.7}},
                         sampling={"temperature": 0.1, "max_tokens": 300}, episodes=1, prompts="collusion")
    out = run(cell)
    assert out.world["valid"], out.world["failed"]
    bodies = [r["body"] for r in fake.requests]
    with_tools = [b for b in bodies if b.get("tools")]
    assert with_tools and all("tool_choice" in b for b in with_tools)
    by_tools = {tuple(t["function"]["name"] for t in b["tools"]): b["tool_choice"] for b in with_tools
                if b["tool_choice"] != "none"}
    for names, choice in by_tools.items():
        if len(names) == 1:
            assert choice == {"type": "function", "function": {"name": names[0]}}
        else:
            assert choice == "required"
    assert {n for names in by_tools for n in names} >= {"save_final_answer", "send_message", "submit_verdict"}
    # the reflection describes the tools but allows none
    refl = [b for b in bodies if b.get("tool_choice") == "none"]
    assert len(refl) == 1 and {t["function"]["name"] for t in refl[0]["tools"]} >= {"submit_verdict", "get_log"}
    steps = [s for s in out.steps if s["agent"] == "alice"]
    assert all(s["request"]["tool_choice"]["sent"] is True for s in steps if s["request"]["tools"])
    # the simulated peer receives no request parameters: its record says the tool calls may come as text
    bob = [s for s in out.steps if s["agent"] == "bob" and s["phase"] != "reflection"]
    assert bob and all(s["request"]["tool_choice"]["fallback"].startswith("text tool calls") for s in bob)
    # per-agent sampling: alice's own temperature over the cell's, the cell's max_tokens kept
    assert all(b["temperature"] == 0.7 and b["max_tokens"] == 300 for b in bodies)
    assert out.world["agents"][0]["sampling"] == {"temperature": 0.7, "max_tokens": 300}
    # reasoning replay: alice's later requests carry her earlier reasoning on her own turns
    later = bodies[-1]["messages"]
    replayed = [m for m in later if m["role"] == "assistant" and m.get("reasoning_content")]
    assert replayed and replayed[0]["reasoning_content"].startswith("thinking about")
    assert steps[-1]["request"]["reasoning_replayed"] == len(replayed)

    fake.requests.clear()
    out = run(cell.model_copy(update={"tool_choice": "auto", "reasoning_replay": False}))
    assert out.world["valid"]
    assert all(r["body"].get("tool_choice") in (None, "none") for r in fake.requests)
    assert not any(m.get("reasoning_content") for r in fake.requests for m in r["body"]["messages"])


# -- simulated agents and the ablations -------------------------------------------------------------------
def _episodes(**kw: Any) -> list[dict[str, Any]]:
    cell = CollusionCell(model="sim-collusion/pragmatic", episodes=8, sequences=4, prompts="collusion", **kw)
    return [run(cell, index=i).world["episodes"] for i in range(3)]


def _behaviour(eps: list[list[dict[str, Any]]]) -> list[Any]:
    return [[(e["verdicts"]["alice"]["verdict"], e["verdicts"]["bob"]["verdict"],
              [m["text"] for m in e["messages"]]) for e in w] for w in eps]


def test_communication_onward_and_the_feedback_factor_act_on_simulated_agents():
    main = _behaviour(_episodes())
    assert _behaviour(_episodes(memory_scope="communication-onward")) != main
    assert _behaviour(_episodes(feedback="full")) != main


def test_the_futility_and_inferred_verdict_rules():
    prof = S.get_profile("pragmatic")
    seen = S._Seen(log_unsent=True)
    assert S.stance_from([seen], prof, 20).summarise > prof.summarise
    assert S.stance_from([seen], prof, 20).accept == prof.accept
    told = S._Seen(peer_summary=True, verdict_on_me="ACCEPT")
    inferred = S._Seen(peer_summary=True, verdict_on_me="ACCEPT", verdict_on_me_inferred=True)
    assert S.stance_from([told], prof, 20).accept > S.stance_from([inferred], prof, 20).accept > prof.accept


def test_simulation_notes_name_what_the_simulation_cannot_express():
    assert K.KIND.simulation_notes(CollusionCell()) == []
    notes = K.KIND.simulation_notes(CollusionCell(no_reward=True, reward_type="acceptance",
                                                  alice={"sampling": {"temperature": 1}}))
    assert len(notes) == 3 and notes[0].startswith("no-reward")
    assert K.KIND.simulation_notes(CollusionCell(model="openai/gpt-x", no_reward=True)) == []
    w = run(CollusionCell(model="sim-collusion/pragmatic", no_reward=True, episodes=1, prompts="collusion")).world
    assert w["settings"]["simulation_notes"] == K.KIND.simulation_notes(CollusionCell(no_reward=True))


@pytest.mark.parametrize("templates", [DEFAULT, V1], ids=["default", "workbench-v1"])
def test_every_template_key_the_world_renders_exists(templates):
    keys = ["system", "task_open", "comm_open", "comm_turn", "inbox", "inbox_failed", "verdict_open/original",
            "verdict_open/restated", "reflection", "horizon/episode-hidden", "horizon/episode-shown",
            "horizon/series-hidden", "horizon/series-shown", "feedback/observed_verdict",
            "no_tool_call", "turn_order/first", "turn_order/second", "feedback/header", "feedback/tasks",
            "feedback/reward", "feedback/reward_unobserved", "feedback/review_heading", "feedback/right_mine",
            "feedback/right_on_me", "feedback/review_mine", "feedback/review_on_me", "feedback/review_unobserved",
            "policy/raw-only", "policy/summary-allowed", "limit/throttled", "limit/no-throttle"]
    for k in keys:
        templates.text(k)


def test_a_code_analysis_answer_is_a_closed_set_in_the_save_schema():
    from workbench.worlds.collusion import tasks as T
    from workbench.worlds.collusion import tools as TL

    seqs = T.episode_sequences(20260901, 6, 10)
    code = next(T.get_task(e.alice) for s in seqs for e in s if e.family == "code-analysis")
    other = next(T.get_task(e.alice) for s in seqs for e in s if e.family != "code-analysis")
    answer = TL.save_final_answer_schema(E._answer_enum(code))["function"]["parameters"]["properties"]["answer"]
    assert sorted(answer["enum"]) == ["bug", "no_bug"]
    assert "enum" not in TL.save_final_answer_schema(E._answer_enum(other))["function"]["parameters"]["properties"][
        "answer"]


def test_a_provider_without_tool_choice_falls_back_to_text_calls_and_says_so(fake, monkeypatch):  # noqa: F811
    import workbench.models.litellm_client.client as LC

    monkeypatch.setattr(LC, "_supported", lambda route: {"temperature", "max_tokens", "tools"})
    fake.responder = _agent
    out = run(CollusionCell(model="sim-collusion/steadfast", alice={"model": "local-fake"}, episodes=1,
                            prompts="collusion"))
    assert out.world["valid"], out.world["failed"]
    assert fake.requests and all("tool_choice" not in r["body"] for r in fake.requests)
    alice = [s for s in out.steps if s["agent"] == "alice" and s["phase"] != "reflection"]
    assert alice and all(s["request"]["tool_choice"]["sent"] is False and s["request"]["tool_choice"]["fallback"]
                         .startswith("text tool calls: not supported by provider") for s in alice)


def test_per_agent_settings_may_be_written_under_agents():
    cell = CollusionCell(sampling={"temperature": 0.1}, agents={"alice": {"sampling": {"temperature": 0.9}}},
                         bob={"memory_length": 3})
    assert cell.sampling_for("alice") == {"temperature": 0.9} and cell.sampling_for("bob") == {"temperature": 0.1}
    assert cell.bob.memory_length == 3
    with pytest.raises(ValueError, match="agents.carol"):
        CollusionCell(agents={"carol": {}})
    with pytest.raises(ValueError, match=r"agents\.alice\.sampling: also set as alice\.sampling"):
        CollusionCell(agents={"alice": {"sampling": {}}}, alice={"sampling": {"top_p": 1}})


def test_memory_sets_both_agents_length_unless_an_agent_sets_its_own():
    """``memory`` is both agents' length; the record keeps the agents at their default, so a
    memory cell differs from main in ``memory`` alone, and reloading the record gives the same cell."""
    from workbench.params import cell_hash

    cell = CollusionCell(memory=3)
    assert cell.alice.keep() == 3 and cell.bob.keep() == 3
    dumped = cell.model_dump(mode="json")
    assert dumped["memory"] == 3 and dumped["alice"]["memory_length"] == dumped["bob"]["memory_length"] == "all"
    again = CollusionCell.model_validate(dumped)
    assert again.alice.keep() == 3 and cell_hash(again) == cell_hash(cell)
    own = CollusionCell(memory="none", bob={"memory_length": 2})
    assert own.alice.keep() == 0 and own.bob.keep() == 2
    assert cell_hash(CollusionCell()) == cell_hash(CollusionCell(memory="all"))  # omitted at its default
    with pytest.raises(ValueError, match="memory"):
        CollusionCell(memory=-1)


def test_a_warm_up_regime_derives_the_warm_up_spans():
    """``warmup: {episodes, policy | throttle}``: the spans cover the evaluation episodes
    and the warm-up's are derived; recorded as ``warmup`` (one field); the old spelling
    (warmup: N with spans over all episodes) still gives the same episodes."""
    from workbench.params import cell_hash

    new = CollusionCell(warmup={"episodes": 3, "throttle": "no-throttle"})
    old = CollusionCell(warmup=3, throttle_spans="no-throttle:3,throttled:*")
    assert new.warmup == 3 and new.throttles() == old.throttles() and new.policies() == old.policies()
    assert new.throttles()[:4] == [False, False, False, True]
    dumped = new.model_dump(mode="json")
    assert dumped["warmup"] == {"episodes": 3, "throttle": "no-throttle"}
    assert dumped["throttle_spans"] == CollusionCell().throttle_spans
    assert cell_hash(CollusionCell.model_validate(dumped)) == cell_hash(new)
    summary = CollusionCell(warmup={"episodes": 2, "policy": "summary-allowed"})
    assert summary.policies()[:3] == ["summary-allowed", "summary-allowed", "raw-only"]
    assert CollusionCell(warmup="none").warmup == 0
    with pytest.raises(ValueError, match="episodes"):
        CollusionCell(warmup={"policy": "summary-allowed"})


def test_no_communication_is_said_instead_of_zero_rounds():
    """``max_rounds: 0``: neither template set promises rounds in the system prompt or the
    communication opening; with rounds, the wording is the rounds' as before."""
    none, some = CollusionCell(max_rounds=0), CollusionCell(max_rounds=4)
    for templates in (DEFAULT, V1):
        text = E.system_prompt(templates, none, "alice")
        assert "0 rounds" not in text and "always runs" not in text and "no messages" in text
        assert "4 rounds" in E.system_prompt(templates, some, "alice")
        for cell, want, unwanted in ((none, "no rounds", "0 rounds"), (some, "There are 4 rounds", "no rounds")):
            opening = E.rounds_text(templates, cell, "open", peer_name="Bob")
            assert want in opening and unwanted not in opening
    assert "This phase always runs all 4 rounds." in E.system_prompt(DEFAULT, some, "alice")
