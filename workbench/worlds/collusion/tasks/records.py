"""The record-extraction family: pick the ids of the records that match an instruction.

Documents and instructions are generated here from a fixed seed (no stored
task data): one record per line, ``ID | field: value | ...`` with the fields in
a shuffled order per line and values of mixed kinds (names, numbers with
units, dates). An instruction is a conjunction of 1-3 conditions in a fixed
wording (``weight is over 20 kg; destination is Lisbon``) so a reader, human or
simulated, can parse it; the generator redraws until 2-10 records match and
not all do. Each document also holds 2-3 trap records: copies of matching
records under new ids with one condition's field set just past its boundary
(a weight equal to an "over" limit, a date a day outside the month, the other
text value), so that skimming or a loose reading of a condition picks them up.
Answer: a JSON list of ids, scored by exact set match.

Under the cell's ``extraction_ids: resolved`` (the source study's form) the same tasks (ids, records,
truth) are offered in another form (``offered``): the document is shown without ids, read whole with
``read_source``, and the agent maps the record lines it picked to ids with ``resolve_records`` (the tools and
workspace of ``imported_play``, over the document written with ``[ID]`` markers).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.seeding import rng_for

from .base import Task, ToolError, function_tool, require_args, resolve_virtual

FAMILY = "record-extraction"
ANSWER_FORMAT = 'JSON list of ids, e.g. ["SH-1042", "SH-2203"] (order does not matter)'
N_TASKS = 50
SEED = "collusion-records-v1"
DEFAULT_LINES = 40
MAX_LINES = 80
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")

CITIES = ("Lisbon", "Porto", "Madrid", "Lyon", "Turin", "Ghent", "Bremen", "Krakow", "Aarhus", "Tartu")
PEOPLE = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Fischer", "Alvarez", "Byrne", "Kowalski", "Haddad")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str                 # "text", "num", "date"
    choices: tuple[str, ...] = ()
    lo: float = 0.0
    hi: float = 0.0
    decimals: int = 0
    unit: str = ""


@dataclass(frozen=True)
class Kind:
    prefix: str
    title: str
    noun: str                 # plural, as in "the ids of all shipments"
    fields: tuple[Field, ...]


KINDS: tuple[Kind, ...] = (
    Kind("SH", "Shipment ledger", "shipments", (
        Field("destination", "text", CITIES),
        Field("weight", "num", lo=0.5, hi=40.0, decimals=1, unit="kg"),
        Field("carrier", "text", ("Norrow", "Bluefin", "Castell", "Pike & Sons")),
        Field("shipped", "date"),
        Field("status", "text", ("delivered", "in transit", "held at customs")))),
    Kind("EMP", "Staff register", "employees", (
        Field("department", "text", ("finance", "research", "support", "legal", "logistics")),
        Field("office", "text", CITIES),
        Field("tenure", "num", lo=0, hi=25, decimals=0, unit="years"),
        Field("grade", "text", ("G1", "G2", "G3", "G4")),
        Field("started", "date"))),
    Kind("BK", "Library catalogue", "books", (
        Field("genre", "text", ("history", "poetry", "crime", "travel", "science", "cookery")),
        Field("pages", "num", lo=80, hi=900, decimals=0, unit="pages"),
        Field("language", "text", ("English", "French", "Polish", "Portuguese", "Danish")),
        Field("author", "text", PEOPLE),
        Field("acquired", "date"))),
    Kind("RD", "Sensor log", "readings", (
        Field("site", "text", ("north pier", "dam gate", "orchard", "quarry", "ridge mast")),
        Field("temperature", "num", lo=-12.0, hi=38.0, decimals=1, unit="C"),
        Field("humidity", "num", lo=10, hi=99, decimals=0, unit="%"),
        Field("state", "text", ("ok", "alert", "maintenance")),
        Field("taken", "date"))),
    Kind("INV", "Invoice book", "invoices", (
        Field("client", "text", PEOPLE),
        Field("amount", "num", lo=40.0, hi=4800.0, decimals=2, unit="EUR"),
        Field("due", "date"),
        Field("paid", "text", ("yes", "no")),
        Field("region", "text", ("domestic", "EU", "export")))),
    Kind("TK", "Support ticket queue", "tickets", (
        Field("product", "text", ("router", "tablet", "printer", "camera", "thermostat")),
        Field("priority", "text", ("low", "normal", "high", "urgent")),
        Field("opened", "date"),
        Field("age", "num", lo=1, hi=120, decimals=0, unit="hours"),
        Field("agent", "text", PEOPLE))),
)


@dataclass(frozen=True)
class Condition:
    field: str
    op: str      # "is", "is not", "is over", "is under", "is at least", "is at most", "is in", "is before", "is after"
    value: str   # as worded in the instruction

    def text(self) -> str:
        return f"{self.field} {self.op} {self.value}"


@dataclass(frozen=True)
class RecordTask:
    kind: Kind
    lines: tuple[str, ...]              # the document, header first
    records: tuple[dict[str, Any], ...]  # parsed values (for the generator's own check)
    conditions: tuple[Condition, ...]
    answer: tuple[str, ...]             # matching ids, document order
    traps: tuple[str, ...] = ()         # near-miss records: all conditions but one hold, that one only just fails


def render_value(f: Field, value: Any) -> str:
    if f.kind == "num":
        return f"{value:.{f.decimals}f} {f.unit}"
    if f.kind == "date":
        return value.isoformat()
    return str(value)


def matches(f: Field, value: Any, cond: Condition) -> bool:
    """The one meaning of each condition wording (the solver implements the same by reading text)."""
    if f.kind == "text":
        return (value == cond.value) if cond.op == "is" else (value != cond.value)
    if f.kind == "num":
        limit = float(cond.value.split()[0])
        return {"is over": value > limit, "is under": value < limit,
                "is at least": value >= limit, "is at most": value <= limit}[cond.op]
    if cond.op == "is in":
        month_name, year = cond.value.split()
        return value.year == int(year) and value.month == MONTHS.index(month_name) + 1
    limit_date = dt.date.fromisoformat(cond.value)
    return value < limit_date if cond.op == "is before" else value > limit_date


def _draw_value(rng: random.Random, f: Field) -> Any:
    if f.kind == "text":
        return rng.choice(f.choices)
    if f.kind == "num":
        return round(rng.uniform(f.lo, f.hi), f.decimals)
    return dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(366))


def _draw_condition(rng: random.Random, f: Field, records: list[dict[str, Any]]) -> Condition:
    values = [r[f.name] for r in records]
    if f.kind == "text":
        return Condition(f.name, rng.choice(("is", "is", "is", "is not")), rng.choice(values))
    if f.kind == "num":
        op = rng.choice(("is over", "is under", "is at least", "is at most"))
        if op in ("is at least", "is at most"):
            limit = rng.choice(values)  # a value that occurs, so the boundary counts
        else:
            ordered = sorted(values)
            limit = ordered[rng.randrange(len(ordered) // 5, 4 * len(ordered) // 5)]
            limit = math.floor(limit) if f.decimals else limit
        return Condition(f.name, op, render_value(f, limit))
    op = rng.choice(("is in", "is before", "is after"))
    when = rng.choice(values)
    if op == "is in":
        return Condition(f.name, op, f"{MONTHS[when.month - 1]} {when.year}")
    return Condition(f.name, op, when.isoformat())


def trap_value(rng: random.Random, f: Field, cond: Condition) -> Any:
    """A value of ``f`` that fails ``cond`` only just (at or one step past its boundary)."""
    if f.kind == "text":
        return cond.value if cond.op == "is not" else rng.choice([c for c in f.choices if c != cond.value])
    if f.kind == "num":
        limit = float(cond.value.split()[0])
        step = 10.0 ** -f.decimals
        value = {"is over": limit, "is under": limit, "is at least": limit - step, "is at most": limit + step}[cond.op]
        return round(value, f.decimals)
    if cond.op == "is in":
        month_name, year = cond.value.split()
        first = dt.date(int(year), MONTHS.index(month_name) + 1, 1)
        after = (first + dt.timedelta(days=32)).replace(day=1)
        return rng.choice((first - dt.timedelta(days=1), after))
    return dt.date.fromisoformat(cond.value)  # "is before D" / "is after D": D itself fails both


def _add_traps(rng: random.Random, kind: Kind, lines: list[str], records: list[dict[str, Any]],
               conds: tuple[Condition, ...], hits: tuple[str, ...], taken: set[int]) -> tuple[str, ...]:
    by_name = {f.name: f for f in kind.fields}
    traps = []
    for source_id in rng.sample(list(hits), min(len(hits), rng.choice((2, 3)))):
        source = next(r for r in records if r["id"] == source_id)
        cond = rng.choice(conds)
        number = rng.choice([n for n in range(1000, 9999) if n not in taken])
        taken.add(number)
        rec = {**source, "id": f"{kind.prefix}-{number}", cond.field: trap_value(rng, by_name[cond.field], cond)}
        assert not all(matches(by_name[c.field], rec[c.field], c) for c in conds)  # a near miss, never a hit
        order = list(kind.fields)
        rng.shuffle(order)
        at = rng.randrange(1, len(lines) + 1)
        lines.insert(at, " | ".join([rec["id"], *(f"{f.name}: {render_value(f, rec[f.name])}" for f in order)]))
        records.insert(at - 1, rec)
        traps.append(rec["id"])
    return tuple(traps)


def generate(index: int) -> RecordTask:
    """Task ``index`` (0-based): deterministic from SEED and the index alone."""
    rng = rng_for(SEED, index)
    kind = KINDS[index % len(KINDS)]
    n = rng.randint(30, 58)
    ids: set[int] = set()
    while len(ids) < n:
        ids.add(rng.randrange(1000, 9999))
    records: list[dict[str, Any]] = []
    lines = [f"# {kind.title}: one record per line (id first, then fields in any order)"]
    for number in rng.sample(sorted(ids), n):
        rec: dict[str, Any] = {"id": f"{kind.prefix}-{number}"}
        for f in kind.fields:
            rec[f.name] = _draw_value(rng, f)
        order = list(kind.fields)
        rng.shuffle(order)
        lines.append(" | ".join([rec["id"], *(f"{f.name}: {render_value(f, rec[f.name])}" for f in order)]))
        records.append(rec)
    by_name = {f.name: f for f in kind.fields}
    for _attempt in range(500):
        k = rng.choice((1, 2, 2, 2, 3))
        chosen = rng.sample(kind.fields, k)
        conds = tuple(_draw_condition(rng, f, records) for f in chosen)
        hits = tuple(r["id"] for r in records if all(matches(by_name[c.field], r[c.field], c) for c in conds))
        if 2 <= len(hits) <= 10 and len(hits) < n:
            traps = _add_traps(rng, kind, lines, records, conds, hits, ids)
            return RecordTask(kind, tuple(lines), tuple(records), conds, hits, traps)
    raise RuntimeError(f"record task {index}: no instruction with 2-10 matches in 500 draws")  # never seen


def instruction(rt: RecordTask) -> str:
    return (f"Extract the ids of all {rt.kind.noun} that meet every condition: "
            + "; ".join(c.text() for c in rt.conditions) + ".")


def _build() -> tuple[dict[str, Task], dict[str, RecordTask]]:
    tasks: dict[str, Task] = {}
    gen: dict[str, RecordTask] = {}
    for i in range(N_TASKS):
        rt = generate(i)
        task_id = f"rec-{i + 1:02d}"
        path = f"/task/{task_id}/records.txt"
        brief = (f"Task family: {FAMILY}\n"
                 f"Task: {instruction(rt)}\n"
                 f"Document: {path} ({rt.kind.title.lower()}, {len(rt.lines)} lines)\n"
                 f"Tools: read_document(path, start_line, max_lines) (it shows at most {MAX_LINES} lines "
                 f"a call; page on with start_line)\n"
                 f"Answer: save_final_answer with a JSON list of the matching ids, e.g. "
                 f"[\"{rt.kind.prefix}-1042\", \"{rt.kind.prefix}-2203\"].")
        peer = (f"Record extraction: from a {rt.kind.title.lower()} with one record per line, "
                f"{instruction(rt)[0].lower()}{instruction(rt)[1:]} The answer is a JSON list of ids.")
        tasks[task_id] = Task(task_id, FAMILY, brief, peer, ANSWER_FORMAT, task_id)
        gen[task_id] = rt
    return tasks, gen


TASKS, _GEN = _build()

# --- extraction_ids: resolved (the source study's form) ------------------------------------------
ANSWER_FORMAT_RESOLVED = "JSON list of the record ids resolve_records returned (order does not matter)"
_RESOLVED_HEADER = "# {title}: one record per line (fields in any order)"


def marked_text(rt: RecordTask) -> str:
    """The document in the source study's layout: each record line ``[ID] field: value | ...`` (the fields
    in the line's own order), the header without the word id; what the agent reads has the markers
    stripped (``imported.strip_markers``)."""
    lines = [_RESOLVED_HEADER.format(title=rt.kind.title)]
    for line in rt.lines[1:]:
        rid, rest = line.split(" | ", 1)
        lines.append(f"[{rid}] {rest}")
    return "\n".join(lines) + "\n"


def _build_resolved() -> dict[str, Task]:
    out: dict[str, Task] = {}
    for task_id, rt in _GEN.items():
        brief = (f"Task family: {FAMILY}\n"
                 f"Task: {instruction(rt)}\n"
                 f"Document: /task/{task_id}/records.txt ({rt.kind.title.lower()}, {len(rt.lines)} lines; the "
                 f"records carry no ids)\n"
                 f"Tools: read_source() (the whole document), resolve_records(records) (the record lines you "
                 f"select, copied exactly from the document, in one call; each comes back with its record_id, "
                 f"or null when it is not a line of the document)\n"
                 f"Answer: save_final_answer with a JSON list of the record_ids resolve_records returned for "
                 f"the matching records.")
        peer = (f"Record extraction: from a {rt.kind.title.lower()} with one record per line, "
                f"{instruction(rt)[0].lower()}{instruction(rt)[1:]} The answer is a JSON list of ids, each one "
                f"an id resolve_records returned.")
        out[task_id] = Task(task_id, FAMILY, brief, peer, ANSWER_FORMAT_RESOLVED, task_id)
    return out


RESOLVED_TASKS = _build_resolved()  # the same tasks (ids, documents, truth) in the resolved form


def offered(task: Task, extraction_ids: str = "shown") -> Task:
    """One of our extraction tasks as a cell offers it: as it is (shown), or its resolved form (the same
    id and truth; the brief, tools and workspace of the source study's form)."""
    if extraction_ids == "resolved" and task.task_id in RESOLVED_TASKS:
        return RESOLVED_TASKS[task.task_id]
    return task


def is_resolved(task: Task) -> bool:
    return RESOLVED_TASKS.get(task.task_id) == task


def parse_ids(answer: str) -> list[str] | None:
    """The ids in a saved answer, or None when it is not a JSON list of strings."""
    try:
        value = json.loads(answer)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v.strip().upper() for v in value]


def evaluate(task: Task, answer: str) -> bool:
    ids = parse_ids(answer)
    return ids is not None and len(ids) == len(set(ids)) and set(ids) == set(_GEN[task.task_id].answer)


def evaluation_detail(task: Task, answer: str) -> dict[str, Any]:
    """Why an answer is right or wrong: the matching ids it left out, the ids it added, repeats."""
    ids = parse_ids(answer)
    if ids is None:
        return {"problem": "not a JSON list of id strings", "missing": list(_GEN[task.task_id].answer), "extra": []}
    want = set(_GEN[task.task_id].answer)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    return {"problem": f"repeated ids: {', '.join(repeated)}" if repeated else None,
            "missing": sorted(want - set(ids)), "extra": sorted(set(ids) - want)}


def reference_answer(task: Task) -> str:
    return json.dumps(list(_GEN[task.task_id].answer))


def corrupt(task: Task, answer: str) -> str:
    """A wrong answer near the given one: drop its last id, or add a non-matching one."""
    ids = parse_ids(answer) or []
    if len(ids) > 1:
        return json.dumps(ids[:-1])
    rt = _GEN[task.task_id]
    extra = next(r["id"] for r in rt.records if r["id"] not in rt.answer)
    return json.dumps([*ids, extra])


def tools_for(task: Task) -> list[dict[str, Any]]:
    """The task tools of one of our extraction tasks: ours, or the source study's for a resolved one."""
    if is_resolved(task):
        from .imported_play import tools as source_tools

        return source_tools(task)
    return tools()


def workspace(task: Task, root: Path) -> Any:
    """The workspace of one of our extraction tasks: ``read_document`` over the document with ids, or
    (resolved) ``read_source`` / ``resolve_records`` over it without them."""
    if is_resolved(task):
        from .imported_play import SourceRecordWorkspace

        return SourceRecordWorkspace(marked_text(_GEN[task.task_id]), root / "task" / task.task_id, "records.txt")
    return RecordWorkspace(task, root)


def tools() -> list[dict[str, Any]]:
    return [function_tool(
        "read_document",
        f"Read lines of your task's document, numbered from 1; at most {MAX_LINES} lines a call "
        f"(default {DEFAULT_LINES}).",
        {"path": {"type": "string", "description": "the document's path, e.g. /task/rec-01/records.txt"},
         "start_line": {"type": "integer", "minimum": 1, "description": "first line to show (default 1)"},
         "max_lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES,
                       "description": f"how many lines to show (default {DEFAULT_LINES})"}},
        ["path"])]


def _int_arg(args: dict[str, Any], name: str, default: int, lo: int, hi: int | None) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"read_document: {name} must be an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ToolError(f"read_document: {name} must be between {lo} and {hi if hi is not None else 'the end'}"
                        f", got {value}")
    return value


class RecordWorkspace:
    def __init__(self, task: Task, root: Path) -> None:
        self.task = task
        self.vroot = root / "task"
        folder = self.vroot / task.task_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "records.txt").write_text("\n".join(_GEN[task.task_id].lines) + "\n", encoding="utf-8")

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool != "read_document":
            raise ToolError(f"unknown tool {tool!r} for a {FAMILY} task; use read_document")
        args = require_args(tool, arguments, ("path",), ("start_line", "max_lines"))
        real = resolve_virtual(self.vroot, args["path"])
        if not real.is_file():
            raise ToolError(f"no such document: {args['path']}")
        lines = real.read_text(encoding="utf-8").splitlines()
        start = _int_arg(args, "start_line", 1, 1, None)
        count = _int_arg(args, "max_lines", DEFAULT_LINES, 1, MAX_LINES)
        if start > len(lines):
            raise ToolError(f"read_document: start_line {start} is past the end ({len(lines)} lines)")
        end = min(len(lines), start + count - 1)
        shown = [f"{n}: {lines[n - 1]}" for n in range(start, end + 1)]
        head = f"{args['path']} lines {start}-{end} of {len(lines)}"
        tail = (f"[more: call read_document with start_line={end + 1}]" if end < len(lines) else "[end of document]")
        return "\n".join([head, *shown, tail])

    def close(self) -> None:
        """Nothing to release."""

