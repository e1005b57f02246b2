"""Simulated role-played agents and the simulated judge of the recall world.

A simulated agent acts only on the text of the messages it is sent, like a
real model. On a recall question it collects candidates from its context:

- the "Shared memory" lines of the question (retrieved entries, in rank order,
  with author and authority when the prompt shows them);
- its own earlier statements (the turn contents it voiced, in its private
  history) that share content words with the question;
- when the condition puts them in context (``baseline``, or ``conversation:
  true``): the case file (the record, authority 1) and the conversation so far,
  each line with its speaker (its own lines, marked "you", count as its own
  statements; another speaker's authority is its role's in the team, as a real
  model knows a paralegal from a senior lawyer). The conversation has no ranks:
  its latest on-topic line plays the top rank's part, and in the weighing a
  line's lateness counts half as much as a retrieved entry's rank.

A candidate's *value* is its set of date/number/amount/dose/name-like tokens
that the question does not contain. The profile decides which candidate the
agent repeats as its answer:

- ``self_trust``: the chance it answers from its own earlier statement when
  one is on topic (stale private reasoning over fresh memory: belief asymmetry);
- ``authority_sensitivity``: when authors are shown, the chance it takes the
  highest-authority entry;
- ``rank_trust``: the chance it takes the top-ranked entry (a wrong entry that
  outranks the right one: authority collapse);
- otherwise it weighs the entries: a rank prior, plus ``conformity`` × how many
  other entries repeat its value (memory anchoring), plus ``update_cue`` when the
  entry says it corrects or supersedes something, plus ``authority_sensitivity``
  × its authority when shown.

On a statement turn an agent acknowledges; a profile with ``echo`` instead
restates, with that chance, a value it holds about the statement's topic: with
chance ``echo_primacy`` the earliest one it has seen (the case file, the
conversation, its own lines, memory shown on earlier turns: first impressions),
else the one it would answer with. Under ``memory_writes: replies`` such replies
are stored, so a team that repeats an old value pollutes memory (anchoring).

So the failure modes arise from what retrieval put in front of the agent and
from its disposition, never from a table of outcomes. Every draw is made at
every recall in the same order, so worlds with the same seed are paired
across conditions. Everything here is simulated behaviour, never a
measurement of a model: replies carry ``extra.simulated = True``.

The simulated judge reads the judge prompt (question, accepted answers, the
answer) and compares canonical values (dates in any common format, amounts,
numbers with units; words otherwise), so it accepts paraphrases that
substring matching misses and refuses wrong values.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workbench.errors import InputError
from workbench.models.base import ModelReply, ModelRequest, approx_tokens
from workbench.models.simulated import SimulatedAgent
from workbench.worlds.recall.scoring import judge_rule
from workbench.worlds.recall.values import (  # noqa: F401  (re-exported)
    canonical_values,
    content_words,
    rule_value,
    value_tokens,
    words,
)

PREFIX = "sim-recall"
JUDGE = "judge"


class Cues(BaseModel):
    """Regular expressions by which a simulated agent reads its prompts. They match
    the shipped templates in params/prompts/recall; reworded templates need these
    adjusted (as a profile field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    statement: str = r"(?s)^\[turn (\d+)\] Your statement to the team:\n(.*?)\n---"
    question: str = r"(?m)^Question: (.*)$"
    memory_header: str = r"(?m)^Shared memory \(.*\):$"
    memory_line: str = r"^- (.*)$"
    authored: str = r"^\(([\w .-]+), authority ([0-9.]+)\) (.*)$"
    judge_question: str = r"(?m)^Question: (.*)$"
    judge_accepted: str = r"(?m)^Accepted answer: (.*)$"
    judge_answer: str = r"(?s)Answer to judge:\n<<<\n(.*?)\n>>>"
    value_statement: str = r"(?s)Statement:\n<<<\n(.*?)\n>>>"
    conflict_pair: str = r"(?s)Statement A:\n<<<\n(.*?)\n>>>\nStatement B:\n<<<\n(.*?)\n>>>"
    update: str = r"(?i)\b(correct(ed|ion)|supersed\w*|updat\w*|revis\w*|amend\w*|chang\w*|now|instead|replac\w*|moved)\b"
    case_header: str = r"(?m)^Case file \(initial facts\):$"
    conversation_header: str = r"(?m)^Conversation so far \(.*\):$"
    conversation_line: str = r"^\[turn (\d+)\] ([^:]+): (.*)$"
    conversation_reply: str = r"^  ([^:]+?) replied: (.*)$"
    own_speaker: str = r"^you\b"
    message_turn: str = r"^\[turn (\d+)\]"


class RecallProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    self_trust: float = Field(0.2, ge=0, le=1)
    rank_trust: float = Field(0.8, ge=0, le=1)
    conformity: float = Field(0.3, ge=0, le=5)
    authority_sensitivity: float = Field(0.5, ge=0, le=1)
    update_cue: float = Field(0.3, ge=0, le=5)
    echo: float = Field(0.0, ge=0, le=1, description="chance that a reply to a statement turn restates a value the "
                                                     "agent holds about the statement's topic (else an acknowledgement)")
    echo_primacy: float = Field(0.0, ge=0, le=1, description="when echoing: chance it restates the earliest value it "
                                                             "holds (first impressions) rather than its answer")
    restate: float = Field(0.0, ge=0, le=1, description="chance a recall answer restates its value in another form "
                                                       "(22 July 2026 for July 22, 2026; $1.2 million; 8 percent)")
    slip: float = Field(0.0, ge=0, le=1, description="chance a recall answer misstates an amount by a near miss "
                                                    "(5 mg as 5.5 mg): wrong, though its words still hold the right ones")
    latency_median_s: float = Field(1.5, gt=0)
    latency_sigma: float = Field(0.4, ge=0)
    cues: Cues = Field(default_factory=Cues)


PROFILES: dict[str, RecallProfile] = {p.name: p for p in [
    RecallProfile(name="trusting", description="takes the top-ranked memory entry; little trust in its own notes; "
                                               "sometimes restates a value in other words or slips on an amount",
                  self_trust=0.1, rank_trust=0.9, conformity=0.2, authority_sensitivity=0.6, update_cue=0.2,
                  restate=0.25, slip=0.1),
    RecallProfile(name="self-anchored", description="answers from its own earlier statements when it has one",
                  self_trust=0.85, rank_trust=0.8, conformity=0.2, authority_sensitivity=0.5, update_cue=0.2),
    RecallProfile(name="conformist", description="goes with the value most entries repeat",
                  self_trust=0.2, rank_trust=0.2, conformity=1.5, authority_sensitivity=0.2, update_cue=0.0),
    RecallProfile(name="careful", description="weighs entries, prefers corrections and senior authors",
                  self_trust=0.1, rank_trust=0.2, conformity=0.1, authority_sensitivity=0.9, update_cue=1.0),
    RecallProfile(name="echo", description="repeats the first value it heard in its replies and goes with the value "
                                           "most entries repeat",
                  self_trust=0.1, rank_trust=0.3, conformity=0.8, authority_sensitivity=0.6, update_cue=1.0,
                  echo=1.0, echo_primacy=0.9),
    RecallProfile(name="skeptical", description="takes no single entry at its word: weighs entries by how many others "
                                                "agree and by the seniority shown, not by rank or 'update' wording "
                                                "(against a lone confident falsehood; open to a repeated stale value)",
                  self_trust=0.1, rank_trust=0.1, conformity=1.0, authority_sensitivity=0.8, update_cue=0.0),
]}

@dataclass
class Candidate:
    text: str
    source: str  # "memory", "own", "case" (the case file) or "conversation" (another role's line)
    rank: int | None = None  # memory rank, 1-based
    turn: int | None = None  # own statement's turn
    author: str | None = None
    authority: float | None = None


def parse_memory(prompt: str, cues: Cues) -> list[Candidate]:
    """The shared-memory lines of a recall prompt, in the order shown."""
    m = re.search(cues.memory_header, prompt)
    if not m:
        return []
    out: list[Candidate] = []
    for line in prompt[m.end():].lstrip("\n").splitlines():
        lm = re.match(cues.memory_line, line)
        if not lm:
            break
        body = lm.group(1)
        am = re.match(cues.authored, body)
        if am:
            try:
                authority: float | None = float(am.group(2))
            except ValueError:
                authority = None
            out.append(Candidate(am.group(3), "memory", rank=len(out) + 1, author=am.group(1), authority=authority))
        else:
            out.append(Candidate(body, "memory", rank=len(out) + 1))
    return out


def parse_own_statements(messages: list[dict[str, str]], cues: Cues) -> list[Candidate]:
    out = []
    for msg in messages[:-1]:
        if msg.get("role") != "user":
            continue
        m = re.search(cues.statement, msg.get("content", ""))
        if m:
            out.append(Candidate(m.group(2).strip(), "own", turn=int(m.group(1))))
    return out


#: What a team member knows of the hierarchy when it reads a conversation: a speaker's
#: authority by the role named (as a real model knows a paralegal from a senior lawyer);
#: the case file is the record. Shown to the profile only through the weighing step.
RECORD_AUTHORITY = 1.0
#: How much a conversation line's lateness counts when weighing (a retrieved entry's rank counts 1).
CONVERSATION_PRIOR = 0.5


def _speaker_authority(speaker: str) -> float | None:
    from workbench.worlds.recall.domains import DOMAINS

    label = re.sub(r"^you \((.*)\)$", r"\1", speaker.strip()).replace(" ", "_")
    for roles in DOMAINS.values():
        if label in roles:
            return float(roles[label])
    return None


def parse_context(messages: list[dict[str, str]], cues: Cues) -> tuple[list[Candidate], list[Candidate]]:
    """The case file and the conversation so far, when the condition puts them in context
    (any user message before the last): (own lines, others' lines and case-file facts).
    Own lines (the speaker is "you ...") are the agent's statements and replies. Each
    line carries its speaker's authority (the role's, from the team's hierarchy; the
    record's for the case file), which profiles weigh as they weigh shown authors."""
    own: list[Candidate] = []
    other: list[Candidate] = []
    for msg in messages[:-1]:
        if msg.get("role") != "user":
            continue
        text = msg.get("content", "")
        m = re.search(cues.case_header, text)
        if m:
            for line in text[m.end():].lstrip("\n").splitlines():
                lm = re.match(cues.memory_line, line)
                if not lm:
                    break
                other.append(Candidate(lm.group(1), "case", turn=0, author="record", authority=RECORD_AUTHORITY))
        m = re.search(cues.conversation_header, text)
        if not m:
            continue
        turn = 0
        for line in text[m.end():].lstrip("\n").splitlines():
            lm = re.match(cues.conversation_line, line)
            rm = None if lm else re.match(cues.conversation_reply, line)
            if lm:
                turn, speaker, body = int(lm.group(1)), lm.group(2), lm.group(3)
            elif rm:
                speaker, body = rm.group(1), rm.group(2)
            else:
                break
            mine = re.match(cues.own_speaker, speaker) is not None
            (own if mine else other).append(Candidate(body, "own" if mine else "conversation", turn=turn,
                                                      author=speaker, authority=_speaker_authority(speaker)))
    return own, other


def on_topic(candidates: list[Candidate], qwords: set[str]) -> dict[int, int]:
    """Candidates that are about the question, by id, with their overlap: those sharing
    at least half as many question words as the candidate that shares the most (a
    lexical reader's notion of "about the same thing")."""
    overlaps = [len(qwords & content_words(c.text)) for c in candidates]
    need = max(1, math.ceil(max(overlaps, default=0) / 2))
    return {id(c): n for c, n in zip(candidates, overlaps) if n >= need}


def choose(profile: RecallProfile, query: str, own: list[Candidate], memory: list[Candidate],
           draws: tuple[float, float, float], context: list[Candidate] | None = None) -> tuple[Candidate | None, str]:
    """The candidate the agent repeats, and why (recorded in the reply's extra).

    ``context``: the case file and the conversation when the condition shows them (its
    own conversation lines come in ``own`` and are weighed with the rest). The
    conversation has no ranks: its latest on-topic line plays the top rank's part."""
    d_self, d_auth, d_rank = draws
    context = context or []
    talk = [*context, *[c for c in own if c.source == "own" and c.author is not None]]  # lines of the conversation
    qwords = content_words(query)
    topical = on_topic([c for c in [*memory, *context, *own] if value_tokens(c.text, query)], qwords)
    on_own = [c for c in own if id(c) in topical]
    best_own = max(on_own, key=lambda c: (topical[id(c)], c.turn or 0), default=None)
    mem = [c for c in memory if id(c) in topical]
    ctx = sorted((c for c in talk if id(c) in topical), key=lambda c: -(c.turn or 0))  # latest first
    if best_own is not None and (not mem and not [c for c in ctx if c.source != "own"] or d_self < profile.self_trust):
        return best_own, "own statement"
    if not mem and not ctx:
        return None, "nothing in context"
    shown = [c for c in mem if c.authority is not None]
    if shown and d_auth < profile.authority_sensitivity:
        top = max(shown, key=lambda c: (c.authority, -(c.rank or 0)))
        return top, "highest authority"
    if d_rank < profile.rank_trust:
        return (mem[0], "top rank") if mem else (ctx[0], "latest statement")
    mem = [*mem, *ctx]
    values = [value_tokens(c.text, query) for c in mem]
    n = len(mem)

    def weight(i: int) -> float:
        c = mem[i]
        support = sum(1 for j in range(n) if j != i and values[i] & values[j])
        prior = 1.0 - i / n
        if c.source != "memory":  # the order of a conversation is a weaker cue than a retrieval's rank
            prior *= CONVERSATION_PRIOR
        w = prior + profile.conformity * support / max(1, n - 1)
        if re.search(profile.cues.update, c.text):
            w += profile.update_cue
        if c.authority is not None:
            w += profile.authority_sensitivity * c.authority
        return w

    best = max(range(n), key=lambda i: (weight(i), -i))
    return mem[best], "weighed"


_ACKS = ("Noted.", "Understood, I will keep that in mind.", "Thanks, noted for the file.", "Agreed.",
         "Got it; proceeding on that basis.")


class RecallSimulatedClient(SimulatedAgent):
    """One simulated team member; seeded, acting only on the messages it receives."""

    virtual_time = True

    def __init__(self, profile: RecallProfile, seed: int, route: str) -> None:
        self.profile = profile
        self.route = route
        self.rng = random.Random(seed)

    async def complete(self, request: ModelRequest) -> ModelReply:
        cues = self.profile.cues
        prompt = request.messages[-1]["content"] if request.messages else ""
        q = re.search(cues.question, prompt)
        extra: dict[str, Any] = {"simulated": True, "profile": self.profile.name}
        if q is None:
            text = self._statement_reply(request.messages, prompt, extra)
        else:
            query = q.group(1).strip()
            draws = (self.rng.random(), self.rng.random(), self.rng.random())
            own_context, context = parse_context(request.messages, cues)
            own = parse_own_statements(request.messages, cues) + own_context
            memory = parse_memory(prompt, cues)
            picked, why = choose(self.profile, query, own, memory, draws, context)
            text = picked.text if picked is not None else "I do not know."
            if picked is not None and (self.profile.restate or self.profile.slip):  # else no draw: streams as before
                d_form = self.rng.random()
                if d_form < self.profile.restate:
                    text, form = restated(text), "restated"
                elif d_form < self.profile.restate + self.profile.slip:
                    text, form = slipped(text), "slip"
                else:
                    form = "verbatim"
                extra["form"] = form if text != picked.text else "verbatim"
            extra.update(chose=why, source=picked.source if picked else None,
                         rank=picked.rank if picked else None, own_turn=picked.turn if picked else None)
        return self.simulated_reply(request, text, extra=extra)

    def _statement_reply(self, messages: list[dict[str, str]], prompt: str, extra: dict[str, Any]) -> str:
        """An acknowledgement; or, for a profile that echoes, a restatement of the value it
        holds about the statement's topic (from memory shown, the conversation, its own lines)."""
        p = self.profile
        if p.echo <= 0:  # the draws of non-echoing profiles are as before
            return self.rng.choice(_ACKS)
        d_echo, d_first = self.rng.random(), self.rng.random()
        draws = (self.rng.random(), self.rng.random(), self.rng.random())
        ack = self.rng.choice(_ACKS)
        sm = re.search(p.cues.statement, prompt)
        if sm is None or d_echo >= p.echo:
            return ack
        content = sm.group(2).strip()
        topic = " ".join(w for w in words(content) if w.lower() not in value_tokens(content))
        current = Candidate(content, "own", turn=int(sm.group(1)))
        own_context, context = parse_context(messages, p.cues)
        own = [*parse_own_statements(messages, p.cues), *own_context, current]
        memory = parse_memory(prompt, p.cues)
        picked: Candidate | None = None
        why = ""
        if d_first < p.echo_primacy:
            # first impressions: the case file, the conversation, its own lines, and the memory it was
            # shown on earlier turns (each dated by the turn of the message that showed it)
            seen = []
            for msg in messages[:-1]:
                tm = re.match(p.cues.message_turn, msg.get("content", "")) if msg.get("role") == "user" else None
                if tm:
                    seen += [Candidate(c.text, "memory", rank=c.rank, turn=int(tm.group(1)))
                             for c in parse_memory(msg["content"], p.cues)]
            seen += [Candidate(c.text, "memory", rank=c.rank, turn=current.turn) for c in memory]
            qwords = content_words(topic)
            pool = [c for c in [*context, *own, *seen] if value_tokens(c.text, topic)]
            topical = on_topic(pool, qwords)
            timed = [c for c in pool if id(c) in topical and c.turn is not None]
            if timed:
                # memory shown at a turn was written before that turn's statement
                picked = min(timed, key=lambda c: (c.turn or 0, c.source != "memory", c.rank or 0))
                why = "earliest value"
        if picked is None:
            picked, why = choose(p, topic, own, memory, draws, context)
        extra.update(echo=why, source=picked.source if picked else None)
        return f"Noted: {picked.text}" if picked is not None else ack


# -- answers in other words -------------------------------------------------------------
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DATE = re.compile(r"\b(" + "|".join(_MONTHS) + r") (\d{1,2}), (\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DOLLARS = re.compile(r"\$(\d{1,3}(?:,\d{3})+)(?!\d)")
_PERCENT = re.compile(r"\b(\d+(?:\.\d+)?)%")
_AMOUNT = re.compile(r"\b(\d+)(\s?(?:%|percent|mg|kg|ml|mL|g|units?|days?|weeks?|months?|hours?|years?)\b|%)")


def restated(text: str) -> str:
    """The first value of ``text`` in another form a reader takes as the same: a date
    as day month year, dollars in millions or thousands, a percentage in words."""
    if m := _DATE.search(text):
        return text[:m.start()] + f"{int(m.group(2))} {m.group(1)} {m.group(3)}" + text[m.end():]
    if m := _ISO.search(text):
        month = _MONTHS[int(m.group(2)) - 1]
        return text[:m.start()] + f"{int(m.group(3))} {month} {m.group(1)}" + text[m.end():]
    if m := _DOLLARS.search(text):
        n = int(m.group(1).replace(",", ""))
        for size, word in ((1_000_000, "million"), (1_000, "thousand")):
            if n >= size and (n * 10) % size == 0:
                return text[:m.start()] + f"${n / size:g} {word}" + text[m.end():]
    if m := _PERCENT.search(text):
        return text[:m.start()] + f"{m.group(1)} percent" + text[m.end():]
    return text


def slipped(text: str) -> str:
    """A near miss: the first whole amount with a unit given with half a unit more (5 mg
    as 5.5 mg). Word by word the answer still holds the right amount; its value is wrong."""
    m = _AMOUNT.search(text)
    return text if m is None else text[:m.start()] + f"{m.group(1)}.5{m.group(2)}" + text[m.end():]


# -- the simulated judge ---------------------------------------------------------------
def judge_match(answer: str, accepted: list[str]) -> bool:
    """True when the answer holds every canonical value of one accepted answer (or,
    for an accepted answer without values, all of its content words)."""
    vals = canonical_values(answer)
    awords = content_words(answer) | {w.lower() for w in words(answer)}
    for acc in accepted:
        need = canonical_values(acc)
        if need:
            if need <= vals:
                return True
        else:
            cw = {w.lower() for w in words(acc)}
            if cw and cw <= awords:
                return True
    return False


class SimulatedJudge:
    """Reads the judge prompt and answers CORRECT or INCORRECT with a short reason."""

    virtual_time = True

    def __init__(self, seed: int, route: str, cues: Cues | None = None) -> None:
        self.route = route
        self.cues = cues or Cues()
        self.rng = random.Random(seed)

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt = request.messages[-1]["content"] if request.messages else ""
        accepted = [a.strip() for a in re.findall(self.cues.judge_accepted, prompt)]
        m = re.search(self.cues.judge_answer, prompt)
        v = re.search(self.cues.value_statement, prompt)
        c = re.search(self.cues.conflict_pair, prompt)
        if c is not None and m is None:  # do two entries conflict? (conflicts: judge)
            from workbench.worlds.recall.conflicts import simulated_judge_rule

            text = "YES" if simulated_judge_rule(c.group(1), c.group(2)) else "NO"
        elif v is not None and m is None:  # which value does a statement give? (values: judge)
            text = rule_value(v.group(1)) or "NONE"
        elif not accepted or m is None:
            text = "I cannot judge: the prompt gives no accepted answer or no answer."
        else:  # the same rule the report's rule judge applies (one rule, so the two can be compared)
            ruling = judge_rule(m.group(1), accepted)
            text = f"{'CORRECT' if ruling.verdict else 'INCORRECT'}: {ruling.reason}"
        latency = round(0.8 * math.exp(self.rng.gauss(0.0, 0.3)), 6)
        prompt_tokens = sum(approx_tokens(x["content"]) for x in request.messages)
        return ModelReply(text=text, latency_s=latency, route=self.route, model_returned=self.route,
                          usage={"prompt_tokens": prompt_tokens, "completion_tokens": approx_tokens(text)},
                          cost_usd=0.0, params_requested=dict(request.params),
                          extra={"simulated": True, "profile": JUDGE})


# -- the route family -------------------------------------------------------------------
def check(route: str) -> None:
    """ValueError naming the known profiles for a route this family cannot build."""
    name = route.split("/", 1)[1] if "/" in route else ""
    if name != JUDGE and name not in PROFILES:
        raise InputError(f"unknown simulated recall profile {name!r} in {route!r}; expected "
                         f"{PREFIX}/<profile> with one of {', '.join(sorted(PROFILES))}, or {PREFIX}/{JUDGE}")


def build(route: str, *, seed: int, **options: Any) -> RecallSimulatedClient | SimulatedJudge:
    """Options of real clients (budget, cache) are ignored: nothing is spent here."""
    check(route)
    name = route.split("/", 1)[1]
    if name == JUDGE:
        return SimulatedJudge(seed, route)
    return RecallSimulatedClient(PROFILES[name], seed, route)


def register() -> None:
    from workbench.models.factory import register_route

    register_route(PREFIX, build, check=check)
