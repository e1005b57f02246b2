"""What a simulated agent can read, checked before a rehearsal runs.

A simulated agent reads its prompt by cue phrases (:class:`~workbench.worlds.stigmergy.simulated.Cues`),
and a twin's dispositions were fitted on one set of template texts. Given other
words it does not misbehave visibly: it acts as if a clause were deleted, or reads
a negated clause as present, or cannot parse its task, and a rehearsal would report
that as the wording's effect. So before any world runs, three checks:

1. **Fitted wording** (twins): every template a cell renders must have the text the
   twin was calibrated with (content hashes in ``profiles/fitted_on.yaml``), unless
   the study gave the twin its own cue for that text (a study profile whose cues
   differ from its base's: the templates those cues read are then *mapped*).
2. **Clauses** (every simulated profile): the cell's declared ``clauses`` level says
   which clauses are present; each must be found by its cue and not negated ("never
   check your workspace again"), and an absent one must not be found.
3. **Tasks** (every simulated profile): sample tasks of every kind the cell draws,
   rendered from its templates, must be read back by the profile's cues as exactly
   the task they are (keys, the value it can compute, how the halves combine).
4. **Tools** (a cell with ``actions: tools``): a simulated agent then learns which
   operations exist from the request's tool list, by its ``store_tool`` cue; that cue
   must find a store tool exactly where the condition offers one. A twin was fitted on
   the JSON-text interface only: its dispositions are figures real models reached
   writing JSON, and how tool calling changes them was never measured, so the tools
   interface (its templates and the tool definitions) counts as never fitted. No study
   cue can map it (a cue reads wording; the gap is behaviour): a tools cell rehearses on
   a twin only under ``rehearsal: uncalibrated``. Hand-set profiles, fitted on nothing,
   act through tools once their cue finds the tools.

A study that wants to rehearse anyway declares ``rehearsal: uncalibrated``: the
problems are then recorded and every report states them. A twin that still cannot
read its task refuses to answer (an invalid world, cause "twin cannot read its
task"), never a guessed answer.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from workbench.templates import TemplateError, TemplateSet
from workbench.worlds.stigmergy.fitted import CUE_TEMPLATES, FITTED_FILE, MAPPED

NEGATION = re.compile(r"(?i)\b(never|not|no|don't|do not|doesn't|does not|without|avoid|stop|nor|neither|"
                      r"needn't|need not|no need)\b|n't\b")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rendered_templates(kind: Any, cell: Any, root: Path) -> list[str]:
    """The cell's templates that its worlds may render (the folder less what it provably never does)."""
    from workbench.worlds.stigmergy.prompts import interface_unrendered

    # the other action interface's templates are never rendered (the kind may list them itself)
    never = kind.unrendered_templates(cell) | interface_unrendered(getattr(cell, "actions", "json-text"))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.txt") if str(p.relative_to(root)) not in never)


def _sentence_of(text: str, start: int, end: int) -> str:
    left = max(text.rfind(c, 0, start) for c in ".!?\n")
    right = min([i for i in (text.find(c, end) for c in ".!?\n") if i >= 0] or [len(text)])
    return text[left + 1:right]


def negated(cue: str, text: str) -> bool:
    """Whether every match of ``cue`` in ``text`` sits in a sentence that negates it before the match."""
    matches = list(re.finditer(cue, text))
    if not matches:
        return False
    for m in matches:  # the negation must sit in the match's own clause (after the last , ; : or sentence end)
        left = max(text.rfind(c, 0, m.start()) for c in ".!?\n,;:")
        if not NEGATION.search(text[left + 1:m.start()]) and not NEGATION.search(m.group(0)):
            return False
    return True


def clause_problems(profile: Any, system: str, clauses: str, where: str) -> list[str]:
    """The cell's declared clauses against what the profile's cues find in the rendered system prompt."""
    from workbench.worlds.stigmergy.simulated import CLAUSE_CUES, CLAUSE_NAMES

    present = set(CLAUSE_CUES.get(clauses, ()))
    out = []
    for clause in ("persist", "recheck"):
        cue = getattr(profile.cues, clause)
        m = re.search(cue, system)
        name = CLAUSE_NAMES[clause]
        if clause in present and m is None:
            out.append(f"simulated profile {profile.name!r} reads the {name} by the cue {cue!r}, which the system "
                       f"prompt rendered from {where} (clauses: {clauses}) does not contain: it would act as if the "
                       f"clause were absent")
        elif clause in present and m is not None and negated(cue, system):
            out.append(f"simulated profile {profile.name!r} finds its {name} cue {cue!r} only negated in the system "
                       f"prompt rendered from {where} (clauses: {clauses}: declared present): "
                       f"{_sentence_of(system, m.start(), m.end()).strip()!r}; it would follow the clause anyway")
        elif clause not in present and m is not None:
            how = " (negated)" if negated(cue, system) else ""
            out.append(f"simulated profile {profile.name!r} finds its {name} cue {cue!r}{how} in the system prompt "
                       f"rendered from {where}, though the cell's clauses: {clauses} declares it absent: "
                       f"{_sentence_of(system, m.start(), m.end()).strip()!r}")
    return out


def sample_tasks(cell: Any) -> list[Any]:
    """One task of every kind the cell's worlds draw (each pair form, each self-contained kind), from fixed seeds."""
    from workbench.worlds.stigmergy.tasks import PAIR_FORMS, draw_tasks

    forms = PAIR_FORMS if cell.task_form == "any" else (cell.task_form,)
    seen: dict[tuple[str, bool], Any] = {}
    for form in forms:
        for seed in range(40):
            for task in draw_tasks(seed, form, cell.digits, cell.modulus, pairs=1, solos=max(cell.solos, 2)
                                   ).tasks.values():
                seen.setdefault((task.kind, task.own_key is not None), task)
    return list(seen.values())


def task_problems(profile: Any, cell: Any, t: TemplateSet, where: str) -> list[str]:
    """Whether the profile reads every sample task as the task it is."""
    from workbench.worlds.stigmergy import prompts as P
    from workbench.worlds.stigmergy.simulated import SimulatedClient

    reader = SimulatedClient(profile, 0)
    out = []
    for task in sample_tasks(cell):
        try:
            text = P.task_text(t, task, cell.vocabulary)
        except TemplateError:
            return []  # an unrenderable template fails its worlds with its own error
        got = reader._read_task(text)
        want: tuple[Any, ...]
        have: tuple[Any, ...]
        if task.own_key is not None:  # a pair's half
            want = ("pair", task.own_key if cell.vocabulary != "withheld" else None,
                    task.partner_key if cell.vocabulary == "named" else None, task.own_value,
                    "product" if task.kind == "digits" else "sum")
            have = (got.kind, got.own_key, got.partner_key, got.own_true, got.combine)
        else:
            want, have = ("solo", task.expected), (got.kind, got.own_true)
        if have != want:
            template = (f"tasks/{task.kind}.txt" if task.own_key is None or cell.vocabulary == "named"
                        else f"tasks/{task.kind}-{cell.vocabulary}.txt")
            out.append(f"simulated profile {profile.name!r} cannot read the task rendered from {where}/{template} "
                       f"(it reads {have}, the task is {want}): {text!r}")
    return out


def wording_problems(profile: Any, names: list[str], root: Path, actions: str = "json-text") -> list[str]:
    """Templates the cell renders with text the twin was not calibrated on (and no study cue maps)."""
    from workbench.worlds.stigmergy.prompts import INTERFACE_TEMPLATES

    if not profile.fitted_on:
        return []  # a hand-set profile, fitted on nothing: only what it reads is checked
    out = []
    if actions != "json-text":  # one problem for the interface, not one per template of it
        interface = set(INTERFACE_TEMPLATES.get(actions, ()))
        names = [n for n in names if n not in interface]
        out.append(f"twin {profile.name!r} was calibrated on the json-text action interface only: the {actions} "
                   f"interface (the tool definitions and the templates {', '.join(sorted(interface))} in {root}) "
                   f"was never fitted, and no cue can map it (what changes is how models act, not wording a cue "
                   f"reads)")
    for name in names:
        fitted = profile.fitted_on.get(name)
        if fitted is not None and fitted.startswith(MAPPED):
            continue
        if fitted is None:
            out.append(f"twin {profile.name!r} was never calibrated on the template {name} that the cell renders "
                       f"from {root}")
        elif fitted != file_hash(root / name):
            cues = sorted(c for c, pats in CUE_TEMPLATES.items() if any(Path(name).match(p) for p in pats))
            how = (f"map the new wording with a study profile (profiles: {{{profile.name}-mine: {{base: "
                   f"{profile.name}, cues: {{{cues[0]}: '<a regex for your text>'}}}}}})" if cues
                   else "no cue reads this text, so no study profile can map it")
            out.append(f"twin {profile.name!r} was calibrated on another text of {name} than the one in {root} "
                       f"(read by cues: {', '.join(cues) or 'none'}); {how}")
    return out


def tool_problems(profile: Any, cell: Any) -> list[str]:
    """Whether the profile's store_tool cue finds a store tool exactly where the cell offers one."""
    from workbench.worlds.stigmergy import prompts as P

    if getattr(cell, "actions", "json-text") != "tools":
        return []
    offered = P.allowed_ops(cell.condition)
    cue = profile.cues.store_tool
    found = [name for name in offered if re.fullmatch(cue, name)]
    store = offered != P.NO_STORE_OPS
    if store and not found:
        return [f"simulated profile {profile.name!r} reads the store tools by the cue store_tool {cue!r}, which "
                f"matches none of the tools offered ({', '.join(offered)}): it would act as if there were no store"]
    if not store and found:
        return [f"simulated profile {profile.name!r} finds a store tool by the cue store_tool {cue!r} among the "
                f"tools offered ({', '.join(offered)}), though the condition {cell.condition} offers none"]
    return []


def rehearsal_problems(kind: Any, cell: Any, root: Path, profiles: dict[str, Any] | None = None) -> list[str]:
    """Every reason the cell's simulated agents could not act on its prompts as they were fitted to."""
    from workbench.templates import template_set
    from workbench.worlds.stigmergy import prompts as P
    from workbench.worlds.stigmergy.simulated import get_profile

    t = template_set(root)
    try:
        system = P.system_prompt(t, cell.condition, cell.clauses, cell.max_steps, cell.reader_signal,
                                 getattr(cell, "actions", "json-text"))
    except TemplateError:
        return []
    names = rendered_templates(kind, cell, root)
    out: list[str] = []
    for route in sorted({cell.route_for(r) for r in cell.roles()}):
        if not route.startswith("sim/"):
            continue
        profile = get_profile(route.split("/", 1)[1], profiles)
        out += wording_problems(profile, names, root, getattr(cell, "actions", "json-text"))
        out += clause_problems(profile, system, cell.clauses, str(root))
        out += tool_problems(profile, cell)
        out += task_problems(profile, cell, t, str(root))
    return out


def write_fitted_on(kind: Any, root: Path, cells: Iterable[Any], path: Path = FITTED_FILE) -> dict[str, str]:
    """Record the template texts the twins are calibrated on: every template the calibration designs
    render. Run after refitting twins on changed templates (and only then)."""
    names = sorted({n for cell in cells for n in rendered_templates(kind, cell, root)})
    hashes = {n: file_hash(root / n) for n in names}
    path.write_text("# The template texts (SHA-256 of each file of params/prompts/stigmergy) that the twins in\n"
                    "# twins.yaml were calibrated with: every template the designs of calibration.yaml render.\n"
                    "# A study rendering any of them with other text is refused for a twin (fitting.py).\n"
                    "# Regenerate only after refitting: python -m workbench.worlds.stigmergy.fitting\n"
                    + yaml.safe_dump({"templates": hashes}, sort_keys=True), encoding="utf-8")
    return hashes


def calibration_cells() -> list[Any]:
    """The cells of every figure in calibration.yaml (their designs with each figure's overrides)."""
    from workbench.worlds.stigmergy.calibration import load_calibration
    from workbench.worlds.stigmergy.spec import CLAUSES, StigmergyCell

    cal = load_calibration()
    cells = []
    for fig in cal["figures"].values():
        design = cal["designs"][fig["design"]]
        cells.append(StigmergyCell.model_validate({**design["cell"], **(fig.get("cell") or {})}))
    # the clause parameters were fitted clause by clause (present, absent) on these sentences; every
    # clause level renders the same sentences, so each level's text counts as fitted
    cells += [StigmergyCell.model_validate({**cal["designs"]["main"]["cell"], "clauses": c}) for c in CLAUSES]
    return cells


if __name__ == "__main__":  # pragma: no cover - a maintainer's step after refitting
    from workbench.worlds.stigmergy import KIND
    from workbench.worlds.stigmergy.calibration import PROMPTS

    print(write_fitted_on(KIND, Path(PROMPTS), calibration_cells()))
