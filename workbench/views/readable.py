"""Tables for people: the frames the metrics compute, shown with the metric's name
instead of its code, each rate as one phrase (``20/20 · 100 % [84, 100]``), text
left-aligned, no column that never varies, and no table wider than the page.

The frames stay as they are (exports and tests read them); only the view changes.
A rate is a group of columns: ``X:k/n`` with ``X:low``/``X:high`` (and ``X:all``),
the bare ``k/n``/``low``/``high`` of :func:`workbench.metrics.rates.rate_table`, or
a contrast's ``A k/n``/``A low``/``A high``. A difference is ``difference (B−A)``
with ``low``/``high`` beside it. Long tables become sortable, searchable
DataTables (itables, with its bundle inlined: offline)."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from workbench.metrics.contrasts import DIFF
from workbench.metrics.design import UNSET
from workbench.views.markup import Markup, render

MAX_COLUMNS = 12  # wider tables are turned on their side (when that makes them narrower)
SEARCHABLE_ROWS = 15  # from this many rows a table is sortable and searchable
HIDDEN = ("cell_id", "comparison", "A cell", "B cell", "estimable", "lost pair keys", "metric")

RATE_TEXT = re.compile(r"^\d+/\d+(?: · .*)?$")
MANY_RATES = 4  # more rate columns than this and a rate may wrap in its cell

STYLE = """<style>
table.wb-table{table-layout:auto;width:auto;max-width:100%;border-collapse:collapse;margin:4px 0 2px 0}
table.wb-table th,table.wb-table td{padding:3px 8px;vertical-align:top;overflow-wrap:break-word;
  border-bottom:1px solid #e5e5e5;max-width:24em}
table.wb-table th{text-align:left;font-weight:600;background:#f6f6f6;overflow-wrap:anywhere}
table.wb-table td.wb-text{text-align:left}
table.wb-table td.wb-rate{text-align:left;white-space:nowrap;font-variant-numeric:tabular-nums}
table.wb-table td.wb-num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.wb-table.wb-many td.wb-rate{white-space:normal;min-width:7em}
table.wb-table th[title]{text-decoration:underline dotted;cursor:help}
p.wb-caption{margin:2px 0 14px 0;color:#444;font-size:92%}
p.wb-caption b{color:#222}
div.wb-table-box{max-width:100%;overflow-wrap:anywhere;overflow-x:auto}
</style>"""


def _missing(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or (not isinstance(x, str) and pd.isna(x) is True)


def pct(x: object, signed: bool = False) -> str:
    """A share as a whole percentage (one decimal below 1 % or above 99 %)."""
    if _missing(x):
        return "—"
    v = 100 * float(x)  # type: ignore[arg-type]
    v = 0.0 if abs(v) < 0.05 else v  # an interval's bound computed as 5e-17
    digits = 1 if 0 < abs(v) < 1 or 99 < abs(v) < 100 else 0
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def rate_phrase(kn: object, low: object = None, high: object = None) -> str:
    """``k/n · r % [low, high]``; ``k/n`` alone when there is nothing to divide by."""
    text = str(kn)
    try:
        k, n = (int(p) for p in text.split("/"))
    except ValueError:
        return text
    if n == 0:
        return f"{text} · —"
    interval = "" if _missing(low) or _missing(high) else f" [{pct(low)}, {pct(high)}]"
    return f"{text} · {pct(k / n)} %{interval}"


def diff_phrase(diff: object, low: object = None, high: object = None) -> str:
    """A difference of two rates in percentage points with its interval."""
    if _missing(diff):
        return "not estimable"
    interval = "" if _missing(low) or _missing(high) else f" [{pct(low, True)}, {pct(high, True)}]"
    return f"{pct(diff, True)} pp{interval}"


def number(x: object) -> str:
    """Integers as integers, other numbers to three significant digits, missing as a dash."""
    if _missing(x):
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int) or (isinstance(x, float) and float(x).is_integer()):
        return str(int(x))
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def human(name: str, labels: Mapping[str, str] | None = None) -> str:
    """A column's name for a reader: its label if the kind gives one, else its code
    with underscores as spaces."""
    if labels and name in labels:
        return labels[name]
    return str(name).replace("_", " ")


@dataclass
class Shown:
    """A frame ready to show: its display columns (strings), which are numbers or
    rate phrases, the metric each column reports (for its definition) and what was
    lifted out."""
    frame: pd.DataFrame
    numeric: set[str] = field(default_factory=set)
    rates: set[str] = field(default_factory=set)
    metric_of: dict[str, str] = field(default_factory=dict)
    constant: list[str] = field(default_factory=list)


def _rate_groups(columns: Sequence[str]) -> list[tuple[str, str, str | None, str | None, str | None]]:
    """(label stem, k/n column, low, high, all) for every rate in the columns:
    ``X:k/n``, ``X k/n`` (a contrast's arms ``A``/``B``: "A rate") and a bare ``k/n``."""
    cols = set(columns)
    out = []
    for c in columns:
        for sep in (":", " "):
            if c.endswith(f"{sep}k/n"):
                stem = c[: -len(f"{sep}k/n")]

                def have(part: str, stem: str = stem, sep: str = sep) -> str | None:
                    return f"{stem}{sep}{part}" if f"{stem}{sep}{part}" in cols else None

                label = f"{stem} rate" if stem in ("A", "B") else stem
                out.append((label, c, have("low"), have("high"), have("all")))
                break
        else:
            if c == "k/n":
                out.append(("", c, "low" if "low" in cols and DIFF not in cols else None,
                            "high" if "high" in cols and DIFF not in cols else None, "all" if "all" in cols else None))
    return out


def shown(table: pd.DataFrame, labels: Mapping[str, str] | None = None, keep: Sequence[str] = (),
          hide: Sequence[str] = ()) -> Shown:
    """The display form of a metrics frame (see the module docstring); ``keep`` names
    columns never lifted into the caption even when constant, ``hide`` columns left out
    (e.g. a cell label whose factors are columns of their own)."""
    t = table.drop(columns=[c for c in hide if c in table.columns]).reset_index(drop=True)
    labelled = "cell_label" in table.columns  # then a cell's id is noise for a reader
    metric = str(t["metric"].iloc[0]) if "metric" in t and len(t) and t["metric"].nunique() == 1 else ""
    out: dict[str, list[str]] = {}
    numeric: set[str] = set()
    rates: set[str] = set()
    metric_of: dict[str, str] = {}
    used: set[str] = set()
    groups = {g[1]: g for g in _rate_groups(list(t.columns))}
    for g in groups.values():
        used.update(c for c in g[1:] if c)
        base = g[1][: -len("k/n")]  # "X:", "X " or ""
        used.update(f"{base}{part}" for part in ("k", "n", "rate"))
    if DIFF in t:
        used.update({DIFF, "low", "high"})
    for c in t.columns:
        if c in groups:
            stem, kn, lo, hi, every = groups[c]
            name = human(kn, labels) if labels and kn in labels else \
                (human(stem, labels) if stem else human(metric or "rate", labels))
            rates.add(name)
            out[name] = [rate_phrase(r[kn], r[lo] if lo else None, r[hi] if hi else None)
                         + (f" · all worlds {r[every]}" if every and str(r[every]) != str(r[kn]) else "")
                         for _, r in t.iterrows()]
            metric_of[name] = stem if stem and stem not in ("A rate", "B rate") else metric
            continue
        if c == DIFF:
            out["difference B − A"] = [diff_phrase(r[DIFF], r.get("low"), r.get("high")) for _, r in t.iterrows()]
            continue
        if c in used or c in HIDDEN and not (c == "cell_id" and not labelled):
            continue
        name = human(c, labels)
        col = t[c]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            numeric.add(name)
        out[name] = [number(v) if not isinstance(v, str) else v for v in col]
        if len(col) and all(isinstance(v, str) and RATE_TEXT.match(v) for v in col):
            rates.add(name)  # a rate already written as text ("7/20", "7/20 · 35 % [18, 57]")
        metric_of[name] = c
    frame = pd.DataFrame(out)
    constant = []
    if len(frame) > 1:
        for c in list(frame.columns):
            if c in numeric or c in keep or metric_of.get(c) in keep:
                continue
            vals = frame[c].astype(str).unique()
            if len(vals) == 1 and c not in {"difference B − A"} and not any(ch in vals[0] for ch in "·"):
                if vals[0] not in (UNSET, "", "nan", "None"):  # a setting no row sets says nothing
                    constant.append(f"{c} = {vals[0]}")
                frame = frame.drop(columns=c)
    return Shown(frame, numeric, rates, metric_of, constant)


def _definition_titles(s: Shown, definitions: Mapping[str, str] | None) -> dict[str, str]:
    if not definitions:
        return {}
    return {col: definitions[m] for col, m in s.metric_of.items() if m in definitions}


def _plain_html(frame: pd.DataFrame, numeric: set[str], titles: Mapping[str, str], rates: set[str],
                turned: bool = False) -> Markup:
    """The table; ``turned``: a table on its side, whose values take their kind
    (number, rate, text) from their row, once their column, named in the first column."""
    def kind(c: str) -> str:
        return "wb-num" if c in numeric else "wb-rate" if c in rates else "wb-text"

    first = frame.columns[0] if turned and len(frame.columns) else None
    rows = [[("wb-text" if c == first else kind(str(r[first])) if turned else kind(c), str(r[c]))
             for c in frame.columns] for _, r in frame.iterrows()]
    # many rate columns side by side: each rate may wrap after its count, so the table fits the page
    cls = "wb-table wb-many" if len(rates) > MANY_RATES else "wb-table"
    return render("readable_table.html", cls=cls, columns=[str(c) for c in frame.columns], titles=titles, rows=rows)


_itables_emitted = False
# itables' fallback notes link to its website: a link, not a load, but a report
# that names no other host is one the offline check can vouch for
_ITABLES_LINK = re.compile(r"""\s+href=["']?https?://itables\.org[^"'\s>]*["']?""")


def _searchable_html(frame: pd.DataFrame, numeric: set[str]) -> Markup:
    """A DataTables view (sort, search, pages): itables' offline bundle is inlined
    the first time, so the exported report needs no network. DataTables would
    right-align any column it takes for numbers (rates like ``7/20 · 35 %`` among
    them); text and rates are set left, counts right, as in the plain tables."""
    global _itables_emitted
    from itables import options, to_html_datatable
    from itables.javascript import generate_init_offline_itables_html

    init = ""
    if not _itables_emitted:
        init = generate_init_offline_itables_html(options.dt_bundle)
        _itables_emitted = True
    table = to_html_datatable(frame, connected=False, classes="display compact wb-table", showIndex=False,
                              allow_html=False, maxBytes=0, style="table-layout:auto;width:100%",
                              display_logo_when_loading=False, columnDefs=[
                                  {"className": "dt-right" if c in numeric else "dt-left", "targets": i}
                                  for i, c in enumerate(frame.columns)])
    # itables writes this HTML itself (its own template, values escaped: allow_html=False)
    return Markup(_ITABLES_LINK.sub("", init + table))


def turn_on_side(frame: pd.DataFrame, numeric: set[str], rates: set[str],
                 labels: Sequence[str] | None = None) -> pd.DataFrame:
    """A wide, short table as one row per column, so it fits the page instead of
    running off it. The headers name the rows: their cell ``labels`` when given and
    one per row (the study's names for its cells), else the leading text columns (a
    row's factors) joined. The leading columns stop at the first number or rate, and
    one value column always stays: a table of text alone once had every value in its
    header row and an empty body."""
    keys = []
    for c in frame.columns:
        if c in numeric or c in rates:
            break
        keys.append(c)
    if not keys or len(keys) == len(frame.columns):
        keys = [frame.columns[0]]
    if labels is not None and len(labels) == len(frame) and len(set(labels)) == len(labels):
        heads, first = [str(x) for x in labels], "cell"
    else:
        heads, first = [], " · ".join(keys)
        for _, r in frame.iterrows():
            h = " · ".join(str(r[k]) for k in keys)
            heads.append(h if h not in heads else f"{h} ({heads.count(h) + 1})")
    side = frame.drop(columns=keys).T
    side.columns = heads
    side.insert(0, first, side.index)
    return side.reset_index(drop=True)


def spec_defaults(spec: Any) -> dict[str, str]:
    """A cell spec's (pydantic model's) default of every setting, as the design's
    level texts (nested settings dotted): what a caption need not repeat."""
    from workbench.metrics.design import flatten

    values: dict[str, Any] = {}
    for name, info in spec.model_fields.items():
        if not info.is_required():
            v = info.get_default(call_default_factory=True)
            values[name] = v.model_dump(mode="json") if hasattr(v, "model_dump") else v
    return flatten(values)


def constant_settings(constant: Mapping[str, Any], defaults: Mapping[str, str] | None = None) -> str:
    """The settings every row of a table shares, for its caption: the ones a reader
    needs, i.e. neither unset nor at the kind's default (``defaults``, e.g. from
    :func:`spec_defaults`), then how many others were left out. A caption listing
    ~35 settings, most of them ``(unset)``, hid the few that mattered."""
    from workbench.metrics.design import UNSET

    defaults = defaults or {}
    shown = {k: str(v) for k, v in constant.items() if str(v) != UNSET and defaults.get(k) != str(v)}
    text = "; ".join(f"{k}={v}" for k, v in shown.items())
    left = len(constant) - len(shown)
    if left:
        plural = left > 1
        text += (f"; {left} more setting{'s' if plural else ''} unset or at {'their' if plural else 'its'} default"
                 if text else f"{left} setting{'s' if plural else ''}, unset or at {'their' if plural else 'its'} default")
    return text


def caption_html(text: str, title: str = "") -> str:
    """The one line under every figure and table: what it shows, over which worlds."""
    return str(_caption(text, title))


def _caption(text: str, title: str = "") -> Markup:
    from workbench.views.notes import caption_note

    note = caption_note()
    text = f"{text} {note}".strip() if note else text
    return render("caption.html", text=text, title=title)


def brief_view(table: pd.DataFrame) -> pd.DataFrame:
    """The columns a reader needs of a table that names them (``attrs["brief"]``, as
    a matched-contrast table does), with the intervals of the rates among them; the
    full table is what exports keep. A table naming none is returned as it is."""
    if not table.attrs.get("brief"):
        return table
    brief = list(table.attrs["brief"])
    brief += [f"{c[:-3]}{b}" for c in brief if c.endswith("k/n") for b in ("low", "high")]
    out = table[[c for c in table.columns if c in brief]]
    out.attrs = dict(table.attrs)
    return out


def readable_html(table: pd.DataFrame, *, caption: str = "", title: str = "", labels: Mapping[str, str] | None = None,
                  definitions: Mapping[str, str] | None = None, constant: str = "", keep: Sequence[str] = (),
                  hide: Sequence[str] = (), searchable: bool | None = None) -> str:
    """The whole table block: the table, then its caption (title, what the rows are,
    the columns that never vary) and, when any, its metrics' definitions."""
    s = shown(table, labels, keep, hide)
    frame, numeric, rates = s.frame, s.numeric, s.rates
    titles = _definition_titles(s, definitions)
    lifted = "; ".join([x for x in (constant, *s.constant) if x])
    text = caption + (f" Same in every row: {lifted}." if lifted else "")
    if frame.empty:
        reason = table.attrs.get("empty_reason") or "no rows in this run set"
        return str(render("readable.html", style=Markup(STYLE), body=None,
                      caption=_caption(f"{text} Empty: {reason}.".strip(), title), definitions={}))
    if len(frame.columns) > MAX_COLUMNS and len(frame) + 1 < len(frame.columns):
        cells = list(table["cell_label"].astype(str)) if "cell_label" in table.columns else None
        frame = turn_on_side(frame, numeric, rates, cells)
        text += " Turned on its side to fit the page: one column per row."
        turned, searchable = True, False
    else:
        turned = False
    long = len(frame) >= SEARCHABLE_ROWS if searchable is None else searchable
    body = _searchable_html(frame, numeric) if long else _plain_html(frame, numeric, titles, rates, turned)
    return str(render("readable.html", style=Markup(STYLE), body=body, caption=_caption(text.strip(), title),
                      definitions=titles))


def show_figure(fig: Any, caption: str, title: str = "") -> None:
    """Display a figure and the caption line under it (notebooks call this, never
    ``display(fig)`` alone, so that no figure goes unexplained)."""
    from IPython.display import HTML, display

    from workbench.views.figure_sink import collect

    display(fig)
    display(HTML(render("styled_caption.html", style=Markup(STYLE), caption=_caption(caption, title))))
    collect(fig, caption, title)
