"""Exporting an executed notebook to one self-contained HTML file: no input
cells, plotly.js inlined once (by the notebook's own output), no script or style
loaded from anywhere else, and saved widget state rendered by the inlined
widget renderer."""
from __future__ import annotations

import re
from pathlib import Path

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


def export_html(notebook: str | Path, output: str | Path, *, title: str | None = None) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    from workbench.publish.assets import ensure_widget_js

    nb = nbformat.read(str(notebook), as_version=4)
    if title:
        nb.metadata["title"] = title
    exporter = HTMLExporter(template_name="workbench_report", extra_template_basedirs=[str(TEMPLATES)])
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    widget_js = ""
    if "widgets" in nb.metadata:
        widget_js = ensure_widget_js().read_text(encoding="utf-8").replace("</script", "<\\/script")
    html, _ = exporter.from_notebook_node(nb, resources={"workbench_widget_js": widget_js})
    leaks = external_references(html)
    if leaks:
        raise RuntimeError(f"the report would load {len(leaks)} external resource(s), e.g. {leaks[0]!r}")
    output = Path(output)
    output.write_text(html, encoding="utf-8")
    return output
