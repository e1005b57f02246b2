"""Seeded generator of recall scenario scripts, for studies that need more scripts
than the fifteen authored ones.

Each generated script follows the same design as the authored ones, so that each
failure mode arises from retrieval and from the agents' private histories rather
than from a label:

- authority collapse: the case file (authority 1.0) states the value; late in the
  scenario a low-authority role writes a wrong value in words that echo the
  recall question, so similarity and recency favour it unless authority counts;
- belief asymmetry: the recalling role itself states the old value early, then a
  more senior role writes the update to shared memory;
- memory anchoring: two or three lower-authority roles repeat an early value
  (phrased like the question); one senior role later corrects it in other words.

The same (domain, failure_modes, seed) always gives the same script (one
``random.Random`` seeded by hashing, no global state); values of one topic never
contain one another, so exact-match scoring cannot credit a wrong statement."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

from workbench.seeding import rng_for
from workbench.worlds.recall.domains import DOMAINS, NARRATOR
from workbench.worlds.recall.scripts import FAILURE_MODES, load_script, script_from_dict

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]


# ---------------------------------------------------------------- values

def _date(rng: Random) -> tuple[str, list[str]]:
    m, d = rng.randrange(12), rng.randint(1, 28)
    return f"{_MONTHS[m]} {d}, 2026", [f"{_MONTHS[m]} {d}, 2026", f"{d} {_MONTHS[m]} 2026"]


def _money(lo: int, hi: int, step: int) -> Callable[[Random], tuple[str, list[str]]]:
    def make(rng: Random) -> tuple[str, list[str]]:
        v = f"${rng.randrange(lo, hi, step):,}"
        return v, [v, v[1:]]
    return make


def _millions(rng: Random) -> tuple[str, list[str]]:
    v = f"${rng.randint(12, 98) / 10:.1f} million"
    return v, [v, v[1:]]


def _unit(lo: int, hi: int, step: int, unit: str) -> Callable[[Random], tuple[str, list[str]]]:
    def make(rng: Random) -> tuple[str, list[str]]:
        v = f"{rng.randrange(lo, hi, step)} {unit}"
        return v, [v]
    return make


def _count(lo: int, hi: int, step: int) -> Callable[[Random], tuple[str, list[str]]]:
    def make(rng: Random) -> tuple[str, list[str]]:
        v = f"{rng.randrange(lo, hi, step):,}"
        return v, [v]
    return make


def _percent(lo: int, hi: int, suffix: str = "") -> Callable[[Random], tuple[str, list[str]]]:
    def make(rng: Random) -> tuple[str, list[str]]:
        n = rng.randint(lo, hi)
        return f"{n}%{suffix}", [f"{n}%{suffix}", f"{n} percent{suffix}"]
    return make


def _clock(rng: Random) -> tuple[str, list[str]]:
    v = f"{rng.randint(7, 19):02d}:{rng.choice([0, 15, 30, 45]):02d}"
    return v, [v]


@dataclass(frozen=True)
class Topic:
    """A fact that can be asked about: ``subject`` reads after "the"; ``source`` names
    the record that states it."""

    subject: str
    source: str
    value: Callable[[Random], tuple[str, list[str]]]
    question: str = "What is the {subject}?"


TOPICS: dict[str, list[Topic]] = {
    "legal": [
        Topic("filing deadline for the appellate brief", "Court order", _date),
        Topic("settlement offer from opposing counsel", "Negotiation log", _money(90_000, 400_000, 5_000)),
        Topic("date of the mediation session", "Mediator's letter", _date),
        Topic("earnest money deposit for the property", "Purchase agreement", _money(50_000, 250_000, 10_000)),
        Topic("cap on the indemnity", "Signed agreement", _money(500_000, 3_000_000, 50_000)),
        Topic("exclusivity period in the term sheet", "Term sheet", _unit(6, 37, 3, "months")),
        Topic("hearing date for the summary judgment motion", "Scheduling order", _date),
        Topic("number of documents in the production", "Vendor report", _count(2_000, 60_000, 500)),
    ],
    "medical": [
        Topic("enoxaparin dose", "Attending order", _unit(20, 121, 20, "mg")),
        Topic("furosemide dose", "Attending order", _unit(20, 81, 20, "mg")),
        Topic("time of the abdominal CT scan", "Radiology booking", _clock),
        Topic("intravenous fluid rate", "Attending order", _unit(30, 151, 5, "mL per hour")),
        Topic("planned discharge date", "Care plan", _date),
        Topic("gentamicin dose", "Attending order", _unit(160, 481, 40, "mg")),
        Topic("start time of the oral rehydration trial", "Care plan", _clock),
        Topic("insulin glargine dose at bedtime", "Attending order", _unit(10, 41, 2, "units")),
    ],
    "finance": [
        Topic("single-stock weight limit for the fund", "Investment committee rule", _percent(4, 12, " of NAV")),
        Topic("duration target for the portfolio", "Mandate", _unit(3, 10, 1, "years")),
        Topic("date of the quarterly rebalance", "Calendar", _date),
        Topic("one-day Value-at-Risk limit", "Risk limits sheet", _millions),
        Topic("hedge ratio for the USD exposure", "Board policy", _percent(40, 95)),
        Topic("offer price per share for the target company", "Merger agreement", _money(20, 120, 1)),
        Topic("next interest payment date", "Credit agreement", _date),
        Topic("target cash buffer for the fund", "Liquidity policy", _percent(1, 9, " of NAV")),
    ],
}

_LEAD_INS = ["Quick check before I go on.", "I need this for my notes.", "Someone is asking me now.",
             "Before I sign off.", "For the record."]
_DISTRACTORS: dict[str, list[str]] = {
    "legal": ["The client wants a short status email every Friday.", "The exhibit binder is nearly complete.",
              "The conference room is booked for the team meeting.", "External experts have sent their invoices."],
    "medical": ["The patient slept well overnight.", "Physiotherapy will visit this afternoon.",
                "The family asked about visiting hours.", "Observations have been stable since the morning."],
    "finance": ["Markets opened quietly this morning.", "The client report template has a new page.",
                "Operations confirmed yesterday's settlements.", "The auditors will visit next month."],
}


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _values(topic: Topic, rng: Random, n: int) -> list[tuple[str, list[str]]]:
    """``n`` values of a topic, none of whose accepted forms occurs inside another's text."""
    out: list[tuple[str, list[str]]] = []
    for _ in range(1000):
        v, accepted = topic.value(rng)
        clash = any(_squash(a) in _squash(w) or _squash(b) in _squash(v)
                    for w, others in out for a in accepted for b in others)
        if not clash:
            out.append((v, accepted))
            if len(out) == n:
                return out
    raise RuntimeError(f"could not draw {n} distinct values for {topic.subject!r}")  # pragma: no cover


_FILLER_WORDS = frozenset("the a an of for to in on at is".split())


def _subject_words(topic: Topic) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", topic.subject.lower()) if w not in _FILLER_WORDS}


def _disjoint_topics(rng: Random, domain: str, n: int) -> list[Topic]:
    """``n`` topics whose subjects share no word, so that an agent's statement about
    one fact never looks relevant to a question about another."""
    for _ in range(1000):
        picked = rng.sample(TOPICS[domain], n)
        seen: set[str] = set()
        if all(not (_subject_words(t) & seen) and not seen.update(_subject_words(t)) for t in picked):  # type: ignore[func-returns-value]
            return picked
    raise RuntimeError(f"no {n} topics with disjoint subjects in {domain!r}")  # pragma: no cover


# ---------------------------------------------------------------- roles

def _by_authority(domain: str) -> list[str]:
    return sorted(DOMAINS[domain], key=lambda r: (DOMAINS[domain][r], r))


def _pick(rng: Random, roles: Sequence[str], avoid: set[str]) -> str:
    free = [r for r in roles if r not in avoid]
    return rng.choice(free or list(roles))


# ---------------------------------------------------------------- one script

def generate_script(domain: str, failure_modes: Sequence[str], seed: int, script_id: str | None = None) -> dict[str, Any]:
    """One scenario script (a dict in the JSON schema) with one recall per entry of
    ``failure_modes`` (2 to 4 entries), each about its own fact, plus distractors."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known domains: {', '.join(DOMAINS)}")
    modes = list(failure_modes)
    bad = [m for m in modes if m not in FAILURE_MODES]
    if bad:
        raise ValueError(f"unknown failure mode(s) {bad}; expected some of: {', '.join(FAILURE_MODES)}")
    if not 1 <= len(modes) <= 4:
        raise ValueError(f"expected 1 to 4 failure modes (one recall each), got {len(modes)}")
    rng = rng_for("recall-script", domain, ",".join(modes), seed)
    auth = DOMAINS[domain]
    ranked = _by_authority(domain)
    top = ranked[-1]
    topics = _disjoint_topics(rng, domain, len(modes) + 1)
    facts: list[dict[str, Any]] = []
    early: list[dict[str, Any]] = []
    middle: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []
    recalls: list[dict[str, Any]] = []
    involved: dict[str, set[str]] = {}  # fact id -> roles that spoke about it
    recallers: set[str] = set()

    def statement(role: str, content: str, fid: str | None, write: bool) -> dict[str, Any]:
        if fid:
            involved.setdefault(fid, set()).add(role)
        return {"role": role, "content": content, "is_recall": False, "target_fact_id": None, "ground_truth": [],
                "recall_query": None, "failure_mode": "", "write_to_memory": write, "fact_id": fid}

    for i, (mode, topic) in enumerate(zip(modes, topics)):
        fid = f"F{i + 1}"
        question = topic.question.format(subject=topic.subject)
        subject = topic.subject
        if mode == "authority_collapse":
            (right, accepted), (wrong, _) = _values(topic, rng, 2)
            facts.append({"id": fid, "text": f"{topic.source}: the {subject} is set at {right}.", "tier": "structural",
                          "authority_level": 1.0})
            low = _pick(rng, [r for r in ranked if auth[r] <= 0.6], set())
            late.append(statement(low, f"Note for the team: the {subject} is {wrong}.", fid, True))
            truth = accepted
        elif mode == "belief_asymmetry":
            (old, _), (new, accepted) = _values(topic, rng, 2)
            facts.append({"id": fid, "text": f"{topic.source}: the {subject} is {old}.", "tier": "contextual",
                          "authority_level": 0.6})
            recaller = _pick(rng, [r for r in ranked if r != top], recallers)
            early.append(statement(recaller, f"I am planning around the {subject} being {old}.", fid, rng.random() < 0.3))
            updater = _pick(rng, [r for r in ranked if auth[r] > 0.6 and r != recaller], set())
            middle.append(statement(updater, f"Update: the {subject} has changed and is now {new}.", fid, True))
            truth = accepted
        else:  # memory_anchoring
            (old, _), (new, accepted) = _values(topic, rng, 2)
            facts.append({"id": fid, "text": f"Early note, to be confirmed: the {subject} is {old}.",
                          "tier": "contextual", "authority_level": 0.4})
            corrector = _pick(rng, [r for r in ranked if auth[r] >= 0.8], set())
            lower = [r for r in ranked if auth[r] < auth[corrector]]
            repeaters = rng.sample(lower, min(len(lower), rng.choice([2, 3])))
            phrasings = [f"The {subject} is {old}.", f"Noting for everyone: the {subject} is {old}.",
                         f"As I understand it, the {subject} is {old}."]
            for role, text in zip(repeaters, rng.sample(phrasings, len(repeaters))):
                early.append(statement(role, text, fid, True))
            late.append(statement(corrector, f"Correction after checking the originals: the {subject} "
                                             f"should now read {new}.", fid, True))
            truth = accepted
        # the recaller: a team role that has not spoken about this fact (belief: the one who did)
        if mode == "belief_asymmetry":
            who = recaller
        else:
            who = _pick(rng, [r for r in ranked if r not in involved.get(fid, set())], recallers)
        recallers.add(who)
        recalls.append({"role": who, "content": f"{rng.choice(_LEAD_INS)} {question}", "is_recall": True,
                        "target_fact_id": fid, "ground_truth": truth, "recall_query": question,
                        "failure_mode": mode, "write_to_memory": False, "fact_id": None})

    # a distractor fact, discussed by a role that recalls nothing
    dfid = f"F{len(modes) + 1}"
    dtopic = topics[-1]
    (dvalue, _), = _values(dtopic, rng, 1)
    facts.append({"id": dfid, "text": f"{dtopic.source}: the {dtopic.subject} is {dvalue}.", "tier": "contextual",
                  "authority_level": 0.9})
    middle.append(statement(_pick(rng, ranked, recallers), f"For completeness, the {dtopic.subject} stays at {dvalue}.",
                            dfid, True))
    filler = rng.sample(_DISTRACTORS[domain], len(_DISTRACTORS[domain]))
    rng.shuffle(early)
    rng.shuffle(late)
    body = early + [statement(NARRATOR, filler[0], None, False)] + middle + late
    while len(body) + len(recalls) + 1 < 10:
        body.insert(rng.randrange(1, len(body) + 1), statement(_pick(rng, ranked, set()), filler[len(body) % len(filler)], None, False))
    rng.shuffle(recalls)
    turns = [statement(NARRATOR, f"A new {domain} scenario begins; the team has the shared record.", None, False), *body]
    for j, r in enumerate(recalls):
        if j == 1:
            turns.append(statement(NARRATOR, filler[1], None, False))
        turns.append(r)
    for n, t in enumerate(turns, start=1):
        t["turn"] = n
    sid = script_id or f"gen_{domain}_{seed}"
    return {"script_id": sid, "domain": domain,
            "description": f"Generated (seed {seed}): {', '.join(modes)}.",
            "initial_facts": facts,
            "turns": [{"turn": t.pop("turn"), **t} for t in turns]}


def generate_all_scripts(output_dir: str | Path, scripts_per_domain: int, seed: int) -> list[Path]:
    """Write ``scripts_per_domain`` scripts per domain under ``output_dir/DOMAIN/`` and
    return their paths. Every script has all three failure modes in a seeded order
    (so the set covers each mode equally); each file is read back through the loader."""
    if scripts_per_domain < 1:
        raise ValueError(f"scripts_per_domain must be at least 1 (got {scripts_per_domain})")
    out = Path(output_dir)
    paths: list[Path] = []
    for domain in DOMAINS:
        folder = out / domain
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(scripts_per_domain):
            rng = rng_for("recall-script-set", domain, seed, i)
            modes = list(FAILURE_MODES)
            rng.shuffle(modes)
            sid = f"gen_{domain}_{seed}_{i + 1:02d}"
            data = generate_script(domain, modes, rng.randrange(2**31), script_id=sid)
            script_from_dict(data, sid)  # valid by construction; checked before anything is written
            path = folder / f"{sid}.json"
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            load_script(path)
            paths.append(path)
    return paths
