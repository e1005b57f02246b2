"""Scoring a recall's answer text: exact match against the accepted answers (whole
words, numbers compared as numbers), partial credit, the offline rule judge and
reading a judge's verdict. Pure functions of text; what a recorded recall came to
(correct, hedged, which wrong value) is :mod:`workbench.worlds.recall.outcomes`."""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

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


# -- exact match: words as words, numbers as numbers ------------------------------------------
# Substring matching on normalised words took the "." of "3.5%" and the "," of "$1,240,000" for
# word breaks, so "5% of NAV" was found in "3.5% of NAV" and "240,000" in "$1,240,000". An answer
# is read instead as a run of tokens: a number with its sign, decimals, thousands separators,
# scale ("$5m", "5 million") and unit ("%", "percent", "per cent", "pct", "bps", "mg", "days",
# a currency) is one token, compared by value; a clock time ("07:15") is one token; a month
# name is a month ("Jul" is "July"); any other run of letters and digits is a word. Dates stay
# a month and numbers in their order ("July 22, 2026"), so "22 July 2026" is a paraphrase for
# the judges, not an exact match.
_MONTH_NUMBERS = {m: i + 1 for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july",
                                                  "august", "september", "october", "november", "december"])}
_MONTH_NUMBERS.update({**{m[:3]: i for m, i in _MONTH_NUMBERS.items()}, "sept": 9})
_SCALE_WORDS = {"thousand": 3, "k": 3, "million": 6, "mn": 6, "m": 6, "billion": 9, "bn": 9, "b": 9,
                "trillion": 12}
_UNIT_FORMS: dict[str, tuple[str, ...]] = {  # canonical unit: its spellings
    "%": ("%", "percent", r"per\s+cent", "pct"),
    "bps": ("bps", "bp", r"basis\s+points?"),
    "mg/kg": ("mg/kg",), "mg/l": ("mg/l",), "mg/dl": ("mg/dl",), "mg/day": ("mg/day",),
    "mg": ("mg", "milligrams?"), "mcg": ("mcg", "µg", "μg", "micrograms?"), "kg": ("kg", "kilograms?"),
    "g": ("g", "grams?"), "mmol": ("mmol",), "ml": ("ml", "millilit(?:re|er)s?"), "l": ("l", "lit(?:re|er)s?"),
    "units": ("units?", "iu"), "minutes": ("minutes?", "mins?"), "hours": ("hours?", "hrs?"), "days": ("days?",),
    "weeks": ("weeks?",), "months": ("months?",), "years": ("years?", "yrs?"), "shares": ("shares?",),
    "$": ("usd", "dollars?"), "€": ("eur", "euros?"), "£": ("gbp", "pounds?", "sterling"),
}
_UNIT_OF = [(re.compile(rf"(?:{form})\Z"), unit) for unit, forms in _UNIT_FORMS.items() for form in forms]
_UNIT_RE = "|".join(sorted((f for forms in _UNIT_FORMS.values() for f in forms), key=len, reverse=True))
_CURRENCY_SIGNS = {"$": "$", "€": "€", "£": "£", "usd": "$", "eur": "€", "gbp": "£"}
_TOKEN = re.compile(
    r"(?P<time>(?<![\w.:])(?P<hour>[01]?\d|2[0-3]):(?P<minute>[0-5]\d)(?![\w:]))"
    r"|(?P<qty>(?<![\w.,])(?P<sign>[-+−])?(?:(?P<cur>[$€£])\s?|(?P<curw>usd|eur|gbp)\s?)?(?P<sign2>[-+−])?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<scale>" + "|".join(_SCALE_WORDS) + r")(?![^\W_]))?"
    r"(?:\s*(?P<unit>" + _UNIT_RE + r")(?![^\W_]))?(?![^\W_]))"
    r"|(?P<word>[^\W_]+)")


@dataclass(frozen=True)
class Token:
    """One token of an answer: ``kind`` word, num, time or month; a number's ``value``
    (exact decimal, scale applied; a month's number) and canonical ``unit`` ("" when
    none is stated)."""

    kind: str
    text: str
    value: Decimal | None = None
    unit: str = ""


def _unit_name(raw: str | None) -> str:
    if not raw:
        return ""
    raw = " ".join(raw.split())
    return next((unit for pattern, unit in _UNIT_OF if pattern.match(raw)), raw)


def _quantity(m: re.Match[str]) -> Token:
    """A number token from a match of :data:`_TOKEN`: sign and scale folded into the value,
    a currency sign or word into the unit ("$5 million" is "5 million dollars")."""
    value = Decimal(m.group("num").replace(",", ""))
    if (m.group("sign") or m.group("sign2")) in ("-", "−"):
        value = -value
    if m.group("scale"):
        value = value.scaleb(_SCALE_WORDS[m.group("scale")])
    unit = _unit_name(m.group("unit"))
    currency = _CURRENCY_SIGNS.get(m.group("cur") or m.group("curw") or "", "")
    if currency and unit not in _CURRENCY_SIGNS.values():
        unit = f"{currency}{unit}"
    return Token("num", f"{value.normalize():f}|{unit}", value, unit)


@lru_cache(maxsize=65536)
def tokens(text: str) -> tuple[Token, ...]:
    """``text`` as exact matching reads it: case, accents and punctuation dropped, numbers
    as values with their units ("$1.2 million" and "1,200,000 dollars" are one token,
    "3.5%" is never "5%"), clock times as times, everything else as words."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    out: list[Token] = []
    for m in _TOKEN.finditer(t):
        if m.group("time"):
            out.append(Token("time", f"{int(m.group('hour')):02d}:{m.group('minute')}"))
        elif m.group("qty"):
            out.append(_quantity(m))
        elif m.group("word") in _MONTH_NUMBERS:
            out.append(Token("month", m.group("word"), Decimal(_MONTH_NUMBERS[m.group("word")])))
        else:
            out.append(Token("word", m.group("word")))
    return tuple(out)


def _token_meets(have: Token, need: Token) -> bool:
    """An answer's token against an accepted answer's: words and times alike; numbers equal
    in value, and in unit where the accepted answer states one ("5" is not "5%" when "5%"
    is what was accepted; "5%" meets an accepted bare "5", whose author left the unit open)."""
    if have.kind != need.kind:
        return False
    if need.kind in ("word", "time"):
        return have.text == need.text
    return have.value == need.value and (not need.unit or have.unit == need.unit)


def _occurs(need: tuple[Token, ...], hay: tuple[Token, ...]) -> bool:
    """Whether ``need`` occurs in ``hay`` as a contiguous run (a whole token each: 5 is not
    found in 15.5, nor "5 mg" in "25 mg")."""
    n = len(need)
    return any(all(_token_meets(hay[i + j], need[j]) for j in range(n)) for i in range(len(hay) - n + 1))


def exact_match(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> bool:
    """True when some accepted answer occurs in the answer as a run of whole tokens, numbers
    compared as numbers (see :func:`tokens`); the recorded ``correct_exact``, and what the
    metrics re-score old records by."""
    return matched_answer(answer, ground_truth) is not None


def matched_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> str | None:
    """The accepted answer that the exact rule found in ``answer`` (the first, in the
    script's order); None when none was found."""
    if not answer:
        return None
    hay = tokens(answer)
    return next((a for a in ground_truth if tokens(a) and _occurs(tokens(a), hay)), None)


def _stated(have: tuple[Token, ...], need: Token) -> list[Token]:
    """The answer's tokens that state a number, time or month of an accepted answer: the
    same value, in the accepted unit or with no unit (a bare "5" states the 5 of "5%")."""
    if need.kind == "time":
        return [h for h in have if h.kind == "time" and h.text == need.text]
    return [h for h in have if h.kind == need.kind and h.value == need.value
            and (not h.unit or not need.unit or h.unit == need.unit)]


def _in_place_of(have: Token, need: Token) -> bool:
    """Whether an answer's number, time or month could stand where ``need`` is missing:
    same kind, and for numbers a unit that agrees or is left out ("10 percent" for "8
    percent", "March" for "June"; not "4 hours" for "5 mg")."""
    if have.kind != need.kind:
        return False
    return not have.unit or not need.unit or have.unit == need.unit


def _share(have: tuple[Token, ...], need: tuple[Token, ...]) -> float:
    """One accepted answer's partial credit (see :func:`partial_score`)."""
    words = Counter(t.text for t in have if t.kind == "word")
    need_words = Counter(t.text for t in need if t.kind == "word")
    valued = [t for t in need if t.kind != "word"]
    got = sum(min(n, words[w]) for w, n in need_words.items())
    total = sum(need_words.values())
    if valued:
        stated = {i: _stated(have, t) for i, t in enumerate(valued)}
        missing = [t for i, t in enumerate(valued) if not stated[i]]
        numbers = [i for i, t in enumerate(valued) if t.kind != "month"]
        if not any(stated.values()) or (numbers and not any(stated[i] for i in numbers)):
            return 0.0  # none of the accepted answer's numbers: nothing to credit the words for
        matched = {h for hs in stated.values() for h in hs}
        if any(_in_place_of(h, t) for t in missing for h in have if h.kind != "word" and h not in matched):
            return 0.0  # another number where one is missing: a wrong value, not a partial one
        total += len(valued) + sum(bool(t.unit) for t in valued)
        got += len(valued) - len(missing)
        got += sum(1 for i, t in enumerate(valued) if t.unit and any(h.unit == t.unit for h in stated[i]))
    return got / total if total else 0.0


def partial_score(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> float:
    """The best, over the accepted answers, share of an accepted answer's tokens that the
    answer holds (a number with a unit counts twice: the number and its unit; a word as
    often as the accepted answer has it). Credit goes to the right number with its unit
    or other words missing ("5 of NAV" for "5% of NAV": 3/4; "July 22" for "July 22,
    2026": 2/3), never to another number: an answer that states none of an accepted
    answer's numbers, or states another number, time or month where one is missing,
    scores 0 against it ("10 percent" for "8 percent", "September 30, 2026" and "March
    22, 2026" for "July 22, 2026"). 1.0 whenever exact match holds; 0.0 for no answer."""
    if not answer:
        return 0.0
    have = tokens(answer)
    return round(max((_share(have, tokens(a)) for a in ground_truth), default=0.0), 6)


def score_answer(answer: str | None, ground_truth: list[str] | tuple[str, ...]) -> dict[str, object]:
    """The exact-match fields of one recall record: ``correct_exact``, ``matched``
    (the accepted answer found, or None) and ``partial_score`` (see :func:`partial_score`).
    An answer that also states a stale value is scored here like any other: whether it
    hedged needs the world record (see :func:`rescore`)."""
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


def same_value(have: str, need: str) -> bool:
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


_ANSWER_PUNCT = re.compile(r"[^\w\s]|_")


def normalise_answer(text: str) -> str:
    """Lower case, punctuation as spaces, single spaces: the reference form in which
    ground truth is looked for (``"$1,250,000"`` -> ``"1 250 000"``)."""
    return _SPACE.sub(" ", _ANSWER_PUNCT.sub(" ", text.lower())).strip()


def _words(text: str) -> list[str]:
    return normalise_answer(text).split()


def _content_words(text: str) -> set[str]:
    return {w for w in _words(text) if len(w) > 2 or w.isdigit()}


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
            if all(any(same_value(h, n) for h in have) for n in need):
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
