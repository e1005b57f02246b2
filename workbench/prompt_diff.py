"""A design changes one thing: the rendered prompts of two cells that differ in one
factor alone, diffed role by role.

For every pair of cells a contrast compares, each agent's opening messages (system
prompt, task) of the same world are rendered from the cells' templates and compared
line by line. What differs should be the factor's own text and nothing else: a
vocabulary level that also adds a storage instruction, or a reader signal that also
tells the readers, shows up here before a single world is paid for.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from workbench.errors import InputError
from workbench.params import Study
from workbench.seeding import derive_seed


@dataclass(frozen=True)
class PromptDiff:
    """One role's opening messages in cell A against cell B (lines only in A, only in B)."""

    factor: str
    a: str  # cell labels
    b: str
    role: str
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    unified: str

    @property
    def same(self) -> bool:
        return not self.only_a and not self.only_b


def _lines(messages: list[dict[str, str]]) -> list[str]:
    return [f"[{m['role']}] {line}" for m in messages for line in str(m.get("content") or "").splitlines()]


def prompt_diffs(study: Study, factor: str | None = None, world_index: int = 0) -> list[PromptDiff]:
    """Per matched pair of cells (the study's declared contrasts, or those on ``factor``) and
    per role, the difference of the rendered opening messages of world ``world_index``."""
    from workbench.metrics.contrasts import ContrastSpec, default_contrasts, matched_pairs
    from workbench.metrics.design import design_of

    kind = study.kind
    design = design_of([{"cell_id": c.cell_id, "cell": c.spec.model_dump(mode="json"), "cell_label": c.label}
                        for c in study.cells])
    specs = [ContrastSpec.from_mapping(c) for c in study.contrasts] or default_contrasts(design)
    if factor is not None:
        specs = [s for s in specs if s.factor == factor] or [ContrastSpec(factor, factor, declared=False)]
    by_id = {c.cell_id: c for c in study.cells}
    seed = derive_seed(study.seed, "world", world_index)  # the same world in every cell (workbench.study.world_seed)
    out: list[PromptDiff] = []
    for spec in specs:
        for a, b in matched_pairs(design, spec):
            ma = kind.opening_messages(by_id[a].spec, study.base_dir, seed)
            mb = kind.opening_messages(by_id[b].spec, study.base_dir, seed)
            if ma is None or mb is None:
                raise InputError(f"the {kind.name} world kind cannot render its prompts without running a world")
            for role in sorted(set(ma) | set(mb)):
                la, lb = _lines(ma.get(role, [])), _lines(mb.get(role, []))
                unified = "\n".join(difflib.unified_diff(la, lb, f"{by_id[a].label} · {role}",
                                                         f"{by_id[b].label} · {role}", lineterm="", n=1))
                sa, sb = set(la), set(lb)
                out.append(PromptDiff(spec.factor, by_id[a].label, by_id[b].label, role,
                                      tuple(x for x in la if x not in sb), tuple(x for x in lb if x not in sa),
                                      unified))
    return out


def describe(diffs: list[PromptDiff]) -> str:
    """The diffs as text for a terminal: per pair of cells, the roles whose prompts differ."""
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for d in diffs:
        key = (d.factor, d.a, d.b)
        if key not in seen:
            seen.add(key)
            same = [x.role for x in diffs if (x.factor, x.a, x.b) == key and x.same]
            lines.append(f"== {d.factor}: {d.a}  vs  {d.b}" + (f"  (identical for {', '.join(same)})" if same else ""))
        if not d.same:
            lines.append(d.unified)
    return "\n".join(lines)


