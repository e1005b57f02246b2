"""Opening an HTML file in Debian's headless chromium through playwright, with
every request that would leave the file recorded and refused."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def require_browser() -> str:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs Debian's chromium (make browser)")
    return CHROMIUM


def refuse_network(page: object, left: list[str]) -> None:
    """Let the page load only from the file itself (file:, data:, blob: URLs);
    every other request is refused and its URL appended to ``left``."""
    def guard(route) -> None:  # noqa: ANN001
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            left.append(url)
            route.abort()

    page.route("**/*", guard)  # type: ignore[attr-defined]


@contextmanager
def open_offline(path: Path, width: int = 1300, height: int = 900) -> Iterator[tuple[object, list[str]]]:
    from playwright.sync_api import sync_playwright

    left: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            refuse_network(page, left)
            page.goto(Path(path).resolve().as_uri())
            page.wait_for_timeout(2500)
            yield page, left
        finally:
            browser.close()
