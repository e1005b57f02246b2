"""Playing an imported task (``imported``) with the source study's task tools.

Each workspace copies the task's resource from the imported pool into the agent's own ``root/task`` and
answers the tools the source study offers for that family (SALT-NLP/agent-collusion,
``experiments/tool_schemas.py``):

- data search: ``inspect_database`` (tables, columns, row counts, foreign keys, the values of small text
  columns, one sample row) and ``query_database`` (one SELECT/WITH on the copy, read-only as the built-in
  family's ``run_sql``: ``mode=ro``, ``PRAGMA query_only``, a read-only authorizer, a time limit;
  ``max_rows`` default 100, at most 500);
- record extraction: ``read_source`` (the document with its ``[ID]`` markers stripped) and
  ``resolve_records`` (record lines copied from the source, mapped back to their ids; an unmatched line
  gives ``null``);
- code analysis: ``read_code``, ``write_test_file`` and ``run_tests`` (``code_original``: ``pytest -vv``,
  30 s, the target reached through ``TARGET_CODE_PATH``, run in this workbench's bubblewrap sandbox).

Results are JSON objects as the source returns them (``success`` plus the payload); a bad call raises
ToolError, which the episode hands back to the agent as the tool result.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from workbench.errors import InputError

from . import code_original, data, imported
from .base import Task, ToolError, function_tool, require_args

MAX_DOMAIN_VALUES = 12
DEFAULT_ROWS, MAX_ROWS = 100, 500


def _no_args(name: str, description: str) -> dict[str, Any]:
    return function_tool(name, description, {}, [])


def tools(task: Task) -> list[dict[str, Any]]:
    """The source study's task-phase tools for an imported task (without save_final_answer/get_log)."""
    if task.family == "data-search":
        return [
            _no_args("inspect_database", "Read your task's database structure."),
            function_tool(
                "query_database",
                "Run a read-only SQL query against your task's SQLite database. On success the result carries "
                "rows, columns and truncated. On failure it returns an error string.",
                {"sql": {"type": "string", "description": "A single read-only SELECT or WITH query. Write a "
                         "filter's value as inspect_database reports it, not as the search prompt words it."},
                 "max_rows": {"type": "integer", "description": "Maximum rows to return in the tool result, "
                              f"default {DEFAULT_ROWS}, max {MAX_ROWS}."}},
                ["sql"]),
        ]
    if task.family == "record-extraction":
        return [
            _no_args("read_source", "Read your task's source document."),
            function_tool(
                "resolve_records",
                "Turn the records you have selected into record IDs. Decide your full selection first, then pass "
                "it in a single call. On success the result carries items, one per record in the order you "
                "passed them, each with record_id. On failure it returns an error string.",
                {"records": {"type": "array", "items": {"type": "string"},
                             "description": "All your selected records, copied exactly from the source document. "
                                            "Each line is one record."}},
                ["records"]),
        ]
    if task.family == "code-analysis":
        return code_original.tools()
    raise InputError(f"{task.task_id}: imported {task.family} tasks cannot be played (no tools for that family)")


def _value(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return f"<binary {len(value)} bytes>"
    return value


def _rows(columns: list[str], rows: list[Any]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        record: dict[str, Any] = {}
        for column, value in zip(columns, row):
            key, n = column, 2
            while key in record:
                key, n = f"{column}__{n}", n + 1
            record[key] = _value(value)
        out.append(record)
    return out


class ImportedDataWorkspace:
    def __init__(self, task: Task, root: Path) -> None:
        self.task = task
        item = imported.entry(task)
        folder = root / "task"
        folder.mkdir(parents=True, exist_ok=True)
        self.db = folder / item.resource.name
        shutil.copyfile(item.resource, self.db)
        self.db.chmod(0o444)
        self.con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, check_same_thread=False)
        self.con.execute("PRAGMA query_only = ON")
        self.structure = self._inspect()
        self.con.set_authorizer(data._authorizer)  # from here on the agent's queries may only read

    def _inspect(self) -> dict[str, Any]:
        con = self.con
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        schema, counts, fks, samples, domains = {}, {}, {}, {}, {}
        for t in tables:
            cols = con.execute(f'PRAGMA table_info("{t}")').fetchall()
            schema[t] = [{"name": c[1], "type": c[2], "notnull": bool(c[3]), "primary_key": bool(c[5])} for c in cols]
            counts[t] = con.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            fks[t] = [{"from": r[3], "to_table": r[2], "to": r[4]}
                      for r in con.execute(f'PRAGMA foreign_key_list("{t}")')]
            cur = con.execute(f'SELECT * FROM "{t}" LIMIT 1')
            samples[t] = _rows([d[0] for d in cur.description or ()], cur.fetchall())
            per: dict[str, list[Any]] = {}
            for c in cols:
                if "TEXT" not in str(c[2]).upper():
                    continue
                vals = con.execute(f'SELECT DISTINCT "{c[1]}" FROM "{t}" ORDER BY 1 LIMIT ?',
                                   (MAX_DOMAIN_VALUES + 1,)).fetchall()
                if 1 < len(vals) <= MAX_DOMAIN_VALUES:
                    per[c[1]] = [_value(v[0]) for v in vals]
            if per:
                domains[t] = per
        return {"success": True, "tables": tables, "schema": schema, "foreign_keys": fks, "table_counts": counts,
                "value_domains": domains, "sample_rows": samples}

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "inspect_database":
            require_args(tool, arguments, ())
            return json.dumps(self.structure, ensure_ascii=False)
        if tool == "query_database":
            args = require_args(tool, arguments, ("sql",), ("max_rows",))
            try:
                sql = data.check_select(args["sql"])
            except ToolError as exc:
                raise ToolError(str(exc).replace("run_sql", "query_database")) from None
            limit = args.get("max_rows", DEFAULT_ROWS)
            if isinstance(limit, bool) or not isinstance(limit, int):
                raise ToolError(f"query_database: max_rows must be an integer, got {limit!r}")
            return self._query(sql, max(1, min(limit, MAX_ROWS)))
        raise ToolError(f"unknown tool {tool!r} for a data-search task; use inspect_database or query_database")

    def _query(self, sql: str, limit: int) -> str:
        columns, fetched = data.read_query(self.con, sql, limit + 1, "query_database")
        rows = _rows(columns, fetched[:limit])
        return json.dumps({"success": True, "columns": columns, "truncated": len(fetched) > limit, "rows": rows},
                          ensure_ascii=False)

    def close(self) -> None:
        self.con.close()


class SourceRecordWorkspace:
    """``read_source`` / ``resolve_records`` over a document whose record lines carry ``[ID]`` markers:
    the agent reads (and finds in its folder) the text without them. Shared by imported extraction tasks
    and our own under ``extraction_ids: resolved`` (``records.workspace``)."""

    def __init__(self, text: str, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.text = text
        (folder / name).write_text(imported.strip_markers(self.text), encoding="utf-8")
        self.index: dict[str, str] = {}
        for line in self.text.split("\n"):
            m = imported.RECORD_MARKER.match(line)
            if m and line[m.end():].strip():
                self.index[line[m.end():].strip()] = m.group(1)

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "read_source":
            require_args(tool, arguments, ())
            return imported.strip_markers(self.text)
        if tool == "resolve_records":
            records = require_args(tool, arguments, ("records",))["records"]
            if not isinstance(records, list):
                raise ToolError("resolve_records: records must be an array of strings")
            if not records:
                raise ToolError("resolve_records: records must contain at least one record")
            bad = [i for i, r in enumerate(records) if not isinstance(r, str) or not r.strip()]
            if bad:
                raise ToolError("resolve_records: every record must be a non-empty string; invalid indexes: "
                                + ", ".join(map(str, bad)))
            items = [{"record_id": self.index.get(r.strip())} for r in records]
            return json.dumps({"success": True, "items": items}, ensure_ascii=False)
        raise ToolError(f"unknown tool {tool!r} for a record-extraction task; use read_source or resolve_records")

    def close(self) -> None:
        """Nothing to release."""


class ImportedCodeWorkspace:
    """The target module copied to ``root/task/<its file name>`` (read-only), a private test folder
    ``root/task/tests`` and the sandbox's scratch folder; the tools are the source study's."""

    def __init__(self, task: Task, root: Path) -> None:
        self.task = task
        item = imported.entry(task)
        folder = root / "task"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / item.resource.name
        shutil.copyfile(item.resource, target)
        target.chmod(0o444)
        self.tools = code_original.OriginalCodeTools(
            vroot=folder, target=target, function_name=str(item.spec["function_name"]), tests=folder / "tests",
            scratch=root / "scratch")

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        return self.tools.call(tool, arguments)

    def close(self) -> None:
        """Nothing to release."""


class ImportedRecordWorkspace(SourceRecordWorkspace):
    def __init__(self, task: Task, root: Path) -> None:
        self.task = task
        item = imported.entry(task)
        super().__init__(item.resource.read_text(encoding="utf-8"), root / "task", item.resource.name)


WORKSPACES: dict[str, Any] = {"data-search": ImportedDataWorkspace, "record-extraction": ImportedRecordWorkspace,
                              "code-analysis": ImportedCodeWorkspace}
