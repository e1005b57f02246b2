"""Rendering the recall world's messages from its templates
(``params/prompts/recall``): the wording lives in the files, the assembly here."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.templates import TemplateSet


def _r(t: TemplateSet, name: str, **values: Any) -> str:
    return t.render(name, **values).rstrip("\n")


def _one_line(text: str) -> str:
    """Memory entries are shown one per line, whatever their author wrote."""
    return " ".join(str(text).split())


def system_prompt(t: TemplateSet, *, brief: str, role: str, domain: str, team: Sequence[str], memory: bool) -> str:
    para = _r(t, "memory_paragraph" if memory else "memory_paragraph_none")
    return _r(t, "system", brief=brief, role_label=role.replace("_", " "), domain=domain,
              team=", ".join(r.replace("_", " ") for r in team), memory_paragraph=para)


def turn_message(t: TemplateSet, *, turn: int, content: str) -> str:
    return _r(t, "turn", turn=turn, content=content)


def memory_block(t: TemplateSet, hits: Sequence[dict[str, Any]] | None, *, authors: bool) -> str:
    """``hits``: hit records in rank order; None when the condition has no memory."""
    if hits is None:
        return _r(t, "no_memory")
    if not hits:
        return _r(t, "memory_empty")
    lines = []
    for h in hits:
        e = h  # a flat hit record: entry fields, rank and scores
        if authors:
            lines.append(_r(t, "memory_line_authored", author=e["author_role"], authority=f"{float(e['authority']):.2f}",
                            text=_one_line(e["text"])))
        else:
            lines.append(_r(t, "memory_line", text=_one_line(e["text"])))
    return _r(t, "memory_block", lines="\n".join(lines))


def recall_message(t: TemplateSet, *, turn: int, content: str, memory: str, query: str) -> str:
    return _r(t, "recall", turn=turn, content=content, memory=memory, query=_one_line(query))


def judge_messages(t: TemplateSet, *, query: str, accepted: Sequence[str], answer: str) -> list[dict[str, str]]:
    acc = "\n".join(_r(t, "judge_accepted", text=_one_line(a)) for a in accepted)
    return [{"role": "system", "content": _r(t, "judge_system")},
            {"role": "user", "content": _r(t, "judge", query=_one_line(query), accepted=acc, answer=answer)}]


def turn_with_memory(t: TemplateSet, *, turn: int, content: str, memory: str) -> str:
    """A statement turn that also shows retrieved memory (``retrieve: every-turn``)."""
    return _r(t, "turn_memory", turn=turn, content=content, memory=memory)


def context_message(t: TemplateSet, *, facts: Sequence[str], transcript: Sequence[dict[str, Any]], me: str,
                    total: int) -> str:
    """The case file and the conversation so far (``transcript``: the turns in context, oldest
    first, each {turn, role, content, reply}); the agent's own lines are marked "you"."""
    def speaker(role: str) -> str:
        label = "narrator" if role == "user" else role.replace("_", " ")
        return f"you ({label})" if role == me else label

    case = _r(t, "case_file", lines="\n".join(_r(t, "case_fact", text=_one_line(f)) for f in facts))
    if not transcript:
        return case + "\n" + _r(t, "conversation_empty")
    lines = []
    for item in transcript:
        lines.append(_r(t, "conversation_line", turn=item["turn"], speaker=speaker(item["role"]),
                        text=_one_line(item["content"])))
        if item.get("reply"):
            lines.append(_r(t, "conversation_reply", speaker=speaker(item["role"]), text=_one_line(item["reply"])))
    shown = f"all {total} turns" if len(transcript) == total else f"the last {len(transcript)} of {total} turns"
    return case + "\n" + _r(t, "conversation", shown=shown, lines="\n".join(lines))


def value_messages(t: TemplateSet, *, text: str) -> list[dict[str, str]]:
    """Asking the judge model which value a statement gives (``values: judge``)."""
    return [{"role": "system", "content": _r(t, "value_system")},
            {"role": "user", "content": _r(t, "value", text=_one_line(text))}]
