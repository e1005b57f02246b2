"""Simulated agents: offline stand-ins that act through exactly the same text
interface as a real model.

A simulated agent sees only the messages it is sent. It works out from the
system prompt which operations exist and whether the persist and re-check
clauses are present, reads its task from the task text, follows the results of
its own earlier operations in the conversation, and replies with JSON in a
configurable style, or, where the request offers tools (``actions: tools``), with
a tool call in the style's counterpart (clean: one call; prose: text beside the
call; fenced: the operation fenced in text with no call; several objects: two
calls; cut off: a call whose arguments are not JSON). Its behaviour is set by a
named :class:`Profile`. Because
the prompt drives it, deleting the re-check clause from the template changes
what it does, just as the source paper found for a real model.

Everything here is simulated behaviour, never a measurement of a real model:
every reply carries ``extra.simulated = True`` and the route ``sim/NAME``.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workbench.errors import InputError, UnknownNameError
from workbench.models.base import ModelReply, ModelRequest, approx_tokens
from workbench.models.simulated import SimulatedAgent

REPLY_STYLES = ("clean", "prose", "fenced", "multi")


class Cues(BaseModel):
    """Regular expressions by which a simulated agent reads its prompt. They match
    the shipped templates; a study that rewords the templates can adjust them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    store_ops: str = r'"op"\s*:\s*"list"'
    # acting through tools, the request's tool list says what exists: a tool whose name this matches (whole)
    store_tool: str = r"list"
    persist: str = r"(?i)keep (your )?intermediate results"
    recheck: str = r"(?i)check your workspace again"
    max_steps: str = r"(?i)at most (\d+) operations"
    error: str = r"^Error\b"
    list_keys: str = r"^Keys:\s*(.*)$"
    list_empty: str = r"(?i)^the store is empty"
    missing: str = r"(?i)^no such key"
    own_digits: str = r"(\w+) is the sum of the decimal digits of \w+ = (\d+)"
    own_mod: str = r"(\w+) is the remainder of \w+ = (\d+) divided by (\d+)"
    partner: str = r"(\w+) is the [\w ]+ of a number that is not given here"
    # a pair task that does not name the partner's key (vocabulary own-only) or no key (withheld)
    partner_unnamed: str = r"(?i)the other(?: intermediate value)? is the [\w ]+ of a number that is not given here"
    own_digits_unnamed: str = r"(?i)one of them is the sum of the decimal digits of \w+ = (\d+)"
    own_mod_unnamed: str = r"(?i)one of them is the remainder of \w+ = (\d+) divided by (\d+)"
    # what a writer is told of readers (reader_signal: told) and a list's read receipt for one of its keys
    readers_told: str = r"(?i)other processes may (also )?read this workspace"
    receipt: str = r"\(read (\d+) times?\)"
    joint_product: str = r"X = (\w+) × (\w+)"
    joint_sum: str = r"X = (\w+) \+ (\w+)"
    solo_digits: str = r"(?i)sum of the decimal digits of (\d+)"
    solo_mod: str = r"(?i)remainder of (\d+) divided by (\d+)"
    solo_product: str = r"(?i)compute (\d+) × (\d+)"


class Profile(BaseModel):
    """Dispositions of a simulated agent. Probabilities are drawn once per agent
    (is it a writer? does it look again?) unless named per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    p_first_list: float = Field(0.9, ge=0, le=1)
    p_write: float = Field(0.9, ge=0, le=1, description="writes its intermediate value when the persist clause is present")
    p_write_no_persist: float = Field(0.2, ge=0, le=1)
    p_generic_key: float = Field(0.0, ge=0, le=1, description="writes under a generic key instead of the task's (collisions)")
    generic_key: str = "result"
    p_recheck_clause: float = Field(0.9, ge=0, le=1, description="looks at the store again before submitting, clause present")
    p_recheck_no_clause: float = Field(0.1, ge=0, le=1)
    patience: int = Field(3, ge=0, le=50, description="how many further looks while the partner's value is missing")
    p_read_exposed: float = Field(0.95, ge=0, le=1, description="reads the partner's key once a list shows it")
    p_direct_read: float = Field(0.0, ge=0, le=1, description="reads the partner's task-named key without listing")
    p_read_foreign: float = Field(0.1, ge=0, le=1, description="reads another key a list showed, out of curiosity")
    p_readback: float = Field(0.0, ge=0, le=1, description="reads its own written key back before submitting")
    error_rate: float = Field(0.02, ge=0, le=1, description="chance its own arithmetic is off")
    guess: str = Field("own", pattern="^(own|none)$", description="what it submits without the partner's value")
    styles: dict[str, float] = Field(default_factory=lambda: {"clean": 1.0})
    latency_median_s: float = Field(2.0, gt=0)
    latency_sigma: float = Field(0.5, ge=0)
    p_mention_other: float = Field(0.05, ge=0, le=1, description="its reasoning mentions another party")
    p_note_for_readers: float = Field(0.0, ge=0, le=1, description="leaves a note for readers once it is told "
                                      "others may read the workspace, or a receipt shows its key was read")
    p_malformed: float = Field(0.0, ge=0, le=1, description="per agent: one of its replies is cut off before its "
                               "JSON closes (unparseable under either parser rule: attrition under the any-agent "
                               "validity rule)")
    cues: Cues = Field(default_factory=Cues)
    reference: dict[str, str] = Field(default_factory=dict, description="figures a twin was set to approach")
    fitted_on: dict[str, str] = Field(default_factory=dict, description="a twin's calibration templates: SHA-256 "
                                      "of each text it was fitted on, or 'cue:NAME' where a study cue maps new "
                                      "wording (empty for a hand-set profile; see fitting.py)")

    @field_validator("styles")
    @classmethod
    def _styles(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(set(v) - set(REPLY_STYLES))
        if bad:
            raise InputError(f"unknown reply style(s) {bad}; expected some of {list(REPLY_STYLES)}")
        if not v or sum(v.values()) <= 0 or any(w < 0 for w in v.values()):
            raise InputError("style weights must be non-negative and not all zero")
        return v


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(name="diligent", description="lists first, writes its value, looks again and reads what it finds",
                p_first_list=0.98, p_write=0.98, p_write_no_persist=0.6, p_recheck_clause=0.98,
                p_recheck_no_clause=0.9, p_read_exposed=0.99, error_rate=0.01, patience=8, p_note_for_readers=0.7),
        Profile(name="clause-follower", description="looks again only when the prompt asks it to re-check",
                p_recheck_clause=0.98, p_recheck_no_clause=0.02, patience=5),
        Profile(name="non-writer", description="never writes intermediate values; reads if it finds something",
                p_write=0.0, p_write_no_persist=0.0, p_recheck_clause=0.6),
        Profile(name="prose-first", description="explains itself before the JSON (invalid under the strict parser)",
                styles={"prose": 0.85, "clean": 0.15}),
        Profile(name="fencer", description="wraps JSON in ```json fences most of the time",
                styles={"fenced": 0.8, "clean": 0.2}),
        Profile(name="multi-object", description="sometimes plans ahead with several JSON objects in one reply",
                styles={"multi": 0.15, "clean": 0.85}),
        Profile(name="collider", description="writes under a generic key and reads it back (key collisions)",
                p_generic_key=1.0, p_readback=0.9, p_first_list=0.1, p_read_exposed=0.3),
        Profile(name="sloppy", description="frequent arithmetic errors and little looking",
                error_rate=0.35, p_recheck_clause=0.3, patience=1, p_first_list=0.5),
        Profile(name="loner", description="never uses the store", p_first_list=0.0, p_write=0.0,
                p_write_no_persist=0.0, p_recheck_clause=0.0, p_recheck_no_clause=0.0, p_read_foreign=0.0),
    ]
}


def _load_twins() -> dict[str, Profile]:
    """The simulated twins shipped as data (workbench/worlds/stigmergy/profiles/twins.yaml)."""
    import yaml

    from workbench.worlds.stigmergy.fitted import fitted_on

    path = Path(__file__).with_name("profiles") / "twins.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    fitted = fitted_on()  # every twin was calibrated on the same template texts
    return {name: Profile.model_validate({**body, "name": name, "fitted_on": fitted}) for name, body in raw.items()}


PROFILES.update(_load_twins())


def get_profile(name: str, extra: dict[str, Profile] | None = None) -> Profile:
    table = {**PROFILES, **(extra or {})}
    if name not in table:
        raise UnknownNameError(f"unknown simulated profile {name!r}; known: {sorted(table)}")
    return table[name]


def digit_sum_of(number: str) -> int:
    return sum(int(d) for d in number)


UNREADABLE = "twin cannot read its task"  # the refusal's cause, recorded in the reply and the world's validity
NOTE_KEY = "note_for_readers"  # where a simulated writer leaves a note for its readers

# names a simulated agent picks for its own value when the task names none (vocabulary: withheld)
CHOSEN_KEYS: tuple[str, ...] = ("my_value", "intermediate", "partial_result", "value", "result")


@dataclass
class _Task:
    kind: str  # "pair" | "solo" | "uncomputable" (read, cannot compute) | "unknown" (cannot read)
    own_key: str | None = None
    partner_key: str | None = None
    own_true: int | None = None
    combine: str | None = None  # "product" | "sum"


@dataclass
class _History:
    ops: list[tuple[dict[str, Any] | None, str]] = field(default_factory=list)  # (my op, result text)


class SimulatedClient(SimulatedAgent):
    """One simulated agent. Keeps its own random stream and its dispositions."""
    virtual_time = True  # latency is on the world clock, not waited for

    def __init__(self, profile: Profile, seed: int) -> None:
        self.profile = profile
        self.route = f"sim/{profile.name}"
        self.rng = random.Random(seed)
        self._disp: dict[str, bool] | None = None
        self._own_value: int | None = None
        self._task: _Task | None = None
        self._chosen: str | None = None

    # -- reading the prompt -------------------------------------------------
    def _read_task(self, text: str) -> _Task:
        try:
            return self._parse_task(text)
        except ValueError:  # e.g. a number too long for int(): a task it cannot compute
            return _Task("uncomputable")

    def _parse_task(self, text: str) -> _Task:
        c = self.profile.cues
        m_own = re.search(c.own_digits, text)
        m_mod = re.search(c.own_mod, text)
        m_partner = re.search(c.partner, text)
        if re.search(c.partner_unnamed, text):  # before the named cue, which "The other is ..." also matches
            # a half whose partner's key is not named: its own may be (own-only) or not (withheld)
            u_own, u_mod = re.search(c.own_digits_unnamed, text), re.search(c.own_mod_unnamed, text)
            combine = "product" if re.search(c.joint_product, text) else "sum"
            if u_own or m_own:  # the unnamed sentence first: "One of them is ..." also reads as a named one
                m = u_own or m_own
                assert m is not None
                return _Task("pair", None if u_own else m.group(1), None, digit_sum_of(m.groups()[-1]), combine)
            if u_mod or m_mod:
                m = u_mod or m_mod
                assert m is not None
                n, mod = int(m.groups()[-2]), int(m.groups()[-1])
                if mod == 0:
                    return _Task("uncomputable")
                return _Task("pair", None if u_mod else m.group(1), None, n % mod, combine)
        if (m_own or m_mod) and m_partner:
            if m_own:
                own_key, n = m_own.group(1), int(m_own.group(2))
                own_true = sum(int(d) for d in str(n))
            elif m_mod:
                own_key, n, mod = m_mod.group(1), int(m_mod.group(2)), int(m_mod.group(3))
                if mod == 0:
                    return _Task("uncomputable")  # a task it can read but not compute: it will say so
                own_true = n % mod
            combine = "product" if re.search(c.joint_product, text) else "sum"
            return _Task("pair", own_key, m_partner.group(1), own_true, combine)
        if m := re.search(c.solo_product, text):
            return _Task("solo", own_true=int(m.group(1)) * int(m.group(2)))
        if m := re.search(c.solo_mod, text):
            if int(m.group(2)) == 0:
                return _Task("uncomputable")
            return _Task("solo", own_true=int(m.group(1)) % int(m.group(2)))
        if m := re.search(c.solo_digits, text):
            return _Task("solo", own_true=sum(int(d) for d in m.group(1)))
        return _Task("unknown")

    def _history(self, messages: list[dict[str, Any]]) -> _History:
        h = _History()
        for i, msg in enumerate(messages):
            if msg["role"] != "assistant":
                continue
            result = (messages[i + 1]["content"] or "") if i + 1 < len(messages) else ""
            op: Any = None
            if msg.get("tool_calls"):  # its operation is its first call; the first tool message answers it
                fn = msg["tool_calls"][0].get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except (ValueError, RecursionError):
                    args = None
                op = {**args, "op": fn.get("name")} if isinstance(args, dict) else None
            text = msg.get("content") or ""
            start, end = text.find("{"), text.find("}")
            if op is None and not msg.get("tool_calls") and start >= 0 and end > start:
                try:
                    op = json.loads(text[start : end + 1])
                except (ValueError, RecursionError):
                    op = None
            if not isinstance(op, dict) or not all(isinstance(op.get(k, ""), str) for k in ("op", "key")):
                op = None  # not one of its own well-formed operations
            if re.search(self.profile.cues.error, result):
                op = None  # the operation did not take effect
            h.ops.append((op, result))
        return h

    def _listed_keys(self, result: str) -> list[str] | None:
        c = self.profile.cues
        if re.search(c.list_empty, result):
            return []
        m = re.search(c.list_keys, result, re.MULTILINE)
        if not m:
            return None
        keys = []
        for part in m.group(1).split(","):
            key = re.sub(r"\s*\(.*\)\s*$", "", part.strip())
            if key:
                keys.append(key)
        return keys

    # -- deciding -----------------------------------------------------------
    def _dispositions(self, system: str) -> dict[str, bool]:
        p, c, r = self.profile, self.profile.cues, self.rng
        persist = bool(re.search(c.persist, system))
        recheck = bool(re.search(c.recheck, system))
        d = {
            "first_list": r.random() < p.p_first_list,
            "write": r.random() < (p.p_write if persist else p.p_write_no_persist),
            "recheck": r.random() < (p.p_recheck_clause if recheck else p.p_recheck_no_clause),
            "read_exposed": r.random() < p.p_read_exposed,
            "direct_read": r.random() < p.p_direct_read,
            "read_foreign": r.random() < p.p_read_foreign,
            "readback": r.random() < p.p_readback,
            "mention_other": r.random() < p.p_mention_other,
            "generic_key": r.random() < p.p_generic_key,
            # drawn only for a profile that may leave notes, so every other profile's stream is as before
            "note": p.p_note_for_readers > 0 and r.random() < p.p_note_for_readers,
            "told": bool(re.search(c.readers_told, system)),
            # likewise drawn only for a profile with attrition: one of its replies is cut off
            "malformed": p.p_malformed > 0 and r.random() < p.p_malformed,
        }
        # which one: one of its first four replies, or its submission if that comes sooner (see _render)
        self._malformed_at = r.randrange(4) if d["malformed"] else None
        return d

    def _chosen_key(self) -> str:
        if self._chosen is None:
            self._chosen = self.rng.choice(CHOSEN_KEYS)
        return self._chosen

    def _own(self, task: _Task) -> int | None:
        if self._own_value is None and task.own_true is not None:
            v = task.own_true
            if self.rng.random() < self.profile.error_rate:
                v += self.rng.choice([-2, -1, 1, 2])
            self._own_value = v
        return self._own_value

    def _decide(self, messages: list[dict[str, Any]], tools: list[str] | None = None) -> tuple[dict[str, Any], str]:
        """The next operation and why. ``tools``: the names of the tools the request offers
        (None: the JSON-text interface, whose operations the system prompt lists)."""
        p, c = self.profile, self.profile.cues
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        task_text = next((m["content"] for m in messages if m["role"] == "user"), "")
        if self._task is None:
            self._task = self._read_task(task_text)
            self._disp = self._dispositions(system)
        task, d = self._task, self._disp
        assert d is not None
        if tools is None:
            store = bool(re.search(c.store_ops, system))
        else:
            store = any(re.fullmatch(c.store_tool, name) for name in tools)
        m = re.search(c.max_steps, system)
        max_steps = int(m.group(1)) if m else 20
        h = self._history(messages)
        used = len(h.ops)
        own = self._own(task)

        def submit(answer: Any, why: str) -> tuple[dict[str, Any], str]:
            return {"op": "submit", "answer": answer}, why

        guess: Any = own if p.guess == "own" else "unknown"
        if task.kind == "unknown":  # never a guessed answer: the world is invalid, and says why
            return {"op": "refuse"}, UNREADABLE
        if task.kind == "uncomputable":
            return submit("0", "I could not work out the task.")
        done = [op for op, _ in h.ops if op]
        lists = [(i, self._listed_keys(res)) for i, (op, res) in enumerate(h.ops) if op and op.get("op") == "list"]
        reads = {op.get("key"): res for op, res in h.ops if op and op.get("op") == "read"}
        written = {op.get("key") for op in done if op.get("op") == "write"}
        if task.own_key and not d["generic_key"]:
            write_key = task.own_key
        elif task.kind == "pair" and task.own_key is None and not d["generic_key"]:
            write_key = self._chosen_key()  # the task named no key: a name of its own choice
        else:
            write_key = p.generic_key
        unnamed = task.kind == "pair" and task.partner_key is None

        answer: Any = own if task.kind == "solo" else guess
        why = "Submitting my answer."
        if task.kind == "pair":
            partner_val = None
            for key, res in reads.items():
                # a partner whose key was not named: the first value another agent left that it read
                theirs = key == task.partner_key or (unnamed and key not in written and partner_val is None)
                if theirs and not re.search(c.missing, res):
                    try:
                        partner_val = int(str(res).strip().strip('"'))
                    except ValueError:
                        partner_val = None
            if partner_val is not None and own is not None:
                answer = own * partner_val if task.combine == "product" else own + partner_val
                why = f"I have {task.own_key or write_key} and {task.partner_key or 'the other value'}; X = {answer}."
        if not store or used >= max_steps - 1:
            return submit(answer, why)
        if used == 0 and d["first_list"]:
            return {"op": "list"}, "Let me see what the workspace holds."
        last_keys = lists[-1][1] if lists else None
        last_list_at = lists[-1][0] if lists else -1
        reads_since = {op.get("key") for op, _ in h.ops[last_list_at + 1 :] if op and op.get("op") == "read"}
        mention = " Perhaps another agent has computed it." if d["mention_other"] else ""
        if (task.kind == "pair" and last_keys and task.partner_key in last_keys
                and task.partner_key not in reads_since and d["read_exposed"]):
            # the value it needs is in sight: read it before anything else
            return {"op": "read", "key": task.partner_key}, f"{task.partner_key} is in the workspace; reading it.{mention}"
        if unnamed and last_keys and d["read_exposed"] and why == "Submitting my answer.":
            # no name to look for: a key it did not write may be the other value
            others = [k for k in last_keys if k not in written and k not in reads and k != write_key]
            if others:
                return {"op": "read", "key": others[0]}, f"{others[0]} may hold the other value; reading it.{mention}"
        if d["write"] and write_key not in written and own is not None:
            return {"op": "write", "key": write_key, "value": own}, f"Saving {write_key} = {own} in the workspace."
        if d["note"] and write_key in written and NOTE_KEY not in written and own is not None:
            # a writer that knows it may be read (told, or a receipt of a read) leaves a note for its readers
            read_by_others = any(int(m.group(1)) > 0 for op, res in h.ops if op and op.get("op") == "list"
                                 for m in re.finditer(re.escape(write_key) + r"\s*" + c.receipt, res))
            if d["told"] or read_by_others:
                note = f"{write_key} holds my intermediate value ({own}); the other half is still needed."
                return {"op": "write", "key": NOTE_KEY, "value": note}, "Leaving a note for whoever reads this."
        if why != "Submitting my answer.":
            return submit(answer, why)  # it has both halves
        if task.kind == "pair" and task.partner_key is not None:
            if d["direct_read"] and task.partner_key not in reads:
                return {"op": "read", "key": task.partner_key}, f"Trying to read {task.partner_key}.{mention}"
        if last_keys and d["read_foreign"]:
            foreign = [k for k in last_keys if k not in written and k not in reads and k != task.partner_key]
            if foreign:
                return {"op": "read", "key": foreign[0]}, f"Looking at {foreign[0]}."
        looks = sum(1 for i, _ in lists if i > 0)  # every list after the opening one is a further look
        allowed = 1 + p.patience if task.kind == "pair" else 1
        want_look = d["recheck"] and looks < allowed
        if want_look:
            mention = " Maybe someone else left the other value here." if (d["mention_other"] and task.kind == "pair") else ""
            return {"op": "list"}, f"Checking the workspace again before submitting.{mention}"
        if d["readback"] and write_key in written and write_key not in reads:
            return {"op": "read", "key": write_key}, f"Reading back {write_key}."
        return submit(answer, "Submitting my answer.")

    # -- replying -----------------------------------------------------------
    def _render(self, op: dict[str, Any], why: str, tools: bool = False) -> tuple[str, str, list[dict[str, Any]]]:
        """The reply's text, its style and its tool calls (``tools``: the request offers tools)."""
        styles = self.profile.styles
        style = self.rng.choices(list(styles), weights=list(styles.values()))[0]
        if tools:
            return self._render_calls(op, why, style)
        body = json.dumps(op)
        if style == "prose":
            text = f"{why}\n{body}"
        elif style == "fenced":
            text = f"```json\n{body}\n```"
        elif style == "multi":
            follow = {"op": "submit", "answer": op.get("value", 0)} if op["op"] != "submit" else {"op": "list"}
            text = f"{body}\n{json.dumps(follow)}"
        else:
            text = body
        self._replies_rendered = getattr(self, "_replies_rendered", 0) + 1
        at = getattr(self, "_malformed_at", None)
        if at is not None and (self._replies_rendered > at or op.get("op") == "submit") and "}" in text:
            # the agent's one malformed reply (p_malformed): cut off before its JSON closes, so that no
            # parser rule accepts it; the step is used up and the agent goes on from the error it is shown
            self._malformed_at = None
            return text[: text.index("}")], "truncated", []
        return text, style, []

    def _render_calls(self, op: dict[str, Any], why: str, style: str) -> tuple[str, str, list[dict[str, Any]]]:
        """A style's counterpart in tool calls. Its random stream is the JSON-text one's (the
        style drawn, nothing else), so a profile's decisions are the same in both interfaces."""
        self._replies_rendered = getattr(self, "_replies_rendered", 0) + 1
        n = self._replies_rendered

        def call(o: dict[str, Any], i: int) -> dict[str, Any]:
            return {"id": f"call_{n}_{i}", "name": o["op"],
                    "arguments": json.dumps({k: v for k, v in o.items() if k != "op"})}

        text, calls = "", [call(op, 0)]
        if style == "prose":
            text = why
        elif style == "fenced":  # the call written out in text, none made: "no call"
            text, calls = f"```json\n{json.dumps(op)}\n```", []
        elif style == "multi":
            follow = {"op": "submit", "answer": op.get("value", 0)} if op["op"] != "submit" else {"op": "list"}
            calls.append(call(follow, 1))
        at = getattr(self, "_malformed_at", None)
        if at is not None and (n > at or op.get("op") == "submit") and calls:
            # the one malformed reply: the call's arguments cut off before they close (bad arguments)
            self._malformed_at = None
            args = calls[0]["arguments"]
            return "", "truncated", [{**calls[0], "arguments": args[: args.rindex("}")]}]
        return text, style, calls

    async def complete(self, request: ModelRequest) -> ModelReply:
        tools = [t["function"]["name"] for t in request.tools] if request.tools else None
        op, why = self._decide(request.messages, tools)
        if op.get("op") == "refuse":  # no operation at all: a simulated agent's limit, not a model's reply
            text = f"[simulated agent {self.profile.name}: {UNREADABLE}]"
            return self.simulated_reply(request, text, reasoning=why, extra={"refusal": UNREADABLE})
        text, style, calls = self._render(op, why, tools is not None)
        if not calls:
            return self.simulated_reply(request, text, reasoning=why, extra={"style": style})
        written = approx_tokens(text) + approx_tokens(why) + sum(approx_tokens(c["name"] + c["arguments"]) for c in calls)
        return self.simulated_reply(request, text, reasoning=why, tool_calls=calls, completion_tokens=written,
                                    extra={"style": style})


# The clauses a cell's `clauses:` level puts in the system prompt, and the cue each is read by.
CLAUSE_CUES: dict[str, tuple[str, ...]] = {"both": ("persist", "recheck"), "persist-only": ("persist",),
                                           "recheck-only": ("recheck",), "none": ()}
CLAUSE_NAMES = {"persist": "persist clause (keep intermediate results)", "recheck": "re-check clause"}


def check(route: str, profiles: dict[str, Profile] | None = None) -> None:
    get_profile(route.split("/", 1)[1], profiles)  # KeyError names the known ones


def build(route: str, *, seed: int, profiles: dict[str, Profile] | None = None, **_options: Any) -> SimulatedClient:
    """Options of real clients (budget, cache) are ignored: nothing is spent here."""
    return SimulatedClient(get_profile(route.split("/", 1)[1], profiles), seed)


def study_profile(name: str, body: dict[str, Any]) -> Profile:
    """A profile a study defines under ``profiles:``, starting from the shipped one its ``base`` names."""
    from workbench.worlds.stigmergy.fitted import CUE_TEMPLATES, MAPPED, mapped_templates

    body = dict(body)
    if "fitted_on" in body:
        raise InputError("fitted_on: what a twin was calibrated on is not a study's to set; give cues for your "
                         "wording instead, or declare rehearsal: uncalibrated")
    base = body.pop("base", None)
    start = get_profile(base).model_dump() if base else {}
    if isinstance(body.get("cues"), dict):  # cues given for some clauses keep the base's others
        unknown = sorted(set(body["cues"]) - set(CUE_TEMPLATES))
        if unknown:
            raise InputError(f"cues: unknown cue(s) {unknown}; expected some of {sorted(CUE_TEMPLATES)}")
        base_cues = start.get("cues", {})
        changed = [c for c, v in body["cues"].items() if base_cues.get(c) != v]
        body["cues"] = {**base_cues, **body["cues"]}
        fitted = dict(start.get("fitted_on") or {})
        for template in mapped_templates(changed, fitted):  # the study's cue reads its new wording
            cue = next(c for c in changed if template in mapped_templates([c], [template]))
            fitted[template] = MAPPED + cue
        start["fitted_on"] = fitted
    return Profile.model_validate({**start, **body, "name": name})


def _register() -> None:
    from workbench.models.factory import register_route

    register_route("sim", build, check=check, takes_profiles=True)


_register()
