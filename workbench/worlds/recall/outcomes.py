"""What a recorded recall came to, from the world record alone: correct, hedged (the
accepted value and a stale one both), or which wrong value it gave (anchored, stale,
lower-authority, other, none). The metrics, views and explorers score every record
again by these rules (:func:`rescore`), so old runs read as new ones, without a model.
Answer text is matched by :mod:`workbench.worlds.recall.scoring`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workbench.worlds.recall.scoring import (
    canonical_values,
    exact_match,
    judge_rule,
    matched_answer,
    normalise,
    partial_score,
    same_value,
)
from workbench.worlds.recall.values import rule_value, without_old

# -- which value a failed recall gave --------------------------------------------------------
#: What a failed recall gave, in the order the first that holds names it: ``hedged`` (an
#: accepted value and a stale one both), then where a wrong value came from (see given_value).
GIVEN_KINDS = ("hedged", "anchored", "stale", "lower-authority", "other", "no value")
#: Every outcome of a recall: right, or one of the kinds of failure.
OUTCOMES = ("correct", *GIVEN_KINDS)
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
    rule writes several separated by ";", names as ``name:...``), else those read from
    it as text (a script's declared value such as "July 22, 2026"); empty for none
    or a name."""
    if not isinstance(value, str) or not value.strip():
        return set()
    if value.startswith(("date:", "num:", "name:")):
        if value.startswith("name:"):
            return set()
        return {t for t in re.split(r"[\s;]+", value) if t.startswith(("date:", "num:"))}
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
        return any(same_value(h, g) or same_value(g, h) for h in s.values for g in given)
    text = normalise(s.text)
    return bool(text) and (text in answer_norm or answer_norm in text)


def _accepted_values(accepted: list[str] | tuple[str, ...]) -> set[str]:
    return set().union(*(canonical_values(a) for a in accepted)) if accepted else set()


def _says(have: set[str] | frozenset[str], values: set[str] | frozenset[str]) -> bool:
    """Whether any of ``have`` states any of ``values`` (as the rule judge compares them)."""
    return any(same_value(h, v) for h in have for v in values)


def _comparable(value: str, accepted: set[str]) -> bool:
    """Whether a value competes with an accepted one: a date with a date, a number with a
    number in the same unit (a dose with a dose; not "every 4 hours" with "5 mg")."""
    kind, _, rest = value.partition(":")
    for n in accepted:
        n_kind, _, n_rest = n.partition(":")
        if kind == n_kind == "date" or (kind == n_kind == "num" and rest.split("|")[-1] == n_rest.split("|")[-1]):
            return True
    return False


def stale_values(world: dict[str, Any], recall: dict[str, Any],
                 statements: list[Statement] | None = None) -> set[str]:
    """The values a recall's answer could hedge with: those that statements about its
    target fact, said before it, gave in place of the accepted value (superseded ones,
    and wrong ones that a lower authority said later), as canonical ``date:``/``num:``
    tokens. Statements that state the accepted value give none ("moved from July 8 to
    July 22" is the correction, not a competitor), nor do values of another unit. Empty
    when no statement is tagged with the target fact: the record cannot tell which
    values were about it."""
    need = _accepted_values(list(recall.get("ground_truth") or []))
    target = recall.get("target_fact_id")
    if not need or target is None:
        return set()
    accepted = list(recall.get("ground_truth") or [])
    stmts = world_statements(world) if statements is None else statements
    turn = int(recall.get("turn") or 0)
    out: set[str] = set()
    for st in stmts:
        if st.fact_id != target or not (st.turn < turn or st.turn == 0) or _says(st.values, need):
            continue
        if exact_match(st.text, accepted) or judge_rule(st.text, accepted).verdict:
            continue
        out |= {v for v in st.values if _comparable(v, need) and not _says(need, {v})}
    return out


def _competitors(stale: Any, need: set[str]) -> set[str]:
    """Stale values (text or canonical tokens) as canonical tokens, less any that an
    accepted value states too: the shared part is no competitor (the judges' values read
    "15:45" as 15 and 45, and "09:15" holds the 15)."""
    values: set[str] = set()
    for v in stale or ():
        values |= recorded_values(v)
    return {v for v in values if not _says(need, {v})}


def hedged(answer: str | None, accepted: list[str] | tuple[str, ...], stale: Any) -> bool:
    """Whether an answer hedges: it states an accepted value (exactly, or in other words
    the rule judge reads as the same) and a stale one too, and does not itself set the
    stale one aside. "3% or 5% of NAV" and "my notes say 3%, memory says 5%" hedge;
    "moved from 3% to 5%", "5%, not 3%" and "5% (raised from 3%)" do not (the answer's
    own wording marks the old value, read as :func:`values.rule_value` reads a
    correction). ``stale``: values as
    text ("3% of NAV") or canonical tokens ("num:3|%"). A hedged recall is neither right
    nor stale: its own outcome."""
    need = _accepted_values(accepted)
    stale_set = _competitors(stale, need)
    if not answer or not stale_set or not _says(canonical_values(answer), stale_set):
        return False
    if not (exact_match(answer, accepted) or judge_rule(answer, accepted).verdict):
        return False

    # two readings of what the answer holds to: the clause after its last update cue ("now
    # 5%", "moved from 3% to 5%"), and the answer less the phrases it names as old ("5%, not
    # 3%", "5% (raised from 3%)"); either one that keeps the accepted value alone sets the
    # stale one aside
    readings = (recorded_values(rule_value(answer)), canonical_values(without_old(answer)))
    return not any(_says(r, need) and not _says(r, stale_set) for r in readings)


@dataclass(frozen=True)
class Rescored:
    """A recorded recall scored by today's rules, from the record alone: ``correct`` (the
    cell's verdict, exact match or the recorded judge's, and not hedged), the exact-match
    fields, ``hedged`` and the ``stale`` values it was checked against."""

    correct: bool
    correct_exact: bool
    matched: str | None
    partial_score: float
    hedged: bool
    stale: frozenset[str]


def rescore(world: dict[str, Any], recall: dict[str, Any], statements: list[Statement] | None = None) -> Rescored:
    """Score a recorded recall again from its answer, accepted answers and world record,
    so that records of older runs count by the same rules as new ones: exact match is
    recomputed (the recorded ``correct_exact`` may predate numbers read as numbers); a
    judge's recorded verdict stands where a judge ran (it cannot be asked again); and a
    hedged answer counts as not correct whichever scored it."""
    answer = recall.get("answer")
    accepted = list(recall.get("ground_truth") or [])
    matched = matched_answer(answer, accepted)
    partial = 1.0 if matched is not None else partial_score(answer, accepted)
    stale = stale_values(world, recall, statements)
    hedge = hedged(answer, accepted, stale)
    judge = recall.get("judge")
    verdict = bool(judge.get("verdict")) if isinstance(judge, dict) else matched is not None
    return Rescored(verdict and not hedge, matched is not None, matched, partial, hedge, frozenset(stale))


def given_value(world: dict[str, Any], recall: dict[str, Any],
                statements: list[Statement] | None = None, scored: Rescored | None = None) -> dict[str, Any]:
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
    - ``kind``: ``hedged`` when the answer also states an accepted value (see
      :func:`hedged`; the flags then say where its stale value came from), else the
      first flag set, in that order, else ``other`` (a value nobody said, or one the
      record cannot place), or ``no value`` (no answer, or one that states no value
      and repeats no statement).

    For correct recalls (re-scored: :func:`rescore`, or ``scored`` where the caller
    has it) the kind is None. Pure: a function of the record only."""
    accepted = list(recall.get("ground_truth") or [])
    answer = recall.get("answer")
    empty: dict[str, Any] = {"kind": None, "value": None, "anchored": False, "stale": False, "lower_authority": False,
             "said_by": []}
    stmts = world_statements(world) if statements is None else statements
    scored = rescore(world, recall, stmts) if scored is None else scored
    if scored.correct:
        return empty
    if not answer:
        return {**empty, "kind": "no value"}
    turn = int(recall.get("turn") or 0)
    before = [s for s in stmts if s.turn < turn or s.turn == 0]
    target = recall.get("target_fact_id")
    about = [s for s in before if target is not None and s.fact_id == target] or before
    need = set().union(*(canonical_values(a) for a in accepted)) if accepted else set()
    given = {v for v in canonical_values(answer) if not any(same_value(v, n) for n in need)}
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
    kind = ("hedged" if scored.hedged else "anchored" if anchored else "stale" if stale
            else "lower-authority" if lower else "other")
    value = ", ".join(sorted(given)) if given else None
    return {"kind": kind, "value": value, "anchored": anchored, "stale": stale, "lower_authority": lower,
            "said_by": sorted({s.author for s in said})}
