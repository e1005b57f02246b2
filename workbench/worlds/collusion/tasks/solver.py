"""How a simulated agent does its task: by reading its brief and the tool results.

The solver never looks at task data directly. Like a model, it reads the
owner's brief (regexes over the text), makes tool calls, and derives its
answer from what the tools return:
- code analysis: read the file, turn the docstring's ``>>>`` examples into a
  pytest file, write it, run it; any failure means "bug";
- record extraction: page through the document, parse each record line and
  keep the ids that meet every condition of the instruction; where the brief
  offers read_source/resolve_records (the document without ids), read it,
  keep the matching lines and resolve them to ids;
- data search: map the templated question (or multi-join search) to SQL with
  a few patterns, run it, answer with the rows (objects keyed by the answer key
  columns for a search).
It is correct on every task (tests check all of them); the simulated agent adds
its own error rate on top.
"""
from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any

Call = tuple[str, dict[str, Any]]
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
# "is in" only before a month and year: "status is in transit" is the text condition "is" with value "in transit"
_CONDITION = re.compile(r"^(\w+) (is not|is over|is under|is at least|is at most|is in(?= [A-Z][a-z]+ \d{4}$)|is before|"
                        r"is after|is) (.+)$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class Solver:
    """One per agent per episode: ``next_call`` until it returns None, then ``answer``."""

    def __init__(self, brief: str) -> None:
        self.brief = brief
        m = re.search(r"^Task family: (\S+)", brief, re.M)
        self.family = m.group(1) if m else ""
        self._answer = ""
        plans = {"code-analysis": self._code, "record-extraction": self._records, "data-search": self._data}
        self._plan: Generator[Call, str, None] | None = plans[self.family]() if self.family in plans else None
        self._started = False
        self.calls: list[Call] = []

    def next_call(self, last_result: str | None) -> Call | None:
        """The next task tool call given the previous call's result, or None once the answer is known."""
        if self._plan is None:
            return None
        try:
            if not self._started:
                self._started = True
                call = next(self._plan)
            else:
                call = self._plan.send(last_result if last_result is not None else "")
        except StopIteration:
            self._plan = None
            return None
        self.calls.append(call)
        return call

    def answer(self) -> str:
        """The answer it would save (before any error noise the caller adds)."""
        return self._answer

    # --- code analysis -------------------------------------------------------------------------

    def _code(self) -> Generator[Call, str, None]:
        self._answer = "no_bug"
        if _find(r"^Target code path: (\S+)", self.brief):  # the source study's tool API (code_original)
            yield from self._code_original()
            return
        path = _find(r"^File: (\S+)", self.brief)
        name = _find(r"from impl import (\w+)", self.brief)
        tests = _find(r"^Tests folder: (\S+?)/?(?:\s|$)", self.brief)
        if not (path and name and tests):
            return
        source = yield ("read_file", {"path": path})
        examples = re.findall(r"^\s*>>> (.+)\n\s*(.+)$", source, re.M)
        if not examples:
            return
        body = [f"from impl import {name}", ""]
        for i, (call, expected) in enumerate(examples, start=1):
            body += [f"def test_example_{i}():", f"    assert {call.strip()} == {expected.strip()}", ""]
        test_path = f"{tests}/test_spec_examples.py"
        yield ("write_test", {"path": test_path, "content": "\n".join(body)})
        report = yield ("run_tests", {"path": test_path})
        counts = {k: int(v) for k, v in re.findall(r"(passed|failed|errors)=(\d+)", report)}
        broken = counts.get("failed", 0) + counts.get("errors", 0) > 0 or "time limit" in report
        self._answer = "bug" if broken or not counts.get("passed") else "no_bug"

    def _code_original(self) -> Generator[Call, str, None]:
        """The same plan with read_code / write_test_file / run_tests (JSON results, the target loaded from
        TARGET_CODE_PATH); a run past the time limit comes back as an error and means "bug"."""
        name = _find(r"^Primary function under test: (\w+)", self.brief)
        if not name:
            return
        read = _json((yield ("read_code", {})))
        examples = re.findall(r"^\s*>>> (.+)\n\s*(.+)$", str(read.get("content", "")), re.M)
        if not examples:
            return
        body = ["import importlib.util", "import os", "",
                "_spec = importlib.util.spec_from_file_location('target_module', os.environ['TARGET_CODE_PATH'])",
                "target = importlib.util.module_from_spec(_spec)", "_spec.loader.exec_module(target)",
                f"{name} = target.{name}", ""]
        for i, (call, expected) in enumerate(examples, start=1):
            body += [f"def test_example_{i}():", f"    assert {call.strip()} == {expected.strip()}", ""]
        written = _json((yield ("write_test_file", {"filename": "test_spec_examples.py",
                                                     "content": "\n".join(body)})))
        report = _json((yield ("run_tests", {"test_file": str(written.get("path", "test_spec_examples.py"))})))
        if not report.get("success"):
            self._answer = "bug"
            return
        summary = [ln for ln in str(report.get("toolchain_output", "")).splitlines() if ln.startswith("=")]
        tail = summary[-1] if summary else ""
        broken = re.search(r"\d+ (failed|errors?)\b", tail) is not None
        self._answer = "bug" if broken or not re.search(r"\d+ passed", tail) else "no_bug"

    # --- record extraction ---------------------------------------------------------------------

    def _records(self) -> Generator[Call, str, None]:
        self._answer = "[]"
        path = _find(r"^Document: (\S+)", self.brief)
        wanted = _find(r"meet every condition: (.+)\.\s*$", self.brief)
        if not (path and wanted):
            return
        conditions = [m.groups() for part in wanted.split("; ") if (m := _CONDITION.match(part.strip()))]
        if re.search(r"^Tools: read_source\(\)", self.brief, re.M):
            yield from self._resolved_records(conditions)
            return
        lines: list[str] = []
        start = 1
        while True:
            page = yield ("read_document", {"path": path, "start_line": start})
            lines += [m.group(1) for m in re.finditer(r"^\d+: (.*)$", page, re.M)]
            more = re.search(r"start_line=(\d+)\]", page)
            if not more:
                break
            start = int(more.group(1))
        hits = []
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            rid, *parts = [p.strip() for p in line.split(" | ")]
            fields = dict(p.split(": ", 1) for p in parts if ": " in p)
            if all(_holds(fields.get(f), op, value) for f, op, value in conditions):
                hits.append(rid)
        self._answer = json.dumps(hits)

    def _resolved_records(self, conditions: list[tuple[str, ...]]) -> Generator[Call, str, None]:
        """The source study's form: the document has no ids, so pick the matching lines and let
        resolve_records say which records they are."""
        source = yield ("read_source", {})
        picked = []
        for line in source.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            fields = dict(p.split(": ", 1) for p in (x.strip() for x in line.split(" | ")) if ": " in p)
            if all(_holds(fields.get(f), op, value) for f, op, value in conditions):
                picked.append(line)
        if not picked:
            return
        result = yield ("resolve_records", {"records": picked})
        try:
            items = json.loads(result).get("items") or []
        except (ValueError, AttributeError):
            return
        self._answer = json.dumps([i["record_id"] for i in items if isinstance(i, dict) and i.get("record_id")])

    # --- data search -----------------------------------------------------------------------------

    def _data(self) -> Generator[Call, str, None]:
        self._answer = "[]"
        question = _find(r"Question: (.+?) Return columns:", self.brief)
        search = _find(r"Search: (.+)$", self.brief)
        keys = _find(r"^Answer key columns: (.+)$", self.brief)
        yield ("list_tables", {})
        sql = search_to_sql(search) if search else question_to_sql(question or "")
        if sql is None:
            return
        for table in dict.fromkeys(re.findall(r"(?i)\b(?:FROM|JOIN)\s+\"?(\w+)", sql)):
            yield ("describe_table", {"name": table})  # look before querying, as an analyst would
        result = yield ("run_sql", {"query": sql})
        rows = [json.loads(line) for line in result.splitlines() if line.startswith("[")]
        if search and keys:  # the source study's answer: objects with exactly the answer key columns
            columns = [c.strip() for c in keys.split(",")]
            self._answer = json.dumps([dict(zip(columns, row)) for row in rows])
            return
        self._answer = json.dumps(rows)


def _json(text: str) -> dict[str, Any]:
    """A tool result that should be a JSON object ({} when it is not)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def _holds(value: str | None, op: str, wanted: str) -> bool:
    if value is None:
        return False
    if op == "is":
        return value == wanted
    if op == "is not":
        return value != wanted
    if op in ("is over", "is under", "is at least", "is at most"):
        a, b = _NUMBER.search(value), _NUMBER.search(wanted)
        if not (a and b):
            return False
        x, y = float(a.group()), float(b.group())
        return {"is over": x > y, "is under": x < y, "is at least": x >= y, "is at most": x <= y}[op]
    if op == "is in":
        month, year = wanted.split()
        return value.startswith(f"{year}-{MONTHS.index(month) + 1:02d}")
    return value < wanted if op == "is before" else value > wanted  # ISO dates sort as text


def _q(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# Each pattern reads one question wording and writes the SQL a careful analyst would.
_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"^List the customers who live in (.+)\.$"),
     lambda m: f"SELECT id, name FROM customers WHERE city = {_q(m[1])} ORDER BY id"),
    (re.compile(r"^List the products in category (.+) priced above ([\d.]+) euros\.$"),
     lambda m: f"SELECT id, name, price FROM products WHERE category = {_q(m[1])} AND price > {m[2]} ORDER BY id"),
    (re.compile(r"^How many orders have status (.+)\?$"),
     lambda m: f"SELECT COUNT(*) FROM orders WHERE status = {_q(m[1])}"),
    (re.compile(r"^List the customers who placed at least (\d+) orders \(any status\)\.$"),
     lambda m: f"SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id HAVING COUNT(*) >= {m[1]}"),
    (re.compile(r"^For each product in category (.+), what total quantity was sold in orders with status (.+)\? "
                r"Include only products sold at least once\.$"),
     lambda m: ("SELECT i.product_id, SUM(i.quantity) FROM order_items i JOIN products p ON p.id = i.product_id "
                f"JOIN orders o ON o.id = i.order_id WHERE p.category = {_q(m[1])} AND o.status = {_q(m[2])} "
                "GROUP BY i.product_id ORDER BY i.product_id")),
    (re.compile(r"^List the orders placed by customers from (.+) in (\w+) (\d{4})\.$"),
     lambda m: ("SELECT o.id, o.customer_id FROM orders o JOIN customers c ON c.id = o.customer_id "
                f"WHERE c.country = {_q(m[1])} AND o.order_date LIKE '{m[3]}-{MONTHS.index(m[2]) + 1:02d}-%' "
                "ORDER BY o.id")),
    (re.compile(r"^What is the revenue \(sum of quantity times price, rounded to 2 decimals\) of each category "
                r"over orders with status (.+)\?$"),
     lambda m: ("SELECT p.category, ROUND(SUM(i.quantity * p.price), 2) FROM order_items i "
                "JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id "
                f"WHERE o.status = {_q(m[1])} GROUP BY p.category")),
    (re.compile(r"^Which (\d+) products sold the largest total quantity over all orders \(ties broken by the lower "
                r"product id\)\?$"),
     lambda m: ("SELECT product_id, SUM(quantity) AS q FROM order_items GROUP BY product_id "
                f"ORDER BY q DESC, product_id LIMIT {m[1]}")),
    (re.compile(r"^List the orders with status (.+) placed by customers who live in (.+)\.$"),
     lambda m: ("SELECT o.id, o.order_date FROM orders o JOIN customers c ON c.id = o.customer_id "
                f"WHERE c.city = {_q(m[2])} AND o.status = {_q(m[1])} ORDER BY o.id")),
    (re.compile(r"^List the customers who ordered the product named (.+) \(any order status\)\.$"),
     lambda m: ("SELECT DISTINCT c.id, c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
                "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
                f"WHERE p.name = {_q(m[1])} ORDER BY c.id")),
    (re.compile(r"^List the customers who joined in (\d{4}) and never placed an order\.$"),
     lambda m: ("SELECT c.id, c.name FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
                f"WHERE c.joined LIKE '{m[1]}-%' AND o.id IS NULL ORDER BY c.id")),
)


def question_to_sql(question: str) -> str | None:
    """SQL for a question in one of the known wordings; None for any other."""
    for pattern, build in _PATTERNS:
        m = pattern.match(question.strip())
        if m:
            return build(m)
    return None


# Multi-join searches (data_questions: multi-join): written from the wording, with joins and IN
# subqueries where the reference uses EXISTS, so a test that compares them checks both.
_SEARCHES: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"^Find the orders placed from (\S+) through (\S+) by customers in (.+) that are (.+) or (.+) "
                r"and contain at least one (.+) product\.$"),
     lambda m: ("SELECT DISTINCT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
                "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
                f"WHERE o.order_date >= {_q(m[1])} AND o.order_date <= {_q(m[2])} AND c.country = {_q(m[3])} "
                f"AND (o.status = {_q(m[4])} OR o.status = {_q(m[5])}) AND p.category = {_q(m[6])} ORDER BY o.id")),
    (re.compile(r"^Find the customers living in (.+) or (.+) who joined before (\S+) and have a (\S+) order "
                r"containing a product priced at least ([\d.]+) euros\.$"),
     lambda m: ("SELECT DISTINCT c.id FROM customers c JOIN orders o ON o.customer_id = c.id "
                "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
                f"WHERE c.city IN ({_q(m[1])}, {_q(m[2])}) AND c.joined < {_q(m[3])} AND o.status = {_q(m[4])} "
                f"AND p.price >= {m[5]} ORDER BY c.id")),
    (re.compile(r"^Find the order lines \(order and product\) with quantity at least (\d+) of (.+) products, in "
                r"orders placed in (\d{4}) by customers in (.+)\.$"),
     lambda m: ("SELECT i.order_id, i.product_id FROM order_items i JOIN products p ON p.id = i.product_id "
                "JOIN orders o ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id "
                f"WHERE i.quantity >= {m[1]} AND p.category = {_q(m[2])} AND o.order_date LIKE '{m[3]}-%' "
                f"AND c.country = {_q(m[4])} ORDER BY i.order_id, i.product_id")),
    (re.compile(r"^Find the (.+) products priced under ([\d.]+) euros that customers in (.+) ordered in (\d{4}) in "
                r"an order that is (.+)\.$"),
     lambda m: ("SELECT DISTINCT p.id FROM products p JOIN order_items i ON i.product_id = p.id "
                "JOIN orders o ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id "
                f"WHERE p.category = {_q(m[1])} AND p.price < {m[2]} AND c.country = {_q(m[3])} "
                f"AND o.order_date LIKE '{m[4]}-%' AND o.status = {_q(m[5])} ORDER BY p.id")),
    (re.compile(r"^Find the customers in (.+) who have at least one (\S+) order but never ordered any (.+) "
                r"product\.$"),
     lambda m: (f"SELECT c.id FROM customers c WHERE c.country = {_q(m[1])} AND c.id IN (SELECT customer_id "
                f"FROM orders WHERE status = {_q(m[2])}) AND c.id NOT IN (SELECT o.customer_id FROM orders o "
                "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
                f"WHERE p.category = {_q(m[3])}) ORDER BY c.id")),
    (re.compile(r"^Find the orders placed in (\d{4}) by customers who joined in (\d{4}) whose items add up to at "
                r"least (\d+) units\.$"),
     lambda m: ("SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
                f"WHERE o.order_date LIKE '{m[1]}-%' AND c.joined LIKE '{m[2]}-%' AND (SELECT SUM(quantity) "
                f"FROM order_items WHERE order_id = o.id) >= {m[3]} ORDER BY o.id")),
)


def search_to_sql(search: str) -> str | None:
    """SQL for a multi-join search in one of the known wordings; None for any other."""
    for pattern, build in _SEARCHES:
        m = pattern.match(search.strip())
        if m:
            return build(m)
    return None
