"""Memory at realistic size: seeded distractor entries written into a recall world's
shared memory before and through its script (the cell field ``distractors``).

A scripted world holds tens of entries, so top-k truncation and the density of
look-alike entries, which decide retrieval failures in deployed memories, never come
into play. A cell's ``distractors: {count, near_duplicates, paraphrases, seed, placement}``
adds ``count`` entries of three kinds (the two shares of ``count`` rounded, the rest
distractor facts):

- **near-duplicates** (hard negatives): a statement of the script (an initial fact or a
  scripted memory write that carries a value) copied to *another matter* ("Alder 12
  matter: ...") with its value changed to one of the same shape ("July 15, 2026" ->
  "July 9, 2026"); the wording that makes it similar to the recall question stays. Each
  is its own fact (fact id ``N<n>``), so oracle invalidation never confuses it with the
  script's fact; its value never matches an accepted answer of the script.
- **paraphrases across turns**: a scripted statement restated by its own author in other
  words (a lead-in, a verb swapped), with its fact id and value, at a later turn before the
  next statement about that fact: repetition that fills the top k with one value without
  ever post-dating a correction.
- **distractor facts**: facts of the domain's other topics (the generator's topic list,
  leaving out any topic the script talks about) for other matters, each its own fact
  (``X<n>``) with its own value: background density.

Authors of near-duplicates and facts are the domain's roles (their authority, their
namespace). ``placement: through`` (default) spreads them over the script's turns
(written at the start of their turn); ``start`` preloads them all at turn 0 with the case
file. The same (script, spec) always gives the same entries (one seeded
``random.Random``); with ``count: 0`` (the default) nothing is added and a world's memory
is exactly the script's.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass
from random import Random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workbench.errors import InputError
from workbench.seeding import rng_for
from workbench.worlds.recall.domains import DOMAINS, NARRATOR, RECORD, role_authority
from workbench.worlds.recall.generator import _MONTHS, TOPICS, T, Topic, _subject_words
from workbench.worlds.recall.scripts import Script, answer_matches

KINDS: tuple[str, ...] = ("near_duplicate", "paraphrase", "fact")

#: Other matters: names qualified by a number, so that thousands of entries stay distinct.
_MATTERS = ["Alder", "Birch", "Cedar", "Dunmore", "Elston", "Fairbank", "Garland", "Hollis", "Ingram", "Juniper",
            "Kestrel", "Larkin", "Marlow", "Northam", "Oakley", "Penrose", "Quarry", "Redfern", "Stanway", "Thorne",
            "Upton", "Vance", "Whitlock", "Yardley"]
_MATTER_FORM = {"legal": "{m} matter", "medical": "patient in bed {n} ({name})", "finance": "{m} fund"}
_NEAR_LEADS = ["{Q}: ", "For the {q}, ", "Separate file, the {q}: ", "Not our case ({q}): "]
_PARA_LEADS = ["To restate: ", "As noted earlier: ", "Repeating for the record: ", "Reminder: ", "Still on file: ",
               "For anyone catching up: "]
_PARA_SWAPS = [(" is set at ", " stands at "), (" is now ", " now stands at "), (" is ", " stands at "),
               (" is ", " remains "), (" becomes ", " is now "), (" changed ", " moved ")]
_NUMBER = re.compile(r"\d+")


class DistractorSpec(BaseModel):
    """The cell field ``distractors``: how many entries to add and of which kinds."""

    model_config = ConfigDict(extra="forbid")
    count: int = Field(0, ge=0, le=20_000, description="distractor entries added to shared memory (0: none)")
    near_duplicates: float = Field(0.0, ge=0, le=1, description="share of count: a script statement copied to "
                                                                "another matter with another value")
    paraphrases: float = Field(0.0, ge=0, le=1, description="share of count: a script statement restated by its "
                                                            "author in other words at a later turn")
    seed: int = Field(0, description="seed of the distractors (with the script id)")
    placement: Literal["through", "start"] = Field(
        "through", description="through: spread over the script's turns; start: all at turn 0")

    @model_validator(mode="after")
    def _shares(self) -> DistractorSpec:
        if self.near_duplicates + self.paraphrases > 1 + 1e-9:
            raise InputError(f"distractors: near_duplicates + paraphrases must be at most 1 "
                             f"(got {self.near_duplicates} + {self.paraphrases})")
        return self

    def counts(self) -> dict[str, int]:
        """Entries of each kind: the shares of ``count`` rounded, the rest facts."""
        near = round(self.count * self.near_duplicates)
        para = min(self.count - near, round(self.count * self.paraphrases))
        return {"near_duplicate": near, "paraphrase": para, "fact": self.count - near - para}


@dataclass(frozen=True)
class Distractor:
    """One entry to write: :meth:`VectorMemory.add`'s fields plus its kind and source."""

    kind: str
    text: str
    author_role: str
    authority: float
    turn: int
    namespace: str | None
    fact_id: str
    value: str
    source_fact_id: str | None = None  # the script fact a near-duplicate or paraphrase was made from

    def item(self) -> dict[str, Any]:
        """The entry as :meth:`VectorMemory.add_many` takes it."""
        return {"text": self.text, "author_role": self.author_role, "authority": self.authority, "turn": self.turn,
                "namespace": self.namespace, "fact_id": self.fact_id, "value": self.value}


@dataclass(frozen=True)
class _Said:
    """A statement of the script that memory holds: an initial fact or a scripted write."""

    text: str
    author: str
    authority: float
    turn: int
    namespace: str | None
    fact_id: str
    value: str
    until: int  # the last turn before the next statement about the same fact (or the script's last turn)


def _script_statements(script: Script) -> list[_Said]:
    rows: list[tuple[str, str, float, int, str | None, str, str]] = []
    for f in script.initial_facts:
        if f.value:
            rows.append((f.text, RECORD, float(f.authority_level), 0, None, f.id, f.value))
    for t in script.turns:
        if t.write_to_memory and t.fact_id and t.value:
            rows.append((t.content, t.role, float(role_authority(script.domain, t.role)), t.turn,
                         NARRATOR if t.role == NARRATOR else t.role, t.fact_id, t.value))
    last = max([t.turn for t in script.turns], default=0)
    out = []
    for text, author, auth, turn, ns, fid, value in rows:
        later = [r[3] for r in rows if r[5] == fid and r[3] > turn]
        out.append(_Said(text, author, auth, turn, ns, fid, value, (min(later) - 1) if later else last))
    return out


def _accepted(script: Script) -> list[list[str]]:
    return [list(t.ground_truth) for t in script.recalls()]


def _perturb(value: str, rng: Random) -> str:
    """A value of the same shape: each number redrawn with as many digits (a month name
    may change too), never the same string."""
    for _ in range(50):
        def number(m: re.Match[str]) -> str:
            digits = m.group(0)
            before, after = value[:m.start()].rstrip(), value[m.end():].lstrip()
            if len(digits) == 4 and digits.startswith("20") and any(mo in value for mo in _MONTHS):  # a year stays
                return digits
            if before.endswith(tuple(_MONTHS)) or after.startswith(tuple(_MONTHS)):  # a day of the month
                return str(rng.randint(1, 28))
            if after.startswith(":"):  # the hour of a clock time
                return f"{rng.randint(7, 19):02d}"
            if before.endswith(":"):  # its minutes
                return f"{rng.choice([0, 15, 30, 45]):02d}"
            if len(digits) == 1:
                return str(rng.randint(1, 9))
            return str(rng.randint(10 ** (len(digits) - 1), 10 ** len(digits) - 1))
        out = _NUMBER.sub(number, value)
        for month in _MONTHS:
            if month in out and rng.random() < 0.3:
                out = out.replace(month, rng.choice(_MONTHS), 1)
                break
        if out != value:
            return out
    return value + " (revised)"  # pragma: no cover - a value without digits or months


def _fresh(value: str, script_values: set[str], accepted: list[list[str]]) -> bool:
    """A distractor value must not be one the script states, nor match an accepted answer
    (exact-match scoring would credit an answer taken from the distractor)."""
    return value not in script_values and not any(answer_matches(value, acc) for acc in accepted)


def _matter(domain: str, rng: Random) -> str:
    name, n = rng.choice(_MATTERS), rng.randint(1, 99)
    return _MATTER_FORM.get(domain, "{m} matter").format(m=f"{name} {n}", n=n, name=name)


def _turn(rng: Random, turns: list[int], lo: int = 0, hi: int | None = None) -> int:
    pool = [t for t in turns if t >= lo and (hi is None or t <= hi)]
    return rng.choice(pool or [lo])


def _redraw(draw: Any, script_values: set[str], accepted: list[list[str]], what: str) -> str:
    for _ in range(200):
        value = draw()
        if _fresh(value, script_values, accepted):
            return str(value)
    raise InputError(f"distractors: no value for {what} that differs from the script's values")  # pragma: no cover


def _paraphrase(said: _Said, rng: Random) -> str:
    text = said.text
    for old, new in rng.sample(_PARA_SWAPS, len(_PARA_SWAPS)):
        if old in text and said.value not in old:
            swapped = text.replace(old, new, 1)
            if said.value in swapped:
                text = swapped
                break
    return rng.choice(_PARA_LEADS) + text


def _topics(script: Script) -> list[Topic]:
    """The domain's topics the script does not talk about: at most a third of a topic's
    subject words occur in the script (so a distractor fact is never a near-duplicate in
    disguise: "the single-stock weight limit for the fund" is the script's "the fund's
    single-stock weight limit")."""
    said = set(re.findall(r"[a-z]+", " ".join([f.text for f in script.initial_facts] + [t.content for t in script.turns]
                                              + [t.recall_query or "" for t in script.turns]).lower()))
    return [tp for tp in TOPICS.get(script.domain, []) if len(_subject_words(tp) & said) * 3 <= len(_subject_words(tp))]


def build_distractors(script: Script, spec: DistractorSpec) -> list[Distractor]:
    """The distractor entries of ``script`` under ``spec``, in the order they are written
    (by turn, then as drawn). Deterministic: the same script and spec give the same list."""
    if spec.count == 0:
        return []
    if script.domain not in DOMAINS:
        raise InputError(f"distractors: unknown domain {script.domain!r} of script {script.script_id}")
    rng = rng_for("recall-distractors", script.script_id, spec.seed, spec.count, spec.near_duplicates,
                  spec.paraphrases, spec.placement)
    counts = spec.counts()
    said = _script_statements(script)
    if not said and (counts["near_duplicate"] or counts["paraphrase"]):
        raise InputError(f"distractors: script {script.script_id} states no value to copy "
                         f"(near_duplicates and paraphrases need facts or writes with a value)")
    turns = sorted({0} | {t.turn for t in script.turns})
    roles = sorted(DOMAINS[script.domain])
    accepted = _accepted(script)
    script_values = {s.value for s in said}
    out: list[Distractor] = []

    def when() -> int:  # paraphrases always come after what they restate, whatever the placement
        return 0 if spec.placement == "start" else _turn(rng, turns)

    for n in range(counts["near_duplicate"]):
        src = said[n % len(said)] if n < len(said) else rng.choice(said)
        value = _redraw(lambda v=src.value: _perturb(v, rng), script_values, accepted, src.fact_id)
        matter = _matter(script.domain, rng)
        lead = rng.choice(_NEAR_LEADS).format(Q=matter[0].upper() + matter[1:], q=matter)
        role = rng.choice(roles)
        out.append(Distractor("near_duplicate", lead + src.text.replace(src.value, value, 1), role,
                              float(role_authority(script.domain, role)), when(), role,
                              f"N{n + 1}", value, src.fact_id))
    for n in range(counts["paraphrase"]):
        src = said[n % len(said)] if n < len(said) else rng.choice(said)
        out.append(Distractor("paraphrase", _paraphrase(src, rng), src.author, src.authority,
                              _turn(rng, turns, src.turn + 1, src.until) if src.until > src.turn else src.turn,
                              src.namespace, src.fact_id, src.value, src.fact_id))
    topics = _topics(script) or TOPICS[script.domain]
    for n in range(counts["fact"]):
        topic = rng.choice(topics)
        value = _redraw(lambda tp=topic: tp.value(rng)[0], script_values, accepted, topic.subject)
        matter = _matter(script.domain, rng)
        template = rng.choice(T["fact"] + T["distractor"])
        text = template.format(subject=topic.subject, v=value, source=topic.source,
                               source_l=topic.source[0].lower() + topic.source[1:])
        role = rng.choice(roles)
        out.append(Distractor("fact", f"{matter[0].upper() + matter[1:]}: {text}", role,
                              float(role_authority(script.domain, role)), when(), role,
                              f"X{n + 1}", value))
    order = sorted(range(len(out)), key=lambda i: (out[i].turn, i))
    return [out[i] for i in order]


def distractors_sha256(entries: list[Distractor]) -> str:
    """A fingerprint of the entries (what a record keeps instead of thousands of them)."""
    return hashlib.sha256(json.dumps([asdict(e) for e in entries], sort_keys=True).encode()).hexdigest()


def summary(spec: DistractorSpec, entries: list[Distractor], stored: int, refused: int, removed: int) -> dict[str, Any]:
    """The world record's ``distractors``: the spec, the counts by kind, what memory kept,
    and the entries' fingerprint (they are regenerated from the script and the spec)."""
    by_kind = Counter(e.kind for e in entries)
    return {**spec.model_dump(mode="json"), "written": len(entries),
            "by_kind": {k: by_kind.get(k, 0) for k in KINDS}, "stored": stored, "refused": refused,
            "removed": removed, "sha256": distractors_sha256(entries)}


__all__ = ["KINDS", "Distractor", "DistractorSpec", "build_distractors", "distractors_sha256", "summary"]
