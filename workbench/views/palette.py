"""One colour per arm for a whole report: a level of a factor (a condition, a
clause set, a model) is drawn in the same colour in every figure, so a reader
who learnt "store is blue" in the headline can trust it further down."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# colour-blind safe (Okabe–Ito, then Tableau's muted tones); grey is kept for "other"
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000",
           "#4E79A7", "#F28E2B", "#59A14F", "#B07AA1", "#9C755F", "#EDC948")
OTHER = "#8c8c8c"


@dataclass
class Palette:
    """Levels get colours in the order first named (the study's declared contrasts
    first, then the cells' factors), so adding a cell never recolours the others."""
    levels: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, *groups: Iterable[object]) -> Palette:
        seen: dict[str, None] = {}
        for group in groups:
            for level in group:
                seen.setdefault(str(level), None)
        return cls(list(seen))

    def colour(self, level: object) -> str:
        level = str(level)
        if level not in self.levels:
            self.levels.append(level)
        i = self.levels.index(level)
        return COLOURS[i] if i < len(COLOURS) else OTHER

    def __call__(self, level: object) -> str:
        return self.colour(level)
