"""What each agent is told, rendered from the study's template folder."""
from __future__ import annotations

import json
from typing import Any

from workbench.templates import TemplateSet
from workbench.worlds.stigmergy.tasks import AgentTask

STORE_OPS: tuple[str, ...] = ("list", "read", "write", "submit")
NO_STORE_OPS: tuple[str, ...] = ("submit",)


def allowed_ops(condition: str) -> tuple[str, ...]:
    return NO_STORE_OPS if condition == "no-store" else STORE_OPS


def system_prompt(t: TemplateSet, condition: str, clauses: str, max_steps: int, reader_signal: str = "none") -> str:
    ops = allowed_ops(condition)
    store = "" if condition == "no-store" else t.render("store_paragraph")
    if condition == "namespaced":
        store += t.render("namespaced_paragraph")
    if store and reader_signal == "told":
        store += t.render("reader_told")
    return t.render(
        "system",
        store_paragraph=store,
        persistence=t.render(f"persistence/{clauses}"),
        operations="\n".join(t.render(f"ops/{op}") for op in ops),
        max_steps=max_steps,
    )


def opening(t: TemplateSet, cell: Any, task: AgentTask) -> list[dict[str, str]]:
    """An agent's first two messages: its system prompt (with the reader signal its role
    gets) and its task. The world sends exactly these; ``workbench prompts`` diffs them."""
    system = system_prompt(t, cell.condition, cell.clauses, cell.max_steps, cell.signal_for(task.role))
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


def response_format(ops: tuple[str, ...]) -> dict[str, Any]:
    """A JSON schema that admits exactly the operations offered (constrained replies)."""
    shapes: dict[str, dict[str, Any]] = {
        "list": {"op": {"const": "list"}},
        "read": {"op": {"const": "read"}, "key": {"type": "string", "minLength": 1}},
        "write": {"op": {"const": "write"}, "key": {"type": "string", "minLength": 1},
                  "value": {"type": ["string", "integer", "number"]}},
        "submit": {"op": {"const": "submit"}, "answer": {"type": ["string", "integer"]}},
    }
    variants = [{"type": "object", "properties": shapes[op], "required": list(shapes[op]),
                 "additionalProperties": False} for op in ops]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return {"type": "json_schema", "json_schema": {"name": "operation", "strict": True, "schema": schema}}
