"""Scenario scripts of the recall world: the JSON schema, its validation and loading.

A script is the whole experimental stimulus (who says what, when, what goes into
shared memory, and which turns are recall probes with their accepted answers),
so a malformed one must be refused before any world runs, with one line that
names the file, the turn and the field. Validation is written out by hand rather
than left to pydantic so that the turn number appears in the message: authors
think in turn numbers, not list indices.

Facts and statements may carry a ``value`` (the value they state, e.g. "July 22,
2026"): it must occur in their text, and a statement's needs its ``fact_id``.
Invalidation compares values, not wording, where the script gives them.

Beyond the shape, the loader checks that every recall is answerable from what the
world can store: one accepted answer must occur in the target fact's text or in
an earlier memory write about that fact. Otherwise a recall would be unanswerable
by design and every condition would score it wrong."""
from __future__ import annotations

import glob as _glob
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.errors import UnknownNameError
from workbench.inputs import InputFileError
from workbench.worlds.recall.domains import DOMAINS, NARRATOR
from workbench.worlds.recall.scoring import exact_match, normalise_answer

FAILURE_MODES: tuple[str, ...] = ("belief_asymmetry", "authority_collapse", "memory_anchoring")

_SCRIPT_FIELDS = {"script_id", "domain", "initial_facts", "turns", "description"}
_FACT_FIELDS = {"id", "text", "tier", "authority_level", "value"}
_TURN_FIELDS = {
    "turn", "role", "content", "is_recall", "target_fact_id", "ground_truth",
    "recall_query", "failure_mode", "write_to_memory", "fact_id", "value",
}


class ScriptError(InputFileError):
    """A scenario script that cannot be used; ``str(err)`` names file, turn and field."""


@dataclass(frozen=True)
class Fact:
    """A fact of the case file, preloaded into shared memory at turn 0."""

    id: str
    text: str
    tier: str
    authority_level: float
    value: str | None = None  # the value the fact states (e.g. "July 22, 2026"), when the script says


@dataclass(frozen=True)
class Turn:
    """One scripted utterance; a recall turn is a probe scored against ``ground_truth``."""

    turn: int
    role: str
    content: str
    is_recall: bool
    target_fact_id: str | None
    ground_truth: tuple[str, ...]
    recall_query: str | None
    failure_mode: str
    write_to_memory: bool
    fact_id: str | None = None
    value: str | None = None  # the value a statement about fact_id states, when the script says
    # Set only by an adversarial overlay (workbench.worlds.recall.adversary), never read from JSON:
    authority: float | None = None  # the authority its memory write carries (None: its role's)
    poisoned: bool = False  # a poisoner's false statement: a mark for the metrics, never shown to agents


@dataclass(frozen=True)
class Script:
    script_id: str
    domain: str
    initial_facts: tuple[Fact, ...]
    turns: tuple[Turn, ...]
    path: str | None = None
    description: str = ""

    def recalls(self) -> list[Turn]:
        """The recall probes, in turn order."""
        return [t for t in self.turns if t.is_recall]

    def fact(self, fact_id: str) -> Fact:
        for f in self.initial_facts:
            if f.id == fact_id:
                return f
        raise UnknownNameError(f"{self.script_id}: no initial fact {fact_id!r}")

    def writes_about(self, fact_id: str, before_turn: int | None = None) -> list[Turn]:
        """Memory writes tagged with ``fact_id`` (before ``before_turn`` if given), in order."""
        return [
            t for t in self.turns
            if t.write_to_memory and t.fact_id == fact_id and (before_turn is None or t.turn < before_turn)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The script in its JSON schema (what ``script_from_dict`` reads back)."""
        out: dict[str, Any] = {"script_id": self.script_id, "domain": self.domain}
        if self.description:
            out["description"] = self.description
        out["initial_facts"] = [_drop_none_value(asdict(f)) for f in self.initial_facts]
        out["turns"] = [_drop_none_value({**asdict(t), "ground_truth": list(t.ground_truth)}) for t in self.turns]
        return out


def _drop_none_value(d: dict[str, Any]) -> dict[str, Any]:
    if d.get("value") is None:
        d.pop("value", None)
    if d.get("authority", 0) is None:  # an overlay's fields, at their defaults, are no part of the schema
        d.pop("authority")
    if d.get("poisoned") is False:
        d.pop("poisoned")
    return d


# ---------------------------------------------------------------- answer matching

def answer_matches(text: str, accepted: Iterable[str]) -> bool:
    """Whether one accepted answer occurs in ``text`` by the rule recalls are scored with
    (:func:`workbench.worlds.recall.scoring.exact_match`: numbers read as numbers, so "5 mg"
    is not found in "25 mg" nor in "5.5 mg")."""
    return exact_match(text, list(accepted))


# ---------------------------------------------------------------- validation

class _Checker:
    """Validation context: knows the file and builds errors naming the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> ScriptError:
        return ScriptError(self.source, where, message)

    def fields(self, obj: Any, where: str, allowed: set[str], required: Iterable[str], what: str) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(where, f"expected {what} (a JSON object), got {_kind(obj)}")
        for key in obj:
            if key not in allowed:
                raise self.fail(_join(where, str(key)), f"unknown field (expected one of: {', '.join(sorted(allowed))})")
        for key in required:
            if key not in obj:
                raise self.fail(_join(where, key), "required field is missing")
        return obj

    def string(self, obj: dict[str, Any], key: str, where: str, *, empty_ok: bool = False, null_ok: bool = False) -> str | None:
        value = obj.get(key)
        if value is None and null_ok:
            return None
        if not isinstance(value, str):
            raise self.fail(_join(where, key), f"expected {'a string or null' if null_ok else 'a string'} (got {_show(value)})")
        if not empty_ok and not value.strip():
            raise self.fail(_join(where, key), "expected a non-empty string (got \"\")")
        return value

    def boolean(self, obj: dict[str, Any], key: str, where: str) -> bool:
        value = obj.get(key)
        if not isinstance(value, bool):
            raise self.fail(_join(where, key), f"expected true or false (got {_show(value)})")
        return value


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _show(value: Any) -> str:
    return json.dumps(value)[:80] if _jsonable(value) else repr(value)[:80]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _fact(c: _Checker, raw: Any, where: str) -> Fact:
    obj = c.fields(raw, where, _FACT_FIELDS, ("id", "text", "tier", "authority_level"), "a fact")
    fid = c.string(obj, "id", where)
    text = c.string(obj, "text", where)
    tier = c.string(obj, "tier", where)
    level = obj["authority_level"]
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 <= float(level) <= 1.0:
        raise c.fail(_join(where, "authority_level"), f"expected a number from 0 to 1 (got {_show(level)})")
    value = _value(c, obj, where, text or "")
    return Fact(fid.strip(), text or "", tier or "", float(level), value)  # type: ignore[union-attr]


def _value(c: _Checker, obj: dict[str, Any], where: str, text: str) -> str | None:
    """The optional ``value`` of a fact or statement: a non-empty string found in its text
    (as a run of whole words after normalisation, as answers are matched)."""
    if "value" not in obj or obj["value"] is None:
        return None
    value = c.string(obj, "value", where)
    assert value is not None
    if not normalise_answer(value):
        raise c.fail(_join(where, "value"), f"the value has no letters or digits (got {_show(value)})")
    if not answer_matches(text, [value]):
        raise c.fail(_join(where, "value"), f"the value {value!r} does not occur in the text {text[:60]!r}")
    return value


def _turn(c: _Checker, raw: Any, index: int, domain: str, facts: dict[str, Fact]) -> Turn:
    where = f"turns[{index}]"
    if not isinstance(raw, dict):
        raise c.fail(where, f"expected a turn (a JSON object), got {_kind(raw)}")
    if "turn" not in raw:
        raise c.fail(_join(where, "turn"), "required field is missing")
    obj, number = raw, raw["turn"]
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise c.fail(_join(where, "turn"), f"expected a whole number >= 1 (got {_show(number)})")
    where = f"turns[{index}] (turn {number})"
    c.fields(obj, where, _TURN_FIELDS, ("role", "content", "is_recall", "write_to_memory"), "a turn")

    role = c.string(obj, "role", where)
    roles = DOMAINS[domain]
    if role not in roles and role != NARRATOR:
        raise c.fail(_join(where, "role"),
                     f"unknown role {role!r} for domain {domain!r} (expected one of: {', '.join([*roles, NARRATOR])})")
    content = c.string(obj, "content", where)
    is_recall = c.boolean(obj, "is_recall", where)
    write = c.boolean(obj, "write_to_memory", where)
    target = c.string(obj, "target_fact_id", where, null_ok=True) if "target_fact_id" in obj else None
    query = c.string(obj, "recall_query", where, empty_ok=True, null_ok=True) if "recall_query" in obj else None
    mode = c.string(obj, "failure_mode", where, empty_ok=True) if "failure_mode" in obj else ""
    fact_id = c.string(obj, "fact_id", where, null_ok=True) if "fact_id" in obj else None

    truth_raw = obj.get("ground_truth", [])
    if not isinstance(truth_raw, list) or not all(isinstance(a, str) for a in truth_raw):
        raise c.fail(_join(where, "ground_truth"), f"expected a list of accepted answer strings (got {_show(truth_raw)})")
    for a in truth_raw:
        if not normalise_answer(a):
            raise c.fail(_join(where, "ground_truth"), f"an accepted answer has no letters or digits (got {_show(a)})")
    truth = tuple(truth_raw)

    if mode and mode not in FAILURE_MODES:
        raise c.fail(_join(where, "failure_mode"), f"unknown failure mode {mode!r} (expected one of: {', '.join(FAILURE_MODES)})")
    if fact_id is not None and fact_id not in facts:
        raise c.fail(_join(where, "fact_id"), f"no initial fact {fact_id!r} (known: {', '.join(facts)})")

    if is_recall:
        if role == NARRATOR:
            raise c.fail(_join(where, "role"), f"a recall turn must be spoken by a team role, not the narrator {NARRATOR!r}")
        if not target:
            raise c.fail(_join(where, "target_fact_id"), "a recall turn needs the id of the fact it asks about (got null)")
        if target not in facts:
            raise c.fail(_join(where, "target_fact_id"), f"no initial fact {target!r} (known: {', '.join(facts)})")
        if not (query or "").strip():
            raise c.fail(_join(where, "recall_query"), f"a recall turn needs a non-empty recall_query (got {_show(query)})")
        if not truth:
            raise c.fail(_join(where, "ground_truth"), "expected a non-empty list of accepted answers (got [])")
        if not mode:
            raise c.fail(_join(where, "failure_mode"), f"a recall turn needs a failure mode (expected one of: {', '.join(FAILURE_MODES)})")
        if write:
            raise c.fail(_join(where, "write_to_memory"), "a recall turn is a question and is never written to memory (expected false)")
        if fact_id is not None and fact_id != target:
            raise c.fail(_join(where, "fact_id"), f"on a recall turn fact_id must be null or the target {target!r} (got {fact_id!r})")
    else:
        if truth:
            raise c.fail(_join(where, "ground_truth"), "only recall turns have accepted answers (is_recall is false; expected [])")
        if mode:
            raise c.fail(_join(where, "failure_mode"), "only recall turns have a failure mode (is_recall is false; expected \"\")")
        if target is not None:
            raise c.fail(_join(where, "target_fact_id"),
                         "only recall turns have a target; to say which fact a statement is about use fact_id")
    value = _value(c, obj, where, content or "")
    if value is not None and is_recall:
        raise c.fail(_join(where, "value"), "a recall turn states no value (its accepted answers are ground_truth)")
    if value is not None and fact_id is None:
        raise c.fail(_join(where, "value"), "a statement's value needs the fact it is about: set fact_id")
    return Turn(number, role, content, is_recall, target, truth, query, mode, write, fact_id, value)  # type: ignore[arg-type]


def script_from_dict(data: Any, source: str = "<dict>") -> Script:
    """Validate one script given as parsed JSON; ScriptError names ``source``, turn and field."""
    c = _Checker(source)
    obj = c.fields(data, "", _SCRIPT_FIELDS, ("script_id", "domain", "initial_facts", "turns"), "a script")
    script_id = c.string(obj, "script_id", "")
    domain = c.string(obj, "domain", "")
    if domain not in DOMAINS:
        raise c.fail("domain", f"unknown domain {domain!r} (expected one of: {', '.join(DOMAINS)})")
    description = c.string(obj, "description", "", empty_ok=True) if "description" in obj else ""

    raw_facts = obj["initial_facts"]
    if not isinstance(raw_facts, list) or not raw_facts:
        raise c.fail("initial_facts", f"expected a non-empty list of facts (got {_show(raw_facts)})")
    facts: dict[str, Fact] = {}
    for i, raw in enumerate(raw_facts):
        fact = _fact(c, raw, f"initial_facts[{i}]")
        if fact.id in facts:
            raise c.fail(f"initial_facts[{i}].id", f"duplicate fact id {fact.id!r} (fact ids must be unique)")
        facts[fact.id] = fact

    raw_turns = obj["turns"]
    if not isinstance(raw_turns, list) or not raw_turns:
        raise c.fail("turns", f"expected a non-empty list of turns (got {_show(raw_turns)})")
    turns: list[Turn] = []
    for i, raw in enumerate(raw_turns):
        turn = _turn(c, raw, i, domain, facts)  # type: ignore[arg-type]
        if turns and turn.turn <= turns[-1].turn:
            raise c.fail(f"turns[{i}] (turn {turn.turn}).turn", f"turn numbers must strictly increase (previous turn is {turns[-1].turn})")
        turns.append(turn)

    script = Script(script_id.strip(), domain, tuple(facts.values()), tuple(turns),  # type: ignore[arg-type, union-attr]
                    None if source == "<dict>" else source, description or "")
    for i, turn in enumerate(script.turns):
        if turn.is_recall and not _answerable(script, turn):
            raise c.fail(
                f"turns[{i}] (turn {turn.turn}).ground_truth",
                f"none of the accepted answers {list(turn.ground_truth)} occurs in fact {turn.target_fact_id}'s text "
                f"or in an earlier write_to_memory turn with fact_id {turn.target_fact_id!r}, so the recall cannot be answered from memory",
            )
    return script


def _answerable(script: Script, recall: Turn) -> bool:
    assert recall.target_fact_id is not None
    texts = [script.fact(recall.target_fact_id).text, *(t.content for t in script.writes_about(recall.target_fact_id, recall.turn))]
    return any(answer_matches(text, recall.ground_truth) for text in texts)


# ---------------------------------------------------------------- loading

def load_script(path: str | Path) -> Script:
    """Read and validate one script file; JSON syntax errors name the line and column."""
    path = Path(path)
    if not path.is_file():
        raise ScriptError(path, "", "file not found (expected a recall scenario script, JSON)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ScriptError(path, f"line {exc.lineno}, column {exc.colno}", f"not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise ScriptError(path, "", f"not UTF-8 text ({exc.reason})") from None
    return script_from_dict(data, str(path))


def load_scripts(folder_or_glob: str | Path) -> list[Script]:
    """Every ``*.json`` script under a folder (recursively), or matching a glob, sorted by
    script_id. A script id used twice is an error naming both files: results are keyed by it."""
    spec = str(folder_or_glob)
    if Path(spec).is_dir():
        paths = sorted(Path(spec).rglob("*.json"))
    else:
        paths = sorted(Path(p) for p in _glob.glob(spec, recursive=True) if Path(p).is_file())
    if not paths:
        raise ScriptError(spec, "", "no script files found (expected a folder of *.json scripts or a glob matching some)")
    scripts: dict[str, Script] = {}
    for path in paths:
        script = load_script(path)
        if script.script_id in scripts:
            raise ScriptError(path, "script_id",
                              f"duplicate script id {script.script_id!r} (also used in {scripts[script.script_id].path})")
        scripts[script.script_id] = script
    return [scripts[k] for k in sorted(scripts)]
