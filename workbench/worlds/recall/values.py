"""What a statement states: the value that decides a conflict in shared memory.

A memory entry's value is the script's declared ``value`` when it has one, else
one found by rule here (or, with ``values: judge``, by a judge model through the
model interface; the world asks, this module reads the judge's answer). Values
are compared as strings, so they are canonical: ``date:2026-07-22``,
``num:180000|$`` and so on (the forms of :func:`scoring.canonical_values`, which
the report reads), or
``name:dana whitfield`` for a statement that names someone or something and
states no date or amount."""
from __future__ import annotations

import re

from workbench.stores.vector import VALUE_SEP

_STOP = frozenset("""a an the and or of to in on at for by with from as is are was were be been being this that these
those it its what which who whom whose when where how why do does did current currently now our your their his her
we you they i me my us them has have had will would shall should can could may might must not no yes than then
there here please confirm tell give state value exact answer latest new old file matter team record""".split())
_MONTHS = {m: i + 1 for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"])}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d,.:/-]*\d%?|\d%?")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _stem(w: str) -> str:
    w = w.lower().strip("'-")
    return w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w


def content_words(text: str) -> set[str]:
    """Lower-case, crudely stemmed words of three letters or more that carry meaning."""
    return {_stem(w) for w in words(text) if w[0].isalpha() and len(w) >= 3 and w.lower() not in _STOP}


def value_tokens(text: str, query: str = "") -> frozenset[str]:
    """Date/number/amount/dose/name-like tokens of ``text`` that ``query`` does not hold:
    tokens with a digit, month names, and capitalised words that do not start a sentence."""
    q = {w.lower() for w in words(query)}
    out: set[str] = set()
    toks = re.findall(r"\S+", text)
    for i, raw in enumerate(toks):
        w = raw.strip(".,;:!?()[]\"'")
        if not w:
            continue
        lw = w.lower()
        if lw in q:
            continue
        starts = i == 0 or toks[i - 1].endswith((".", "!", "?", ":"))
        if any(c.isdigit() for c in w) or lw in _MONTHS and len(lw) > 3 or (w[0].isupper() and not starts
                                                                           and lw not in _STOP and len(w) > 1):
            out.add(lw.rstrip(".,"))
    return frozenset(out)




# -- canonical values (the simulated judge's forms) ------------------------------------
_DATE_MDY = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_DATE_DMY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_DATE_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DATE_US = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_NUMBER = re.compile(r"(?<![\w.])([$€£]?)\s?(\d[\d,]*(?:\.\d+)?)\s*(%|percent|bps|basis points|million|billion|"
                     r"thousand|[kKmMbB]n?\b|mg/kg|mg|mcg|g|ml|mL|units?|iu|IU|hours?|days?|weeks?|months?|years?|"
                     r"shares?)?")
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "b": 1e9, "bn": 1e9}


def canonical_values(text: str) -> set[str]:
    """Typed canonical values in ``text``: ``date:YYYY-MM-DD``, ``num:VALUE[unit]``."""
    out: set[str] = set()
    spans: list[tuple[int, int]] = []

    def date(y: str, mo: int, d: str, span: tuple[int, int]) -> None:
        if 1 <= mo <= 12 and 1 <= int(d) <= 31:
            out.add(f"date:{int(y):04d}-{mo:02d}-{int(d):02d}")
            spans.append(span)

    for m in _DATE_MDY.finditer(text):
        if m.group(1).lower() in _MONTHS:
            date(m.group(3), _MONTHS[m.group(1).lower()], m.group(2), m.span())
    for m in _DATE_DMY.finditer(text):
        if m.group(2).lower() in _MONTHS:
            date(m.group(3), _MONTHS[m.group(2).lower()], m.group(1), m.span())
    for m in _DATE_ISO.finditer(text):
        date(m.group(1), int(m.group(2)), m.group(3), m.span())
    for m in _DATE_US.finditer(text):
        date(m.group(3), int(m.group(1)), m.group(2), m.span())
    for m in _NUMBER.finditer(text):
        if any(a <= m.start(2) < b for a, b in spans):
            continue
        try:
            value = float(m.group(2).replace(",", ""))
        except ValueError:
            continue
        unit = (m.group(3) or "").lower()
        if unit in _SCALE:
            value *= _SCALE[unit]
            unit = ""
        unit = {"percent": "%", "basis points": "bps", "unit": "units", "hour": "hours", "day": "days",
                "week": "weeks", "month": "months", "year": "years", "share": "shares"}.get(unit, unit)
        if m.group(1):
            unit = "money" + unit
        out.add(f"num:{value:g}{unit}")
    return out




_UPDATE = re.compile(r"(?i)\b(?:to|now|instead|corrected|changed|moved|revised|updated|replaced|amended|lowered|"
                     r"raised|increased|reduced)\b")
_OLD = re.compile(r"(?i)\b(?:was|were|previously|formerly|instead of|rather than|not|from)\b[^;)]*?"
                  r"(?=;|\)|\.\s|\.$|,\s+(?:and|but|so)\b|$)")
_CANONICAL = re.compile(r"^(date|num|name):\S")
_NONE = re.compile(r"(?i)^\W*(none|no value|n/?a|unknown)\W*$")


def without_old(text: str) -> str:
    """``text`` less the phrases that name a value as the old one ("was July 8", "not
    $180,000", "(previously 3%)", "from 3% to 5%"): what a statement leaves standing."""
    return _OLD.sub(" ", text)


def _scored_values(text: str) -> set[str]:
    """The canonical dates and quantities of the scoring module (the forms the report's
    value attribution reads): ``date:2026-07-22``, ``num:180000|$``."""
    from workbench.worlds.recall.scoring import canonical_values as scoring_values

    return scoring_values(text)


def rule_value(text: str | None) -> str | None:
    """The value a statement states, by rule: its canonical dates and amounts (the last
    clause that holds any, so "moved from July 22 to July 29" states July 29), else its
    name-like words; None when it states none ("Noted.")."""
    if not text:
        return None
    vals = _scored_values(text)
    if len(vals) > 1:  # a correction names the old value and the new one: the clause after the last cue
        clause = text
        for cut in reversed([m.end() for m in _UPDATE.finditer(text)]):
            if _scored_values(text[cut:]):
                clause = text[cut:]
                break
        vals = _scored_values(clause)
        if len(vals) > 1:  # "July 29, not July 22", "(was September 30)": the old value is said as old
            current = _scored_values(without_old(clause))
            vals = current or vals
    if vals:
        return VALUE_SEP.join(sorted(vals))
    names = sorted(_names(text))
    return "name:" + " ".join(names) if names else None


def _names(text: str) -> set[str]:
    """Name-like words: capitalised words that do not merely start a sentence (one that
    starts a sentence counts when the next word is capitalised too: "Dana Whitfield")."""
    out = {t for t in value_tokens(text) if not any(c.isdigit() for c in t) and t not in _MONTHS}
    raw = re.findall(r"\S+", text)
    toks = [x.strip(".,;:!?()[]\"'") for x in raw]
    for i, w in enumerate(toks[:-1]):
        nxt = toks[i + 1]
        if (w[:1].isupper() and w.isalpha() and w.lower() not in _STOP and raw[i] == w  # no comma: "Understood, I"
                and nxt[:1].isupper() and nxt.isalpha() and len(nxt) > 1 and nxt.lower() not in _STOP):
            out.add(w.lower())
    return out


def canonical_value(phrase: str | None) -> str | None:
    """A value phrase ("July 22, 2026", "$1.2 million", "Dana Whitfield") in the canonical
    form the rule gives, so that a declared value, a judged one and a ruled one compare."""
    if phrase is None or not phrase.strip():
        return None
    phrase = phrase.strip()
    if _CANONICAL.match(phrase):  # already canonical (the simulated judge answers so)
        return phrase
    found = rule_value(phrase)
    if found is not None:
        return found
    words = " ".join(re.findall(r"[\w'-]+", phrase.casefold()))
    return f"name:{words}" if words else None


def judged_value(reply: str | None) -> str | None:
    """A judge's answer to "what value does this statement give?", in canonical form
    (:func:`canonical_value` of its first line); None for NONE or an empty answer."""
    if reply is None or not reply.strip() or _NONE.match(reply.strip()):
        return None
    return canonical_value(reply.strip().splitlines()[0])


def statement_value(declared: str | None, text: str | None) -> tuple[str | None, str | None]:
    """(value, value_source): the script's declared value (canonical) when it has one, else the rule's."""
    if declared:
        return canonical_value(str(declared)), "script"
    v = rule_value(text)
    return (v, "rule") if v is not None else (None, None)
