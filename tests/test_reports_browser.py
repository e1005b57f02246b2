"""The three world kinds' reports as a reader gets them: opened in headless
Chromium with every request off the file refused. Each report must open on its
story (a headline naming the study's contrasts), caption every figure, fit the
page, carry the SIMULATED banner when any agent is not a real model, and stay
light (size, first paint). Also: `report --figures` writes real SVG, PDF and PNG.

Screenshots: outputs/screenshots/report-{demo,recall,collusion}.png (the top of
each report) and report-{kind}-headline.png; figures in reports.json."""
from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.browser import ARGS, refuse_network, require_browser
from tests.conftest import ROOT
from workbench.publish.report import make_report

SHOTS = ROOT / "outputs" / "screenshots"
MAX_BYTES = 5_000_000  # the budget for the demo report; every report keeps to it
MAX_FIRST_PAINT_MS = 2000
STUDIES = {
    "demo": ("params/demo.yaml", ["store vs no-store", "re-check clause", "shared vs private",
                                  "strict vs lenient parser"]),
    "recall": ("params/recall-smoke.yaml", ["lightweight vs naive", "baseline vs naive"]),
    "collusion": ("params/collusion-smoke.yaml", ["controlled peer"]),
}


@pytest.fixture(scope="module")
def reports(shipped_report) -> dict[str, Path]:
    return {name: shipped_report(params) for name, (params, _) in STUDIES.items()}


def _page(p, path: Path, left: list[str]):  # noqa: ANN001, ANN202 - playwright objects
    browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    refuse_network(page, left)
    page.goto(path.resolve().as_uri())
    return browser, page


def _first_paint_ms(path: Path, tries: int = 3) -> float:
    """First contentful paint of a fresh load, the best of ``tries`` (a loaded CI
    machine slows single loads; the report's own weight is what is measured)."""
    from playwright.sync_api import sync_playwright

    best = float("inf")
    with sync_playwright() as p:
        for _ in range(tries):
            browser, page = _page(p, path, [])
            page.wait_for_function("performance.getEntriesByName('first-contentful-paint').length > 0",
                                   timeout=30_000)
            best = min(best, page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime"))
            browser.close()
            if best <= MAX_FIRST_PAINT_MS:
                break
    return best


@pytest.mark.parametrize("name", list(STUDIES))
def test_report_tells_its_story_in_a_browser(reports, name):
    from playwright.sync_api import sync_playwright

    path = reports[name]
    size = path.stat().st_size
    first_paint = _first_paint_ms(path)
    SHOTS.mkdir(parents=True, exist_ok=True)
    left: list[str] = []
    with sync_playwright() as p:
        browser, page = _page(p, path, left)
        try:
            page.wait_for_function("window.wbPlotlyReady !== undefined", timeout=30_000)
            page.evaluate("window.wbPlotlyReady")  # plotly.js inflated and loaded
            page.wait_for_timeout(1500)  # figures drawn after it
            page.screenshot(path=str(SHOTS / f"report-{name}.png"))

            # the story first: a headline naming the study's contrasts, before any other section
            headline = page.locator("#headline")
            assert headline.count() == 1, "no headline section"
            headings = page.locator("h2").all_inner_texts()
            assert headings[0].startswith("Headline:"), headings[:3]
            text = page.inner_text("body")
            head_text = headings[0] + text[text.find(headings[0]): text.find(headings[1]) if len(headings) > 1 else None]
            for contrast in STUDIES[name][1]:
                assert contrast in head_text, f"{contrast!r} missing from the headline"
            headline.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"report-{name}-headline.png"))
            assert headings[-1].startswith("Provenance"), "provenance and preregistration come last"

            # every figure drawn and captioned
            plots = page.locator(".js-plotly-plot")
            assert plots.count() >= 3 and page.locator(".js-plotly-plot .main-svg").count() >= plots.count()
            # a figure's caption is the next output, or beside it in its block (a figure in a tab)
            uncaptioned = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot')).filter(p => {
                const own = p.closest('.wb-figure');
                if (own && own.querySelector(':scope > p.wb-caption')) return false;
                const out = p.closest('.jp-OutputArea-child');
                const next = out && out.nextElementSibling;
                return !(next && next.querySelector('p.wb-caption'));
            }).length""")
            assert uncaptioned == 0, f"{uncaptioned} figure(s) without a caption"

            # nothing wider than the page
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            wide = page.evaluate("""Array.from(document.querySelectorAll('body *')).filter(e => {
                const r = e.getBoundingClientRect();
                return r.width > 0 && r.right > document.documentElement.clientWidth + 1;
            }).map(e => e.tagName + '.' + e.className).slice(0, 5)""")
            assert wide == [], wide

            # simulated agents are said to be simulated
            banner = page.locator(".wb-banner")
            assert banner.count() >= 1 and "SIMULATED" in banner.first.inner_text()
            assert page.locator(".jupyter-widgets, .lm-TabBar").count() == 0  # no widget manager
        finally:
            browser.close()
    assert left == [], left
    record = SHOTS / "reports.json"
    figures = json.loads(record.read_text()) if record.exists() else {}
    figures[name] = {"bytes": size, "first_contentful_paint_ms": round(first_paint)}
    record.write_text(json.dumps(figures, indent=1) + "\n")
    assert size <= MAX_BYTES, f"{name} report is {size:,} bytes"
    assert first_paint <= MAX_FIRST_PAINT_MS, f"{name} report first paint {first_paint:.0f} ms"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_figures_as_svg_pdf_png(reports, tmp_path):
    run_dir = reports["collusion"].parent
    out = tmp_path / "figures"
    make_report(run_dir, output=tmp_path / "again.html", figures_dir=out, timeout_s=600)
    index = json.loads((out / "figures.json").read_text())
    assert len(index) >= 3 and all(e["caption"] for e in index)
    for e in index:
        svg = ET.parse(out / f"{e['name']}.svg").getroot()
        assert svg.tag.endswith("svg") and len(list(svg.iter())) > 20  # a drawing, not an empty frame
        pdf = (out / f"{e['name']}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF-") and b"%%EOF" in pdf[-1024:]
        width, height = _png_size((out / f"{e['name']}.png").read_bytes())
        assert width >= 800 and height >= 300
