"""`workbench view`: the world index and world pages, served on 127.0.0.1 and as a
static bundle opened from file://, in headless Chromium with every other request
refused. Also: usage per cell against a hand count, model text escaped, the
recall and collusion pages drawn by their kinds' views, two run sets side by side,
and an index of 10,000 worlds that draws one page of rows.

Screenshots: outputs/screenshots/view-*.png (paths printed; `pytest -s` shows them)."""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import ARGS, refuse_network, require_browser
from tests.conftest import ROOT

SHOTS = ROOT / "outputs" / "screenshots"
EVIL = "<script>window.wbPwned=1</script><img src=x onerror=\"window.wbPwned=2\">zebracorn"


def _workbench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=True)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """`workbench run params/smoke.yaml --out DIR -q`, with one reply rewritten to carry markup (model text is data)."""
    out = tmp_path_factory.mktemp("view") / "smoke"
    _workbench("run", "params/smoke.yaml", "--out", str(out), "-q")
    lines = (out / "steps.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["reply"]["text"] = EVIL
    lines[0] = json.dumps(first)
    (out / "steps.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _shot(page, name: str) -> Path:  # noqa: ANN001 - a playwright page
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    page.screenshot(path=str(path), full_page=False)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {path}")
    return path


def _count(page) -> tuple[int, int]:  # noqa: ANN001
    m = re.search(r"of (\d+) matching worlds \((\d+) in all\)", page.inner_text("#wb-count"))
    assert m, page.inner_text("#wb-count")
    return int(m.group(1)), int(m.group(2))


def _column(page, name: str) -> list[str]:  # noqa: ANN001
    names = [t.strip() for t in page.locator("#wb-index thead tr").first.locator("th").all_inner_texts()]
    j = names.index(name)
    return [r.locator("td").nth(j).inner_text() for r in page.locator("#wb-index tbody tr").all()]


@pytest.fixture
def served(smoke: Path) -> Iterator[str]:
    """`workbench view SMOKE --port 0` in its own process; the address it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "view", str(smoke), "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert m, f"no address in {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        yield m.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_view_serves_index_filter_and_world_timeline(served: str, smoke: Path) -> None:
    from playwright.sync_api import sync_playwright

    left: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))

            def guard(route) -> None:  # noqa: ANN001 - only the viewer's own address, data: and blob:
                url = route.request.url
                if url.startswith((served, "data:", "blob:", "about:")):
                    route.continue_()
                else:
                    left.append(url)
                    route.abort()

            page.route("**/*", guard)
            page.goto(served)
            page.wait_for_selector("body[data-ready='1']")
            shown, total = _count(page)
            assert shown == total == 24  # smoke: 8 cells x 3 worlds
            assert page.locator("#wb-bundle-note").is_hidden()  # a server opens every world

            # filter to one cell with the cell column's filter
            cell = "sim/diligent · no-store"
            page.select_option("select[data-col='cell']", cell)
            assert _count(page) == (3, 24)
            assert set(_column(page, "cell")) == {cell}
            # and by a metric: a number filter
            page.fill("input[data-col='tokens']", ">0")
            assert _count(page) == (3, 24)
            _shot(page, "view-index-filtered.png")

            # full-text search reaches the reply that carries markup, which stays text
            page.select_option("select[data-col='cell']", "\u0000")
            page.fill("input[data-col='tokens']", "")
            page.fill("#wb-search", "zebracorn")
            page.wait_for_function("document.getElementById('wb-count').textContent.startsWith('1–1 of 1 ')")
            evil_world = _column(page, "world")[0]
            page.fill("#wb-search", "")
            page.select_option("select[data-col='cell']", cell)

            # open a world: its page is drawn on demand (nothing written before), with the step timeline
            link = page.locator("#wb-index tbody a").first
            world_id = link.inner_text()
            link.click()
            page.wait_for_selector("#step-timeline .main-svg", timeout=60_000)
            assert world_id in page.inner_text("h1")
            assert "world clock" in page.inner_text("#step-timeline")
            assert page.locator("#store-step-by-step-slider .main-svg").count() >= 1
            assert "Transcripts" in page.inner_text("body")
            _shot(page, "view-world.png")

            # back to the index: the same rows (the view's state is kept in the address)
            page.go_back()
            page.wait_for_selector("body[data-ready='1']")
            assert _count(page) == (3, 24) and page.input_value("select[data-col='cell']") == cell

            # the world whose reply carries markup: shown as text, never run
            page.goto(served + f"worlds/r0/{evil_world}.html")
            page.wait_for_selector("#step-timeline .main-svg", timeout=60_000)
            assert "<script>window.wbPwned=1</script>" in (page.locator("#transcripts").text_content() or "")
            assert page.evaluate("window.wbPwned") is None
        finally:
            browser.close()
    assert left == [], f"requests off the viewer: {left}"
    assert errors == [], errors


def test_bundle_works_from_file(smoke: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    out = tmp_path / "bundle"
    done = _workbench("view", str(smoke), "--bundle", str(out), "--examples", "1")
    assert "8 world pages" in done.stdout, done.stdout
    pages = sorted((out / "worlds" / "r0").glob("*.html"))
    assert len(pages) == 8  # one per cell
    left: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            refuse_network(page, left)
            page.goto((out / "index.html").resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']")
            assert _count(page) == (24, 24)
            note = page.inner_text("#wb-bundle-note")
            assert "at most 1 worlds per cell (8 of 24 worlds)" in note and "--examples" in note
            assert page.locator("#wb-index tbody a").count() == 8  # only worlds with a page are links
            page.select_option("select[data-col='condition']", "private")
            assert _count(page) == (3, 24)
            page.fill("#wb-search", "zebracorn")  # the search and the filters together: not in this cell
            page.wait_for_function("document.getElementById('wb-count').textContent.startsWith('0 of 0 ')")
            page.select_option("select[data-col='condition']", "\u0000")
            assert _count(page) == (1, 24)
            page.fill("#wb-search", "")
            page.select_option("select[data-col='condition']", "private")
            _shot(page, "view-bundle-index.png")
            page.locator("#wb-index tbody a").first.click()
            page.wait_for_selector("#step-timeline .main-svg", timeout=60_000)
            assert page.url.startswith("file://")
            _shot(page, "view-bundle-world.png")
            page.go_back()
            page.wait_for_selector("body[data-ready='1']")
            assert _count(page) == (3, 24) and page.input_value("select[data-col='condition']") == "private"
            # the cells table links each cell to its worlds
            page.locator("#cells ~ div a", has_text="sim/diligent · no-store").click()
            page.wait_for_function("document.getElementById('wb-count').textContent.startsWith('1–3 of 3 ')")
            assert page.input_value("select[data-col='condition']") == "\u0000"
            assert set(_column(page, "condition")) == {"no-store"}
        finally:
            browser.close()
    assert left == [], f"requests off the bundle: {left}"
    assert errors == [], errors
    assert "<script>window.wbPwned" not in "".join(p.read_text() for p in pages)


def test_cell_usage_matches_a_hand_count(smoke: Path) -> None:
    from workbench.viewer.data import build_index, cell_usage, load_run_sets

    rs = load_run_sets([smoke])
    usage = cell_usage(rs).set_index("cell_id")
    steps = [json.loads(x) for x in (smoke / "steps.jsonl").read_text().splitlines()]
    worlds = {json.loads(x)["world_id"]: json.loads(x)["cell_id"] for x in (smoke / "worlds.jsonl").read_text().splitlines()}
    cid = sorted(set(worlds.values()))[0]
    mine = [s["reply"] for s in steps if worlds[s["world_id"]] == cid]
    row = usage.loc[cid]
    assert row["calls"] == len(mine)
    assert row["prompt tokens"] == sum(r["usage"]["prompt_tokens"] for r in mine)
    assert row["completion tokens"] == sum(r["usage"]["completion_tokens"] for r in mine)
    lat = sorted(r["latency_s"] for r in mine)
    assert row["latency median (s)"] == pytest.approx(statistics.median(lat), abs=1e-3)
    assert row["latency p95 (s)"] == pytest.approx(float(__import__("numpy").quantile(lat, 0.95)), abs=1e-3)
    assert row["errors"] == sum(bool(r["error"]) for r in mine) and row["retries"] == 0
    index = build_index(rs)
    names = [c["name"] for c in index.columns]
    assert {"world", "cell", "condition", "calls", "tokens", "latency_median_s", "cross_agent_access"} <= set(names)
    assert len(index.rows) == 24


def test_two_run_sets_side_by_side(smoke: Path, tmp_path: Path) -> None:
    """The index holds both run sets' worlds and the page carries compare's matched-cell table."""
    from workbench.viewer.data import comparisons, load_run_sets
    from workbench.viewer.site import build_site

    rs = load_run_sets([smoke, smoke])
    [(title, table)] = comparisons(rs)
    assert not isinstance(table, str)
    assert (table["status"] == "matched").sum() == 8
    site = build_site(rs, tmp_path / "two", examples=0)
    assert len(site.index.rows) == 48 and site.index.columns[0]["name"] == "run set"
    html = (tmp_path / "two" / "index.html").read_text()
    assert "Run sets side by side" in html and "smoke (2) − smoke" in html


@pytest.mark.parametrize("params", ["params/recall-smoke.yaml", "params/collusion-smoke.yaml"])
def test_other_kinds_pages_use_their_views(params: str, tmp_path: Path) -> None:
    from workbench.viewer.data import load_run_sets
    from workbench.viewer.site import build_site

    run = tmp_path / "run"
    _workbench("run", params, "--out", str(run), "-q")
    site = build_site(load_run_sets([run]), tmp_path / "site", examples=1)
    html = next(iter(sorted((tmp_path / "site" / "worlds" / "r0").glob("*.html")))).read_text()
    assert "could not draw" not in html
    if "recall" in params:
        assert "id='turn-timeline'" in html and "id='retrieval-ranks'" in html and "wb-slider" in html
    else:
        assert "id='episodes'" in html and "id='trajectory-episode-by-episode'" in html
    assert "Plotly.newPlot" in html or "collusion" in params
    assert len(site.pages) >= 1


def test_ten_thousand_worlds_index_draws_one_page(smoke: Path, tmp_path: Path) -> None:
    """10,000 worlds (smoke's, copied under new ids, two steps each): the bundle lists them all, writes one page
    per cell, and the browser draws 50 rows, filters and sorts over all of them."""
    from playwright.sync_api import sync_playwright

    from workbench.viewer.data import load_run_sets
    from workbench.viewer.site import build_site

    big = tmp_path / "big"
    big.mkdir()
    (big / "manifest.json").write_text((smoke / "manifest.json").read_text())
    worlds = [json.loads(x) for x in (smoke / "worlds.jsonl").read_text().splitlines()]
    steps: dict[str, list[str]] = {}
    for x in (smoke / "steps.jsonl").read_text().splitlines():
        s = json.loads(x)
        if len(steps.setdefault(s["world_id"], [])) < 2:
            steps[s["world_id"]].append(s)
    n = 10_000
    with open(big / "worlds.jsonl", "w") as fw, open(big / "steps.jsonl", "w") as fs:
        for i in range(n):
            w = dict(worlds[i % len(worlds)])
            w["world_index"] = i
            w["world_id"] = f"{w['cell_id']}-{i:05d}"
            w["metrics"] = {**w["metrics"], "world_id": w["world_id"]}
            fw.write(json.dumps(w) + "\n")
            for s in steps[worlds[i % len(worlds)]["world_id"]]:
                fs.write(json.dumps({**s, "world_id": w["world_id"]}) + "\n")
    t0 = time.perf_counter()
    site = build_site(load_run_sets([big]), tmp_path / "bigsite", examples=1)
    built = time.perf_counter() - t0
    assert len(site.index.rows) == n and len(site.pages) == 8
    print(f"10,000-world bundle built in {built:.1f} s; index.js {(tmp_path / 'bigsite/data/index.js').stat().st_size:,} B")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            left: list[str] = []
            refuse_network(page, left)
            t0 = time.perf_counter()
            page.goto((tmp_path / "bigsite" / "index.html").resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            opened = time.perf_counter() - t0
            assert _count(page) == (n, n)
            assert page.locator("#wb-index tbody tr").count() == 50
            page.select_option("select[data-col='condition']", "namespaced")
            assert _count(page) == (sum(worlds[i % len(worlds)]["cell"]["condition"] == "namespaced" for i in range(n)), n)
            page.locator("#wb-index thead th[data-col='index']").click()
            page.locator("#wb-index thead th[data-col='index']").click()  # descending
            last = max(i for i in range(n) if worlds[i % len(worlds)]["cell"]["condition"] == "namespaced")
            assert _column(page, "index")[0] == str(last)
            page.click("#wb-next")
            assert page.inner_text("#wb-page").startswith("page 2 of 25")
            _shot(page, "view-10k-index.png")
            print(f"10,000-world index opened in {opened:.1f} s")
            assert left == []
        finally:
            browser.close()


def test_a_kind_without_a_page_gets_the_kind_free_page(tmp_path: Path, monkeypatch) -> None:
    """A fourth kind (tests/echo_kind.py) without a page of its own (the base hook): its worlds are listed and
    each page shows its replies (escaped), usage and metrics."""
    import yaml

    from tests import echo_kind
    from workbench.cli import main
    from workbench.kinds import WorldKind, register_kind
    from workbench.viewer.data import load_run_sets
    from workbench.viewer.site import build_site

    class PagelessEcho(echo_kind.EchoKind):
        world_page = WorldKind.world_page

    register_kind(PagelessEcho())
    try:
        monkeypatch.chdir(tmp_path)
        path = tmp_path / "echo.yaml"
        path.write_text(yaml.safe_dump({"world": "echo", "name": "echo-study", "seed": 4, "worlds_per_cell": 2,
                                        "cells": [{"label": "short", "steps": 2}]}, sort_keys=False))
        assert main(["-q", "run", str(path), "--out", str(tmp_path / "run")]) == 0
        site = build_site(load_run_sets([tmp_path / "run"]), tmp_path / "site", examples=1)
        assert len(site.index.rows) == 2 and len(site.pages) == 1
        html = next((tmp_path / "site" / "worlds" / "r0").glob("*.html")).read_text()
        assert "id='replies'" in html and "id='model-calls'" in html and "could not draw" not in html
    finally:
        echo_kind.uninstall()


def test_a_kind_brings_its_own_page(tmp_path: Path, monkeypatch) -> None:
    """The echo kind's world_page hook draws its worlds' pages in the viewer; nothing in the
    workbench package names it, and its replies are escaped like every model-written text."""
    import yaml

    from tests import echo_kind
    from workbench.cli import main
    from workbench.viewer.data import load_run_sets
    from workbench.viewer.site import build_site

    echo_kind.install()
    try:
        monkeypatch.chdir(tmp_path)
        path = tmp_path / "echo.yaml"
        path.write_text(yaml.safe_dump({"world": "echo", "name": "echo-study", "seed": 4, "worlds_per_cell": 1,
                                        "cells": [{"label": "short", "steps": 2, "script": ["<b>hi</b>", "bye"]}]},
                                       sort_keys=False))
        assert main(["-q", "run", str(path), "--out", str(tmp_path / "run")]) == 0
        build_site(load_run_sets([tmp_path / "run"]), tmp_path / "site", examples=1)
        html = next((tmp_path / "site" / "worlds" / "r0").glob("*.html")).read_text()
        assert "id='echo-turns'" in html and "class='echo-turns'" in html and "id='replies'" not in html
        assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>hi</b>" not in html
    finally:
        echo_kind.uninstall()
