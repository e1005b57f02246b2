"""The package writes HTML from templates (workbench/views/html/, rendered with
autoescape by :mod:`workbench.views.markup`), never by formatting strings: one
escaping rule instead of a hand-written ``html.escape`` at every site, where a
single forgotten one is an injection, or a ``$…$`` that MathJax typesets.

The check reads every module's syntax tree and flags a string that holds an HTML
tag and is being built: an f-string, ``%`` or ``.format`` on a literal, a literal
joined with ``+``, and a literal used as the separator of ``.join``. A constant
that is only *stored* (a ``<style>`` block, a script) is not built and passes."""
from __future__ import annotations

import ast
import functools
import re

from tests.conftest import ROOT

PACKAGE = ROOT / "workbench"

# Files still pending conversion (issue 39, part 5), by others. Remove each entry when its
# file is converted: the test fails for an entry that has no hit any more, so this list
# only shrinks. (views/run_report.py, views/panel.py and explorers/*.py were on it; they
# were converted before this test was committed, and export/*.py never built HTML.)
PENDING: frozenset[str] = frozenset()

# Not HTML: plotly's label markup. A figure's title, hover and tick text is plotly's own
# format, escaped for plotly by esc_plot (it decodes entities), and its line break,
# subtitle and hover box are these tags; a string whose only tags are these is a plotly
# label. (A block of HTML carries other tags too, and is caught by them.)
PLOTLY_TAGS = frozenset({"br", "sup", "sub", "extra"})

# Element names: an HTML tag is one of these. A placeholder such as ``<model>``, ``<profile>``
# or a regular expression's ``(?P<time>...)`` is not a tag.
ELEMENTS = frozenset("""
a abbr address article aside b blockquote body br button caption code col colgroup details dd div dl dt em
extra fieldset figcaption figure footer form h h1 h2 h3 h4 h5 h6 head header hr html i iframe img input kbd label
legend li link main meta nav ol optgroup option p pre script section select small span strong style sub summary
sup table tbody td template textarea tfoot th thead title tr u ul
""".split())
BOOLEAN_ATTRIBUTES = "open|checked|hidden|disabled|selected|nowrap|defer|async|multiple|readonly|required|autofocus"
# ``\x00`` stands for an f-string's interpolation, as in ``<td{attrs}>`` or ``<h{level}>``
TAG = re.compile(r"(?<!\?P)<\s*/?\s*([a-zA-Z][a-zA-Z0-9]*)"
                 rf"(?=\s*/?>|\x00|\s+[\w:-]+\s*=|\s+(?:{BOOLEAN_ATTRIBUTES})\b|\s*$)")


def has_tag(text: str) -> bool:
    """Whether ``text`` holds an HTML tag other than plotly's label markup."""
    tags = {m.group(1).lower() for m in TAG.finditer(text)} & ELEMENTS
    return bool(tags - PLOTLY_TAGS)


def _literal(node: ast.AST) -> str | None:
    """The literal text of a string constant or an f-string (interpolations as ``\\x00``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "\x00"
                       for v in node.values)
    return None


def html_building(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place ``source`` builds HTML from a string."""
    hits: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        text, what = None, ""
        if isinstance(node, ast.JoinedStr):
            text, what = _literal(node), "f-string"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            text, what = _literal(node.left), "% formatting"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            text, what = (_literal(node.left) or "") + (_literal(node.right) or ""), "+ concatenation"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("format", "join"):
            text, what = _literal(node.func.value), f".{node.func.attr}"
        if text and has_tag(text):
            hits.append((node.lineno, what))
    return sorted(set(hits))


@functools.cache
def _hits() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = html_building(path.read_text(encoding="utf-8"))
        if found:
            out[path.relative_to(ROOT).as_posix()] = found
    return out


def test_no_module_builds_html_in_a_string():
    hits = _hits()
    offenders = {f: h for f, h in hits.items() if f not in PENDING}
    assert not offenders, "HTML built in strings (write a template under workbench/views/html/ instead): " + "; ".join(
        f"{f}: " + ", ".join(f"line {n} ({w})" for n, w in h) for f, h in offenders.items())


def test_the_pending_list_only_shrinks():
    hits = _hits()
    converted = sorted(f for f in PENDING if f not in hits)
    assert not converted, f"converted, so take them off PENDING: {converted}"
    assert all((ROOT / f).is_file() for f in PENDING)


def test_the_check_catches_each_way_of_building_html():
    caught = [
        'f"<p><i>{text}</i></p>"',
        "f'<td style=\"x\">{v}</td>'",
        'f"<h{level}>{t}"',
        'f"<details open><summary>{s}"',
        '"<li>%s</li>" % item',
        '"<b>{}</b>".format(name)',
        '"<tr>" + cells + "</tr>"',
        '"</td><td>".join(cells)',
        "f\"<a href='{url}'>{label}</a>\"",
        'f"<b>step {seq}</b><br>{text}"',  # plotly's tags beside an HTML one
    ]
    for code in caught:
        assert html_building(code), code
    passed = [
        'f"model route {route!r} names no model; expected {prefix}/<model>"',
        'f"{{cues: \'<a regex for your text>\'}}"',
        're.compile(r"(?P<time>[01]?\\d)")',
        'STYLE = "<style>p{margin:0}</style>"',  # stored, not built
        'f"{a} < {b} and {c}>{d}"',
        'render("table.html", rows=rows)',
        'title + "<br><sup>" + note + "</sup>"',  # plotly's subtitle
        '"%{x}<br>" + name + ": %{y}<extra></extra>"',  # plotly's hover template
    ]
    for code in passed:
        assert not html_building(code), code
