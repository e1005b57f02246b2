"""plotly.js in an exported report: inlined once, gzip-compressed, inflated by the
browser's own DecompressionStream, and every figure drawn once it is ready.

Why: the minified bundle is 4.8 MB, most of a report's weight, and as one inline
script at the top of the page it kept the report blank while the browser parsed
it. The plotly Python package ships no partial bundle (npm's partial bundles
lack the table trace the store view uses, and npm is what reports must no longer
need), so the full bundle travels compressed instead: about 1.9 MB as base64,
and the page paints before plotly.js is evaluated."""
from __future__ import annotations

import base64
import gzip
import re

from workbench.views.markup import render

BUNDLE_ID = "wb-plotly-gz"
READY = "window.wbPlotlyReady"

# the notebook's setup cell emits the bundle as one script starting with its banner
_BUNDLE = re.compile(r"<script>\s*/\*\*\s*\n\*\s*plotly\.js v[\d.]+.*?</script>", re.DOTALL)
_SCRIPT = re.compile(r"(<script\b[^>]*>)(.*?)(</script>)", re.IGNORECASE | re.DOTALL)


class PlotlyBundleError(RuntimeError):
    pass


def _bundle_js(script: str) -> str:
    body = _SCRIPT.match(script)
    assert body is not None
    return body.group(2)


def pack_plotly(html: str) -> str:
    """Replace the inlined bundle by its compressed form and the loader, and make
    every figure script wait for it (a page already packed is returned as it is).
    A page with figures but no bundle is refused: it would show no chart, silently."""
    bundles = list(_BUNDLE.finditer(html))
    figures = sum(1 for m in _SCRIPT.finditer(html) if "Plotly.newPlot" in m.group(2) and READY not in m.group(2))
    if not bundles:
        if figures:
            raise PlotlyBundleError(f"{figures} figure(s) but no inlined plotly.js: the notebook must call "
                                    "workbench.notebook.setup() before its first figure")
        return html
    if len(bundles) > 1:
        raise PlotlyBundleError(f"plotly.js is inlined {len(bundles)} times; expected once")
    first = bundles[0]
    packed = base64.b64encode(gzip.compress(_bundle_js(first.group(0)).encode("utf-8"), 9, mtime=0)).decode()
    head = html[: first.start()] + str(render("plotly_loader.html", bundle_id=BUNDLE_ID, ready=READY, packed=packed))
    tail = _SCRIPT.sub(_defer_figure, html[first.end():])
    return head + tail


def _defer_figure(m: re.Match[str]) -> str:
    opening, body, closing = m.groups()
    if "Plotly.newPlot" not in body or READY in body:
        return m.group(0)
    return f"{opening}{READY}.then(function () {{{body}}});{closing}"
