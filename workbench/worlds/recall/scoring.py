"""Scoring a recall: normalised exact (substring) match against the accepted
answers, and reading a judge's verdict. Pure functions of text, so the
metrics can re-score recorded answers without any model."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_PUNCT = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")
_ANSWER_PREFIX = re.compile(r"(?i)^\s*(final answer|answer)\s*[:\-]\s*")
_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.IGNORECASE)


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """Case, accents, punctuation and runs of whitespace removed: "July 22, 2026." -> "july 22 2026"."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = _PUNCT.sub(" ", t)
    return _SPACE.sub(" ", t).strip()


def answer_text(reply_text: str | None) -> str | None:
    """The recall answer in a reply: the text without a leading "Answer:"; None when empty."""
    if reply_text is None:
        return None
    t = _ANSWER_PREFIX.sub("", reply_text.strip()).strip()
    return t or None


def exact_match(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> bool:
    """True when some accepted answer, normalised, occurs in the normalised answer as a
    run of whole words ("5 mg" is not found in "25 mg"). The same rule by which the
    script loader checks that every recall is answerable, so the two never disagree."""
    from workbench.worlds.recall.scripts import answer_matches

    return bool(answer) and answer_matches(answer or "", ground_truth)


def matched_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> str | None:
    """The accepted answer that the exact rule found in ``answer`` (the first, in the
    script's order); None when none was found."""
    from workbench.worlds.recall.scripts import answer_matches

    if not answer:
        return None
    return next((a for a in ground_truth if answer_matches(answer, [a])), None)


def _tokens(text: str) -> list[str]:
    from workbench.worlds.recall.scripts import normalise_answer

    return normalise_answer(text).split()


def partial_score(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> float:
    """The best share, over the accepted answers, of an accepted answer's normalised
    words that occur in the answer (each word counted as often as the accepted answer
    has it): 1.0 when one accepted answer's words are all there (so always when the
    exact rule matches), 0.0 for no answer. "September 30, 2026" against "October 7,
    2026" scores 1/3 (the year)."""
    if not answer:
        return 0.0
    from collections import Counter

    have = Counter(_tokens(answer))
    best = 0.0
    for acc in ground_truth:
        need = Counter(_tokens(acc))
        total = sum(need.values())
        if total:
            best = max(best, sum(min(n, have[w]) for w, n in need.items()) / total)
    return round(best, 6)


def score_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> dict[str, object]:
    """The exact-match fields of one recall record: ``correct_exact``, ``matched``
    (the accepted answer found, or None) and ``partial_score`` (see :func:`partial_score`)."""
    matched = matched_answer(answer, ground_truth)
    score = 1.0 if matched is not None else partial_score(answer, ground_truth)
    return {"correct_exact": matched is not None, "matched": matched, "partial_score": score}


def judge_verdict(reply_text: str | None) -> bool | None:
    """A judge's verdict: the first CORRECT/INCORRECT word; None when there is none."""
    if not reply_text:
        return None
    m = _VERDICT.search(reply_text)
    if m is None:
        return None
    return m.group(1).upper() == "CORRECT"


# -- the rule judge: values, not wording ---------------------------------------------------
# A judge that reads values as a careful reader would: the same date, amount or quantity
# in another wording is the same answer (a paraphrase that substring matching misses);
# a different number, unit, scale or date that happens to contain the accepted words is
# a near miss ("2.5 mg" holds the words "5 mg"; "15.5%" holds "15"), which substring
# matching accepts and the judge refuses.
_MONTHS = {m: i + 1 for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"])}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MON = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|" \
       r"jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DATE_PATTERNS = (  # (pattern, year group, month group, day group)
    (re.compile(rf"(?i)\b{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b"), 3, 1, 2),
    (re.compile(rf"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON},?(?:\s+(\d{{4}}))?\b"), 3, 2, 1),
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), 1, 2, 3),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), 3, 1, 2),
)
_NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                            "thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                                            "twenty".split())}
_QUANTITY = re.compile(
    r"(?i)(?<![\w.])([$€£]|(?:usd|eur|gbp)\s)?\s?(\d[\d,]*(?:\.\d+)?|(?:" + "|".join(_NUMBER_WORDS) + r")\b)\s*"
    r"(%|percent\b|per cent\b|bps\b|basis points?\b|thousand\b|million\b|billion\b|k\b|m\b|mn\b|bn\b|b\b|"
    r"mg/kg\b|mg/day\b|mg\b|mcg\b|µg\b|micrograms?\b|milligrams?\b|grams?\b|g\b|kg\b|ml\b|millilit(?:re|er)s?\b|"
    r"l\b|units?\b|iu\b|hours?\b|hrs?\b|days?\b|weeks?\b|months?\b|years?\b|shares?\b|usd\b|eur\b|gbp\b|"
    r"dollars?\b|euros?\b|pounds?\b)?")
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "b": 1e9, "bn": 1e9}
_UNITS = {"percent": "%", "per cent": "%", "basis point": "bps", "basis points": "bps", "unit": "units", "hour": "hours",
          "hr": "hours", "hrs": "hours", "day": "days", "week": "weeks", "month": "months", "year": "years",
          "share": "shares", "µg": "mcg", "microgram": "mcg", "micrograms": "mcg", "milligram": "mg",
          "milligrams": "mg", "gram": "g", "grams": "g", "millilitre": "ml", "milliliter": "ml", "millilitres": "ml",
          "milliliters": "ml", "usd": "$", "dollar": "$", "dollars": "$", "eur": "€", "euro": "€", "euros": "€",
          "gbp": "£", "pound": "£", "pounds": "£", "iu": "units"}
_CURRENCY = {"$", "€", "£"}


def canonical_values(text: str | None) -> set[str]:
    """See :func:`_canonical_values` (remembered: script text repeats across worlds)."""
    return set(_canonical_values(text)) if text else set()


@lru_cache(maxsize=65536)
def _canonical_values(text: str) -> frozenset[str]:
    """The dates and quantities ``text`` states, in one canonical form each:
    ``date:2026-07-22`` (``date:--07-22`` without a year) for "July 22, 2026",
    "22 July 2026", "2026-07-22" or "07/22/2026"; ``num:1200000|$`` for "$1.2 million",
    "1,200,000 dollars" or "USD 1.2m"; ``num:5|mg/kg`` for "5 mg/kg" (a number's unit
    is part of its value, a scale word is not)."""
    out: set[str] = set()
    taken: list[tuple[int, int]] = []
    for pattern, yg, mg, dg in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            mon = m.group(mg)
            month = int(mon) if mon.isdigit() else _MONTHS.get(mon.lower().rstrip("."), 0)
            day = int(m.group(dg))
            if not (1 <= month <= 12 and 1 <= day <= 31):
                continue
            year = m.group(yg)
            out.add(f"date:{int(year):04d}-{month:02d}-{day:02d}" if year else f"date:--{month:02d}-{day:02d}")
            taken.append(m.span())
    for m in _QUANTITY.finditer(text):
        if any(a <= m.start(2) < b for a, b in taken):
            continue
        raw = m.group(2).lower()
        if raw in _NUMBER_WORDS:
            if not m.group(3) and not m.group(1):
                continue  # "one of the team" is no quantity; "five mg" is
            value = float(_NUMBER_WORDS[raw])
        else:
            try:
                value = float(raw.replace(",", ""))
            except ValueError:
                continue
        unit = (m.group(3) or "").lower()
        unit = " ".join(unit.split())
        if unit in _SCALES:
            value *= _SCALES[unit]
            unit = ""
        unit = _UNITS.get(unit, unit)
        if m.group(1):
            cur = _UNITS.get(m.group(1).strip().lower(), m.group(1).strip())
            unit = cur if not unit or unit in _CURRENCY else f"{cur}{unit}"
        out.add(f"num:{value:.10g}|{unit}")
    # a currency word after a scale ("1.2 million dollars"): the bare amount gains the currency
    for cur_word, cur in (("dollar", "$"), ("usd", "$"), ("euro", "€"), ("eur", "€"), ("pound", "£"), ("gbp", "£")):
        # a number is matched from its first digit only (the lookbehind): tried from inside a long run of
        # digits, the pattern would scan the rest of the run at every position (quadratic in the reply)
        for m in re.finditer(rf"(?i)(?<![\d,.])(\d[\d,]*(?:\.\d+)?)\s*(thousand|million|billion|k|m|mn|bn)\s+{cur_word}s?\b",
                             text):
            value = float(m.group(1).replace(",", "")) * _SCALES[m.group(2).lower()]
            out.discard(f"num:{value:.10g}|")
            out.add(f"num:{value:.10g}|{cur}")
    return frozenset(out)


def _same_value(have: str, need: str) -> bool:
    """A stated value against an accepted one: dates alike (an accepted date without a
    year is met by any year), numbers equal with the same unit (an answer that leaves
    the unit out states the number; one with another unit states another quantity)."""
    if have == need:
        return True
    if need.startswith("date:--") and have.startswith("date:"):
        return not have.startswith("date:--") and have[-5:] == need[-5:]
    if have.startswith("num:") and need.startswith("num:"):
        hv, hu = have[4:].split("|", 1)
        nv, nu = need[4:].split("|", 1)
        return hv == nv and (hu == nu or not hu)
    return False


def _content_words(text: str) -> set[str]:
    return {w for w in _tokens(text) if len(w) > 2 or w.isdigit()}


@dataclass(frozen=True)
class Ruling:
    """The rule judge's verdict on one answer and why: ``same`` (states an accepted
    value, as exact matching also finds), ``paraphrase`` (states it in other words),
    ``near miss`` (holds an accepted answer's words but states another date, number or
    unit), ``wrong value``, ``no value`` (states no date or quantity where one was
    accepted) or ``words`` / ``missing words`` (accepted answers without values: a
    name, a place)."""

    verdict: bool
    reason: str


def judge_rule(answer: str | None, accepted: list[str] | tuple[str, ...]) -> Ruling:
    """See :func:`_judge_rule` (remembered: answers repeat across worlds)."""
    return _judge_rule(answer, tuple(accepted))


@lru_cache(maxsize=65536)
def _judge_rule(answer: str | None, accepted: tuple[str, ...]) -> Ruling:
    """The offline judge's rule (see :class:`Ruling`): CORRECT when the answer states
    every value of one accepted answer (dates and quantities compared as values), or,
    for an accepted answer with no value, holds all its words; INCORRECT otherwise."""
    if not answer:
        return Ruling(False, "no answer")
    exact = exact_match(answer, accepted)
    have = canonical_values(answer)
    valued = False
    for acc in accepted:
        need = canonical_values(acc)
        if need:
            valued = True
            if all(any(_same_value(h, n) for h in have) for n in need):
                return Ruling(True, "same" if exact else "paraphrase")
        else:
            words = _content_words(acc)
            if words and words <= _content_words(answer):
                return Ruling(True, "words" if exact else "paraphrase")
    if not valued:
        return Ruling(False, "missing words")
    if exact:
        return Ruling(False, "near miss")
    return Ruling(False, "wrong value" if have else "no value")


# -- which value a failed recall gave --------------------------------------------------------
GIVEN_KINDS = ("anchored", "stale", "lower-authority", "other", "no value")
_NOT_AGENTS = frozenset({"record", "user", "judge"})


@dataclass(frozen=True)
class Statement:
    """One thing said in a world before a recall: an initial fact, a memory write, a
    turn's content or an agent's reply."""

    turn: int
    author: str
    authority: float | None
    fact_id: str | None
    text: str
    values: frozenset[str]


def recorded_values(value: Any) -> set[str]:
    """The dates and quantities of a value the world recorded for a statement: its
    canonical ``date:``/``num:`` tokens when it is in canonical form (the world's
    rule writes them space-separated, names as ``name:...``), else those read from
    it as text (a script's declared value such as "July 22, 2026"); empty for none
    or a name."""
    if not isinstance(value, str) or not value.strip():
        return set()
    if value.startswith(("date:", "num:", "name:")):
        return {t for t in value.split() if t.startswith(("date:", "num:"))} if not value.startswith("name:") else set()
    return canonical_values(value)


def world_statements(world: dict[str, Any]) -> list[Statement]:
    """Every statement a world record holds, once each: the initial facts (turn 0, by
    the record), memory writes (refused ones too: they were said), turn contents
    (where the record keeps them) and agents' replies (a recall's answer tagged with
    the recall's target fact). A statement's values are the dates and quantities of
    the value the world recorded for it, where it recorded one (the value it
    asserts: "moved from July 8 to July 22" asserts July 22), else those its text
    holds."""
    authority = {a.get("role"): a.get("authority") for a in world.get("agents", [])}
    out: list[Statement] = []
    seen: set[tuple[int, str, str]] = set()

    def add(turn: Any, author: Any, auth: Any, fact_id: Any, text: Any, value: Any = None) -> None:
        if not isinstance(text, str) or not text.strip():
            return
        key = (int(turn or 0), str(author), normalise(text))
        if key in seen:
            return
        seen.add(key)
        recorded = recorded_values(value)
        values = recorded or canonical_values(text)
        out.append(Statement(int(turn or 0), str(author), None if auth is None else float(auth),
                             None if fact_id is None else str(fact_id), text, frozenset(values)))

    for e in world.get("memory_log") or []:  # first: writes carry the value the world recorded
        add(e.get("turn"), e.get("author_role"), e.get("authority"), e.get("fact_id"), e.get("text"), e.get("value"))
    for f in (world.get("script") or {}).get("initial_facts") or []:
        add(0, "record", f.get("authority_level"), f.get("id"), f.get("text"), f.get("value"))
    targets = {r.get("turn"): r.get("target_fact_id") for r in world.get("recalls") or []}
    for t in world.get("turns") or []:
        # a recall turn's reply (an answer other agents may hear) is about the recall's target fact
        fact = t.get("fact_id") or (targets.get(t.get("turn")) if t.get("is_recall") else None)
        if t.get("content"):
            add(t.get("turn"), t.get("role"), authority.get(t.get("role")), fact, t["content"], t.get("value"))
        if t.get("reply"):
            add(t.get("turn"), t.get("role"), authority.get(t.get("role")), fact, t["reply"])
    return out


def _states(s: Statement, given: set[str], answer_norm: str) -> bool:
    if given:
        return any(_same_value(h, g) or _same_value(g, h) for h in s.values for g in given)
    text = normalise(s.text)
    return bool(text) and (text in answer_norm or answer_norm in text)


def given_value(world: dict[str, Any], recall: dict[str, Any],
                statements: list[Statement] | None = None) -> dict[str, Any]:
    """Where the value of a recall's answer came from, judged from the world record:

    - the *given* values: the dates and quantities the answer states that no accepted
      answer states (for answers without such values: statements whose words the
      answer repeats);
    - the statements before the recall, about its target fact (all statements when
      none is tagged with it), that state a given value, and those that state an
      accepted value (the truth);
    - flags: ``anchored`` (the given value was said by two or more agents),
      ``stale`` (it was said before the last statement of the truth: superseded),
      ``lower-authority`` (its most senior speaker ranks below the truth's);
    - ``kind``: the first flag set, in that order, else ``other`` (a value nobody
      said, or one the record cannot place), or ``no value`` (no answer, or one that
      states no value and repeats no statement).

    For correct recalls the kind is None. Pure: a function of the record only."""
    accepted = list(recall.get("ground_truth") or [])
    answer = recall.get("answer")
    empty: dict[str, Any] = {"kind": None, "value": None, "anchored": False, "stale": False, "lower_authority": False,
             "said_by": []}
    if recall.get("correct"):
        return empty
    if not answer:
        return {**empty, "kind": "no value"}
    stmts = world_statements(world) if statements is None else statements
    turn = int(recall.get("turn") or 0)
    before = [s for s in stmts if s.turn < turn or s.turn == 0]
    target = recall.get("target_fact_id")
    about = [s for s in before if target is not None and s.fact_id == target] or before
    need = set().union(*(canonical_values(a) for a in accepted)) if accepted else set()
    given = {v for v in canonical_values(answer) if not any(_same_value(v, n) for n in need)}
    truth = [s for s in about if judge_rule(s.text, accepted).verdict or exact_match(s.text, accepted)]
    norm = normalise(answer)
    said = [s for s in about if s not in truth and _states(s, given, norm)]
    if not said and not given:
        return {**empty, "kind": "no value" if not canonical_values(answer) else "other"}
    agents = {s.author for s in said if s.author not in _NOT_AGENTS}
    anchored = len(agents) >= 2
    stale = bool(said) and bool(truth) and min(s.turn for s in said) < max(s.turn for s in truth)
    said_auth = [s.authority for s in said if s.authority is not None]
    truth_auth = [s.authority for s in truth if s.authority is not None]
    lower = bool(said_auth) and bool(truth_auth) and max(said_auth) < max(truth_auth)
    kind = "anchored" if anchored else "stale" if stale else "lower-authority" if lower else "other"
    value = ", ".join(sorted(given)) if given else None
    return {"kind": kind, "value": value, "anchored": anchored, "stale": stale, "lower_authority": lower,
            "said_by": sorted({s.author for s in said})}
