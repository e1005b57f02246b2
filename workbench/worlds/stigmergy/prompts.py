"""What each agent is told, rendered from the study's template folder.

Two action interfaces (the cell's ``actions``) share every sentence but the one that
says how to act: ``json-text`` renders ``system`` with the ``ops/`` lines (a reply is
one JSON object), ``tools`` renders ``system_tools`` with the ``ops_tools/`` lines and
sends the operations as function tools described by ``tools/`` (a reply is one tool
call). A cell never renders the other interface's templates."""
from __future__ import annotations

import copy
import json
from typing import Any

from workbench.templates import TemplateSet
from workbench.worlds.stigmergy.tasks import AgentTask

STORE_OPS: tuple[str, ...] = ("list", "read", "write", "submit")
NO_STORE_OPS: tuple[str, ...] = ("submit",)


def allowed_ops(condition: str) -> tuple[str, ...]:
    return NO_STORE_OPS if condition == "no-store" else STORE_OPS


ACTIONS: tuple[str, ...] = ("json-text", "tools")
# the templates only one interface renders (relative paths, as fitting and design list them)
INTERFACE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "json-text": ("system.txt", *(f"ops/{op}.txt" for op in STORE_OPS), "results/invalid.txt"),
    "tools": ("system_tools.txt", *(f"ops_tools/{op}.txt" for op in STORE_OPS),
              *(f"tools/{op}.txt" for op in STORE_OPS), "results/invalid_tools.txt", "results/not_run_tools.txt"),
}


def interface_unrendered(actions: str) -> set[str]:
    """The templates of the action interface a cell does not use: never rendered for it."""
    return {n for level, names in INTERFACE_TEMPLATES.items() if level != actions for n in names}


def invalid_template(actions: str) -> str:
    return "results/invalid_tools" if actions == "tools" else "results/invalid"


def system_prompt(t: TemplateSet, condition: str, clauses: str, max_steps: int, reader_signal: str = "none",
                  actions: str = "json-text") -> str:
    ops = allowed_ops(condition)
    system, op_lines = ("system_tools", "ops_tools") if actions == "tools" else ("system", "ops")
    store = "" if condition == "no-store" else t.render("store_paragraph")
    if condition == "namespaced":
        store += t.render("namespaced_paragraph")
    if store and reader_signal == "told":
        store += t.render("reader_told")
    return t.render(
        system,
        store_paragraph=store,
        persistence=t.render(f"persistence/{clauses}"),
        operations="\n".join(t.render(f"{op_lines}/{op}") for op in ops),
        max_steps=max_steps,
    )


def opening(t: TemplateSet, cell: Any, task: AgentTask) -> list[dict[str, str]]:
    """An agent's first two messages: its system prompt (with the reader signal its role
    gets) and its task. The world sends exactly these; ``workbench prompts`` diffs them."""
    system = system_prompt(t, cell.condition, cell.clauses, cell.max_steps, cell.signal_for(task.role),
                           getattr(cell, "actions", "json-text"))
    return [{"role": "system", "content": system}, {"role": "user", "content": task_text(t, task, cell.vocabulary)}]


def task_text(t: TemplateSet, task: AgentTask, vocabulary: str = "named") -> str:
    """A task's text. For the pair's halves, ``vocabulary`` picks the template: both
    intermediate keys named (``tasks/KIND``), only the agent's own
    (``tasks/KIND-own-only``), or neither (``tasks/KIND-withheld``)."""
    if task.kind in ("digits", "remainders"):
        key_a, key_b = sorted([task.own_key or "", task.partner_key or ""])
        own_name = "N" + (task.own_key or "")[1:]  # C_A -> N_A; pair 2's C2_A -> N2_A
        name = f"tasks/{task.kind}" if vocabulary == "named" else f"tasks/{task.kind}-{vocabulary}"
        return t.render(
            name, key_a=key_a, key_b=key_b, own_key=task.own_key, partner_key=task.partner_key,
            own_name=own_name, own_number=task.inputs["number"], modulus=task.inputs.get("modulus", ""),
        )
    return t.render(f"tasks/{task.kind}", **task.inputs)


def show_value(value: Any) -> str:
    """How a stored value reads back to an agent: strings as-is, others as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# each operation's fields and their types: the JSON-text schema (with "op") and the tools' parameters
FIELDS: dict[str, dict[str, Any]] = {
    "list": {},
    "read": {"key": {"type": "string", "minLength": 1}},
    "write": {"key": {"type": "string", "minLength": 1}, "value": {"type": ["string", "integer", "number"]}},
    "submit": {"answer": {"type": ["string", "integer"]}},
}


def response_format(ops: tuple[str, ...]) -> dict[str, Any]:
    """A JSON schema that admits exactly the operations offered (constrained replies)."""
    shapes: dict[str, dict[str, Any]] = {op: {"op": {"const": op}, **copy.deepcopy(FIELDS[op])} for op in FIELDS}
    variants = [{"type": "object", "properties": shapes[op], "required": list(shapes[op]),
                 "additionalProperties": False} for op in ops]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return {"type": "json_schema", "json_schema": {"name": "operation", "strict": True, "schema": schema}}


def tool_definitions(t: TemplateSet, ops: tuple[str, ...]) -> list[dict[str, Any]]:
    """The operations offered, as OpenAI function tools: one per operation, named as the
    operation, its fields (the JSON-text interface's, with the same types) as parameters,
    its description from ``tools/OP``."""
    return [{"type": "function", "function": {
        "name": op, "description": t.render(f"tools/{op}"),
        "parameters": {"type": "object", "properties": copy.deepcopy(FIELDS[op]),
                       "required": list(FIELDS[op]), "additionalProperties": False}}} for op in ops]


def forced_tool_choice(ops: tuple[str, ...]) -> str | dict[str, Any]:
    """The tool_choice a constrained tools cell sends: the tool by name where it is the only
    one offered (no-store: submit), else "required" (some tool must be called)."""
    if len(ops) == 1:
        return {"type": "function", "function": {"name": ops[0]}}
    return "required"
