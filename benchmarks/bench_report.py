"""The demo report's weight and how soon a reader sees it.

Runs params/demo.yaml into a temporary folder (or takes a run dir), builds its
report, and prints the time to build it, its size (and what makes it up:
plotly.js as shipped, the tables' DataTables bundle, everything else) and the
first contentful paint in headless Chromium with the network refused (median of
five fresh loads). Targets (issue 16): at most 5 MB, first paint within 2 s.
Run: .venv/bin/python benchmarks/bench_report.py [RUN_DIR]"""
from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import ARGS, refuse_network, require_browser  # noqa: E402
from workbench.params import load_study  # noqa: E402
from workbench.publish.report import make_report  # noqa: E402
from workbench.study import run_study  # noqa: E402

MAX_BYTES = 5_000_000
MAX_FIRST_PAINT_MS = 2000


def first_paints(path: Path, loads: int = 5) -> list[float]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        for _ in range(loads):
            browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            refuse_network(page, [])
            page.goto(path.resolve().as_uri())
            page.wait_for_function("performance.getEntriesByName('first-contentful-paint').length > 0")
            out.append(page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime"))
            browser.close()
    return out


def parts(html: str) -> dict[str, int]:
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.DOTALL)
    plotly = sum(len(s) for s in re.findall(r'<script type="application/gzip" id="wb-plotly-gz">(.*?)</script>',
                                            html, re.DOTALL))
    datatables = sum(len(s) for s in scripts if "injectCSS" in s or "DataTable" in s[:2000])
    return {"plotly.js (gzip, base64)": plotly, "DataTables bundle": datatables,
            "everything else": len(html) - plotly - datatables}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "demo"
        if len(sys.argv) <= 1:
            t = time.perf_counter()
            run_study(load_study(ROOT / "params" / "demo.yaml"), run_dir, progress=False)
            print(f"demo study: {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        report = make_report(run_dir)
        print(f"report built in {time.perf_counter() - t:.1f} s")
        html = report.read_text(encoding="utf-8")
        size = report.stat().st_size
        print(f"size {size / 1e6:.2f} MB (target <= {MAX_BYTES / 1e6:.0f} MB: {'met' if size <= MAX_BYTES else 'MISSED'})")
        for name, n in parts(html).items():
            print(f"  {name:28s} {n / 1e6:6.2f} MB")
        paints = first_paints(report)
        median = statistics.median(paints)
        print(f"first contentful paint: median {median:.0f} ms over {len(paints)} loads "
              f"(min {min(paints):.0f}, max {max(paints):.0f}; target <= {MAX_FIRST_PAINT_MS} ms: "
              f"{'met' if median <= MAX_FIRST_PAINT_MS else 'MISSED'})")
        met = size <= MAX_BYTES and median <= MAX_FIRST_PAINT_MS
        print(f"RESULT name=demo-report figure=bytes:{size} reference=first_paint_ms:{median:.0f} ratio=- "
              f"target=<=5MB,paint<=2000ms met={'yes' if met else 'no'}")


if __name__ == "__main__":
    main()
