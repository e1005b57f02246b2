"""What the shipped twins were fitted on, and which templates each of a simulated agent's
cues reads: data for the checks in :mod:`workbench.worlds.stigmergy.fitting`, kept apart
so that profiles can be loaded (and study profiles mapped) without the checks."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

FITTED_FILE = Path(__file__).with_name("profiles") / "fitted_on.yaml"
MAPPED = "cue:"  # a fitted_on value naming the study cue that reads the template instead of a hash

# which templates each cue reads: a study cue set for new wording maps these templates
CUE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "store_ops": ("ops/list.txt",),
    "store_tool": (),  # reads the names of the tools a request offers, which no template words
    "persist": ("persistence/*.txt",), "recheck": ("persistence/*.txt",),
    "max_steps": ("system.txt",),
    "error": ("results/invalid.txt",),
    "list_keys": ("results/list.txt", "results/list_item_*.txt"), "list_empty": ("results/list_empty.txt",),
    "missing": ("results/read_missing.txt",),
    "readers_told": ("reader_told.txt",), "receipt": ("results/list_item_receipt.txt",),
    **{cue: ("tasks/digits.txt", "tasks/remainders.txt")
       for cue in ("own_digits", "own_mod", "partner", "joint_product", "joint_sum")},
    **{cue: ("tasks/*-own-only.txt", "tasks/*-withheld.txt")
       for cue in ("partner_unnamed", "own_digits_unnamed", "own_mod_unnamed")},
    "solo_digits": ("tasks/digit_sum.txt",), "solo_mod": ("tasks/mod_prime.txt",),
    "solo_product": ("tasks/product.txt",),
}


def fitted_on() -> dict[str, str]:
    """The template texts (hashes, by relative path) the shipped twins were calibrated with."""
    raw = yaml.safe_load(FITTED_FILE.read_text(encoding="utf-8")) or {}
    return dict(raw.get("templates") or {})


def mapped_templates(cues: Iterable[str], names: Iterable[str]) -> set[str]:
    """Of ``names``, those a study cue in ``cues`` reads."""
    patterns = [p for cue in cues for p in CUE_TEMPLATES.get(cue, ())]
    return {n for n in names if any(Path(n).match(p) for p in patterns)}
