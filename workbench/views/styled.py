"""Styled rate tables: k/n, the rate as a percentage with a bar, and the 95%
Wilson interval; simulated rows carry a visible tag."""
from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
from pandas.io.formats.style import Styler

from workbench.routes import is_simulated_label
from workbench.views.markup import NO_MATH
from workbench.views.notes import caption_note

RATE_COLUMNS = {"metric", "k", "n", "k/n", "rate", "low", "high", "all"}
SIM_TAG = " [simulated]"
NO_MATH_CLASS = 'class="' + NO_MATH + '"'  # pandas writes the table; MathJax skips it as every block


def _pct(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


is_simulated = is_simulated_label  # a table's model column


def rate_styler(table: pd.DataFrame, keys: Iterable[str] | None = None, caption: str | None = None) -> Styler:
    """A Styler for any frame with columns k, n, rate, low, high (``rate_table``
    output): the grouping columns, then k/n, the rate (with a bar), the interval
    and, when present, k/n over all worlds. Text cells are HTML-escaped; rows
    whose model is simulated are tagged and shaded."""
    keys = [c for c in table.columns if c not in RATE_COLUMNS] if keys is None else list(keys)
    if table.empty or not {"k", "n", "rate", "low", "high"} <= set(table.columns):
        table = pd.DataFrame(columns=[*keys, "k", "n", "rate", "low", "high"])
    show = table[keys].copy() if keys else pd.DataFrame(index=table.index)
    sim = table["model"].map(is_simulated) if "model" in table else pd.Series(False, index=table.index)
    if "model" in show:
        show["model"] = [f"{m}{SIM_TAG}" if s else m for m, s in zip(table["model"], sim)]
    show["k/n"] = [f"{int(k)}/{int(n)}" for k, n in zip(table["k"], table["n"])]
    show["rate"] = table["rate"].astype(float)
    show["95% interval"] = [f"[{_pct(lo)}, {_pct(hi)}]" if not (pd.isna(lo) or pd.isna(hi)) else "—"
                            for lo, hi in zip(table["low"], table["high"])]
    if "all" in table:
        show["all worlds"] = table["all"].astype(str)
    show = show.reset_index(drop=True)
    sim = sim.reset_index(drop=True)

    def shade(row: pd.Series) -> list[str]:
        return ["background-color:#fff4d6" if sim.iloc[row.name] else ""] * len(row)

    styler = (show.style.format({"rate": _pct}, escape="html", na_rep="—")
              .format_index(escape="html", axis=1)
              .bar(subset=["rate"], vmin=0.0, vmax=1.0, color="#9ecae1", height=70)
              .apply(shade, axis=1)
              .hide(axis="index")
              .set_table_attributes(NO_MATH_CLASS)
              .set_table_styles([{"selector": "th", "props": "text-align:left;padding:2px 8px"},
                                 {"selector": "td", "props": "padding:2px 8px"}]))
    cap = caption if caption is not None else "k/n over valid worlds; 95% Wilson intervals"
    if sim.any():
        cap += "; rows tagged [simulated] are simulated behaviour, not real models"
    if caption_note():
        cap += f". {caption_note()}"
    return styler.set_caption(cap)
