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

from workbench.errors import InputError
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


def _ratio(lo: int, hi: int) -> Callable[[Random], tuple[str, list[str]]]:
    def make(rng: Random) -> tuple[str, list[str]]:
        v = f"{rng.randint(lo, hi) / 10:.1f} times"
        return v, [v]
    return make


@dataclass(frozen=True)
class Topic:
    """A fact that can be asked about: ``subject`` reads after "the"; ``source`` names
    the record that states it. The subjects of one domain are written so that most
    pairs share no content word (see :func:`_disjoint_topics`)."""

    subject: str
    source: str
    value: Callable[[Random], tuple[str, list[str]]]


TOPICS: dict[str, list[Topic]] = {
    "legal": [
        Topic("filing deadline for the appellate brief", "Court order", _date),
        Topic("settlement offer from opposing counsel", "Negotiation log", _money(90_000, 400_000, 5_000)),
        Topic("date of the mediation session", "Mediator's letter", _date),
        Topic("earnest money deposit for the property", "Purchase agreement", _money(50_000, 250_000, 10_000)),
        Topic("cap on the indemnity", "Signed agreement", _money(500_000, 3_000_000, 50_000)),
        Topic("exclusivity period in the term sheet", "Term sheet", _unit(6, 37, 3, "months")),
        Topic("hearing for the summary judgment motion", "Scheduling order", _date),
        Topic("number of documents in the production", "Vendor report", _count(2_000, 60_000, 500)),
        Topic("retainer paid by the client", "Engagement letter", _money(10_000, 90_000, 2_500)),
        Topic("liquidated damages per day of delay", "Construction contract", _money(1_000, 20_000, 500)),
        Topic("statute of limitations cutoff", "Limitation memo", _date),
        Topic("hourly rate of the expert witness", "Expert's engagement terms", _money(250, 1_500, 25)),
        Topic("word limit of the opening memorandum", "Practice direction", _count(3_000, 15_000, 500)),
        Topic("deposition of the plant manager", "Notice of deposition", _date),
    ],
    "medical": [
        Topic("enoxaparin dose", "Attending order", _unit(20, 121, 20, "mg")),
        Topic("furosemide injection", "Attending order", _unit(20, 81, 20, "mg")),
        Topic("time of the abdominal CT scan", "Radiology booking", _clock),
        Topic("intravenous fluid rate", "Attending order", _unit(30, 151, 5, "mL per hour")),
        Topic("planned discharge date", "Care plan", _date),
        Topic("gentamicin infusion", "Attending order", _unit(160, 481, 40, "mg")),
        Topic("start of the oral rehydration trial", "Care plan", _clock),
        Topic("insulin glargine units at bedtime", "Attending order", _unit(10, 41, 2, "units")),
        Topic("potassium chloride supplement", "Attending order", _unit(10, 81, 10, "mmol")),
        Topic("oxygen flow", "Respiratory plan", _unit(1, 7, 1, "litres per minute")),
        Topic("paracetamol ceiling", "Pharmacy note", _unit(1_000, 4_001, 500, "mg per day")),
        Topic("vancomycin trough goal", "Pharmacy note", _unit(10, 21, 1, "mg/L")),
        Topic("morning blood draw", "Phlebotomy list", _clock),
        Topic("follow-up clinic appointment", "Discharge letter", _date),
    ],
    "finance": [
        Topic("single-stock weight limit for the fund", "Investment committee rule", _percent(4, 12, " of NAV")),
        Topic("portfolio duration", "Mandate", _unit(3, 10, 1, "years")),
        Topic("date of the quarterly rebalance", "Calendar", _date),
        Topic("one-day Value-at-Risk ceiling", "Risk limits sheet", _millions),
        Topic("hedge ratio for the USD exposure", "Board policy", _percent(40, 95)),
        Topic("offer price per share for the acquisition", "Merger agreement", _money(20, 120, 1)),
        Topic("next coupon payment", "Credit agreement", _date),
        Topic("cash buffer", "Liquidity policy", _percent(1, 9, " of NAV")),
        Topic("leverage cap", "Prospectus", _ratio(11, 40)),
        Topic("broker commission", "Execution agreement", _unit(2, 15, 1, "basis points")),
        Topic("management fee", "Fund terms", _unit(40, 150, 5, "basis points")),
        Topic("redemption notice period", "Offering memorandum", _unit(5, 91, 5, "days")),
        Topic("bond allocation", "Strategic asset allocation", _percent(20, 70)),
        Topic("FX settlement cut-off", "Operations manual", _clock),
    ],
}

# Templates. Each statement kind has several wordings, drawn per script; every wording
# keeps "the {subject}" so that retrieval finds it, and none uses a word of the recall
# questions (remind, confirm, exactly, right), so a recaller's own statement about
# another fact never looks relevant to its question. Authority collapse and anchoring
# writes echo the question ("the {subject} is"); corrections and updates are worded apart.
T: dict[str, list[str]] = {
    "fact": ["{source}: the {subject} is {v}.", "{source}: the {subject} is set at {v}.",
             "Per the {source_l}, the {subject} is {v}.", "{source} fixes the {subject} at {v}."],
    "collapse_wrong": ["Note for the team: the {subject} is {v}.", "Heads up, everyone: the {subject} is {v}.",
                       "Saving this for all of us: the {subject} is {v}.", "For the shared notes, the {subject} is {v}."],
    "belief_own": ["I am planning around the {subject} being {v}.", "My working assumption is that the {subject} is {v}.",
                   "I have put the {subject} down as {v} in my plan.", "I am organising my tasks on the basis that the {subject} is {v}."],
    "belief_update": ["Update: the {subject} has changed and is now {v}.", "Revised today: the {subject} becomes {v}.",
                      "A change has come through: the {subject} moves to {v}.", "Superseding the earlier entry, the {subject} is now {v}."],
    "anchor_fact": ["Early note, to be confirmed: the {subject} is {v}.", "Provisional entry: the {subject} is {v}.",
                    "First draft of the file, unverified: the {subject} is {v}."],
    "anchor_repeat": ["The {subject} is {v}.", "Noting for everyone: the {subject} is {v}.",
                      "As I understand it, the {subject} is {v}.", "Same from my side: the {subject} is {v}.",
                      "From my notes, the {subject} is {v}."],
    "anchor_correction": ["Correction after checking the originals: the {subject} should now read {v}.",
                          "I went back to the source documents; the figure to use for the {subject} is {v}.",
                          "Having verified it against the originals, we must use {v} for the {subject}."],
    "distractor": ["For completeness, the {subject} stays at {v}.", "No change to the {subject}: it is still {v}.",
                   "Unrelated, but the {subject} remains {v}."],
    "question": ["What is the {subject}?", "What is the {subject} right now?", "Remind me: what is the {subject}?",
                 "Can you confirm the {subject}?", "What exactly is the {subject}?"],
}

_LEAD_INS = ["Quick check before I go on.", "I need this for my notes.", "Someone is asking me now.",
             "Before I sign off.", "For the record.", "One thing before the next step.", "I am updating my list."]
_DISTRACTORS: dict[str, list[str]] = {
    "legal": ["The client wants a short status email every Friday.", "The exhibit binder is nearly complete.",
              "The conference room is booked for the team meeting.", "External experts have sent their invoices.",
              "The court's e-filing portal was slow this morning.", "The bundle index needs a final proofread."],
    "medical": ["The patient slept well overnight.", "Physiotherapy will visit this afternoon.",
                "The family asked about visiting hours.", "Observations have been stable since the morning.",
                "The ward round is running late.", "The patient asked for a vegetarian meal."],
    "finance": ["Markets opened quietly this morning.", "The client report template has a new page.",
                "Operations confirmed yesterday's settlements.", "The auditors will visit next month.",
                "The trading floor had a fire drill.", "The quarterly letter goes out after review."],
}


def _fill(rng: Random, kind: str, topic: Topic, value: str) -> str:
    text = rng.choice(T[kind]).format(subject=topic.subject, v=value, source=topic.source,
                                      source_l=topic.source[0].lower() + topic.source[1:])
    return text[0].upper() + text[1:]


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
        picked: list[Topic] = []
        seen: set[str] = set()
        for t in rng.sample(TOPICS[domain], len(TOPICS[domain])):
            if not (_subject_words(t) & seen):
                picked.append(t)
                seen |= _subject_words(t)
                if len(picked) == n:
                    return picked
    raise RuntimeError(f"no {n} topics with disjoint subjects in {domain!r}")  # pragma: no cover


# ---------------------------------------------------------------- roles

def _by_authority(domain: str) -> list[str]:
    return sorted(DOMAINS[domain], key=lambda r: (DOMAINS[domain][r], r))


def _pick(rng: Random, roles: Sequence[str], avoid: set[str]) -> str:
    free = [r for r in roles if r not in avoid]
    return rng.choice(free or list(roles))


# ---------------------------------------------------------------- one script

def generate_script(domain: str, failure_modes: Sequence[str], seed: int, script_id: str | None = None,
                    distractors: int = 2) -> dict[str, Any]:
    """One scenario script (a dict in the JSON schema) with one recall per entry of
    ``failure_modes`` (1 to 8 entries; a mode may repeat), each about its own fact, plus
    ``distractors`` facts nobody is asked about (the first is also discussed in a turn)
    and filler turns. Facts and statements carry their ``value``."""
    if domain not in DOMAINS:
        raise InputError(f"unknown domain {domain!r}; known domains: {', '.join(DOMAINS)}")
    modes = list(failure_modes)
    bad = [m for m in modes if m not in FAILURE_MODES]
    if bad:
        raise InputError(f"unknown failure mode(s) {bad}; expected some of: {', '.join(FAILURE_MODES)}")
    if not 1 <= len(modes) <= 8:
        raise InputError(f"expected 1 to 8 failure modes (one recall each), got {len(modes)}")
    if not 1 <= distractors <= 3:
        raise InputError(f"expected 1 to 3 distractor facts, got {distractors}")
    rng = rng_for("recall-script", domain, ",".join(modes), seed, distractors)
    auth = DOMAINS[domain]
    ranked = _by_authority(domain)
    top = ranked[-1]
    topics = _disjoint_topics(rng, domain, len(modes) + distractors)
    facts: list[dict[str, Any]] = []
    early: list[dict[str, Any]] = []
    middle: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []
    recalls: list[dict[str, Any]] = []
    involved: dict[str, set[str]] = {}  # fact id -> roles that spoke about it
    recallers: list[str] = []  # in order; a role recalls a second time only when every role has recalled

    def statement(role: str, content: str, fid: str | None, write: bool, value: str | None = None) -> dict[str, Any]:
        if fid:
            involved.setdefault(fid, set()).add(role)
        out = {"role": role, "content": content, "is_recall": False, "target_fact_id": None, "ground_truth": [],
               "recall_query": None, "failure_mode": "", "write_to_memory": write, "fact_id": fid}
        if value is not None:
            out["value"] = value
        return out

    def fact(fid: str, text: str, tier: str, level: float, value: str) -> dict[str, Any]:
        return {"id": fid, "text": text, "tier": tier, "authority_level": level, "value": value}

    def least_used(roles: Sequence[str]) -> str:
        uses = {r: recallers.count(r) for r in roles}
        fewest = min(uses.values())
        return rng.choice([r for r in roles if uses[r] == fewest])

    for i, (mode, topic) in enumerate(zip(modes, topics)):
        fid = f"F{i + 1}"
        question = rng.choice(T["question"]).format(subject=topic.subject)
        if mode == "authority_collapse":
            (right, accepted), (wrong, _) = _values(topic, rng, 2)
            facts.append(fact(fid, _fill(rng, "fact", topic, right), "structural", 1.0, right))
            low = rng.choice([r for r in ranked if auth[r] <= 0.6])
            late.append(statement(low, _fill(rng, "collapse_wrong", topic, wrong), fid, True, wrong))
        elif mode == "belief_asymmetry":
            (old, _), (new, accepted) = _values(topic, rng, 2)
            facts.append(fact(fid, _fill(rng, "fact", topic, old), "contextual", 0.6, old))
            recaller = least_used([r for r in ranked if r != top])
            early.append(statement(recaller, _fill(rng, "belief_own", topic, old), fid, rng.random() < 0.3, old))
            updater = rng.choice([r for r in ranked if auth[r] > 0.6 and r != recaller])
            middle.append(statement(updater, _fill(rng, "belief_update", topic, new), fid, True, new))
        else:  # memory_anchoring
            (old, _), (new, accepted) = _values(topic, rng, 2)
            facts.append(fact(fid, _fill(rng, "anchor_fact", topic, old), "contextual", 0.4, old))
            corrector = rng.choice([r for r in ranked if auth[r] >= 0.8])
            lower = [r for r in ranked if auth[r] < auth[corrector]]
            repeaters = rng.sample(lower, min(len(lower), rng.choice([2, 3])))
            for role, template in zip(repeaters, rng.sample(T["anchor_repeat"], len(repeaters))):
                early.append(statement(role, template.format(subject=topic.subject, v=old), fid, True, old))
            late.append(statement(corrector, _fill(rng, "anchor_correction", topic, new), fid, True, new))
        # the recaller: a team role that has not spoken about this fact (belief: the one who did)
        if mode == "belief_asymmetry":
            who = recaller
        else:
            who = least_used([r for r in ranked if r not in involved.get(fid, set())])
        recallers.append(who)
        recalls.append({"role": who, "content": f"{rng.choice(_LEAD_INS)} {question}", "is_recall": True,
                        "target_fact_id": fid, "ground_truth": accepted, "recall_query": question,
                        "failure_mode": mode, "write_to_memory": False, "fact_id": None})

    # distractor facts: in the record, the first also discussed (and written) by a role
    for j, dtopic in enumerate(topics[len(modes):]):
        dfid = f"F{len(modes) + j + 1}"
        (dvalue, _), = _values(dtopic, rng, 1)
        facts.append(fact(dfid, _fill(rng, "fact", dtopic, dvalue), "contextual", rng.choice([0.7, 0.9, 1.0]), dvalue))
        if j == 0:
            speaker = least_used(ranked)
            middle.append(statement(speaker, _fill(rng, "distractor", dtopic, dvalue), dfid, True, dvalue))
    filler = rng.sample(_DISTRACTORS[domain], len(_DISTRACTORS[domain]))
    rng.shuffle(early)
    rng.shuffle(middle)
    rng.shuffle(late)
    body = early + [statement(NARRATOR, filler[0], None, False)] + middle + late
    # filler statements by roles (no fact, no value): chatter a recaller may have voiced
    for n in range(1 + len(modes) // 3):
        body.insert(rng.randrange(1, len(body) + 1), statement(rng.choice(ranked), filler[2 + n % (len(filler) - 2)], None, False))
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


def generate_all_scripts(output_dir: str | Path, scripts_per_domain: int, seed: int,
                         recalls_per_mode: int = 2, prefix: str = "gen") -> list[Path]:
    """Write ``scripts_per_domain`` scripts per domain under ``output_dir/DOMAIN/`` and
    return their paths. Every script recalls each failure mode ``recalls_per_mode`` times
    (each recall about its own fact), in a seeded order, so the set covers each mode
    equally; each file is read back through the loader. Ids: ``PREFIX_DOMAIN_SEED_NN``."""
    if scripts_per_domain < 1:
        raise InputError(f"scripts_per_domain must be at least 1 (got {scripts_per_domain})")
    if not 1 <= recalls_per_mode <= 2:
        raise InputError(f"recalls_per_mode must be 1 or 2 (got {recalls_per_mode})")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", prefix):
        raise InputError(f"prefix must be lower-case letters, digits and _ (got {prefix!r})")
    out = Path(output_dir)
    paths: list[Path] = []
    for domain in DOMAINS:
        folder = out / domain
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(scripts_per_domain):
            rng = rng_for("recall-script-set", domain, seed, i)
            modes = list(FAILURE_MODES) * recalls_per_mode
            rng.shuffle(modes)
            sid = f"{prefix}_{domain}_{seed}_{i + 1:02d}"
            data = generate_script(domain, modes, rng.randrange(2**31), script_id=sid)
            script_from_dict(data, sid)  # valid by construction; checked before anything is written
            path = folder / f"{sid}.json"
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            load_script(path)
            paths.append(path)
    return paths
