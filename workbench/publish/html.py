"""Exporting an executed notebook to one self-contained HTML file: no input
cells, plotly.js inlined once (compressed, see :mod:`workbench.publish.plotlyjs`),
no script or style loaded from anywhere else, and no widgets: a report is plain
HTML, so an ipywidget in it (blank without a widget manager) is refused."""
from __future__ import annotations

import re
from pathlib import Path

from workbench.errors import InputError

TEMPLATES = Path(__file__).resolve().parent / "templates"
_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']\s*(?:https?:)?//""", re.IGNORECASE)
_CSS_EXTERNAL = re.compile(r"""@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*https?://""", re.IGNORECASE)


_SCRIPT_BODY = re.compile(r"(<script\b[^>]*>)(.*?)(</script>)", re.IGNORECASE | re.DOTALL)


def external_references(html: str) -> list[str]:
    """Every tag attribute or CSS rule that would load something from another host.
    Script bodies are left out (plotly.js holds link targets such as its logo's
    href in code); what scripts actually fetch is checked in a browser by the tests."""
    markup = _SCRIPT_BODY.sub(lambda m: m.group(1) + m.group(3), html)
    found = [markup[max(0, m.start() - 40): m.end() + 60] for m in _EXTERNAL.finditer(markup)]
    found += [markup[max(0, m.start() - 40): m.end() + 60] for m in _CSS_EXTERNAL.finditer(markup)]
    return found


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_cells(nb: object) -> list[int]:
    """The (1-based) code cells whose outputs show an ipywidget."""
    cells = [c for c in nb.cells if c.cell_type == "code"]  # type: ignore[attr-defined]
    return [i for i, c in enumerate(cells, 1) if any(WIDGET_VIEW in (o.get("data") or {}) for o in c.get("outputs", []))]


def export_html(notebook: str | Path, output: str | Path, *, title: str | None = None) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    from workbench.publish.plotlyjs import pack_plotly

    nb = nbformat.read(str(notebook), as_version=4)
    shown = widget_cells(nb)
    if shown:
        raise InputError(f"{notebook}: code cell(s) {shown} show an ipywidget; a report is plain HTML (no widget "
                         "manager), so show HTML or a figure there instead")
    nb.metadata.pop("widgets", None)
    if title:
        nb.metadata["title"] = title
    exporter = HTMLExporter(template_name="workbench_report", extra_template_basedirs=[str(TEMPLATES)])
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    html, _ = exporter.from_notebook_node(nb)
    leaks = external_references(html)
    if leaks:
        raise RuntimeError(f"the report would load {len(leaks)} external resource(s), e.g. {leaks[0]!r}")
    output = Path(output)
    output.write_text(pack_plotly(html), encoding="utf-8")
    return output
