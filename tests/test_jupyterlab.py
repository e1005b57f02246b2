"""The world explorer used as a person would: JupyterLab in headless chromium, Run
All, then a dropdown changed. Every output of the notebook must then show the new
world, and nothing of the previous one may remain anywhere in it (the explorer
once left a static cell below its widgets showing the world it started with).
The step slider moves the timeline's highlight and the store view together; a
real model's route is typed and the views empty, waiting for Run (never pressed).
Runs on a copy of the notebook so that JupyterLab never saves outputs into the
committed one."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.browser import ARGS, require_browser
from tests.conftest import ROOT

SHOTS = ROOT / "outputs" / "screenshots"
WORLD_ID = re.compile(r"\b[0-9a-f]{10}-\d{4}\b")
NOTEBOOK_TEXT = "() => document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').innerHTML"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "world.ipynb", tmp_path / "notebooks" / "world.ipynb")
    (tmp_path / "params").symlink_to(ROOT / "params")
    port = _free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "IPYTHONDIR": str(tmp_path / "ipy"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    env.pop("JUPYTER_PATH", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/status", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 60 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _summary_world(page) -> str:  # noqa: ANN001 - a playwright page
    """The world id the explorer's summary names (waits until one is shown)."""
    code = page.locator(".jp-OutputArea code", has_text=WORLD_ID).first
    code.wait_for(timeout=60_000)
    return code.inner_text().strip()


def test_changing_a_dropdown_leaves_nothing_of_the_previous_world(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{lab}/lab/tree/notebooks/world.ipynb")
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=60_000)
        time.sleep(3)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        condition = page.locator(".widget-dropdown", has_text="condition").locator("select")
        condition.wait_for(timeout=120_000)
        page.wait_for_selector(".jp-OutputArea .main-svg", timeout=60_000)  # the timeline is drawn
        old = _summary_world(page)
        before = page.evaluate(NOTEBOOK_TEXT)
        assert before.count(old) >= 3  # summary, timeline title, step view, transcripts all name it
        assert condition.input_value() == "store"

        condition.select_option("private")
        page.wait_for_function(
            "old => { const c = [...document.querySelectorAll('.jp-OutputArea code')]"
            ".map(e => e.innerText.trim()).filter(t => /^[0-9a-f]{10}-[0-9]{4}$/.test(t));"
            " return c.length > 0 && !c.includes(old); }", arg=old, timeout=60_000)
        page.wait_for_selector(".jp-OutputArea .main-svg", timeout=60_000)
        new = _summary_world(page)
        after = page.evaluate(NOTEBOOK_TEXT)
        assert new != old
        assert old not in after, "an output of the previous world is still shown"
        assert {m for m in WORLD_ID.findall(after)} == {new}  # every world id on the page is the new one
        assert "· private ·" in after and "cross_agent_access: <b>False</b>" in after  # private: nobody reads another's
        timeline_title = page.locator(".jp-OutputArea .gtitle").first.text_content() or ""
        assert new in timeline_title

        # the step slider drives the timeline's highlight and the store view together
        assert "current step (0)" in after and "<b>step 0 of" in after
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "() => document.querySelector('.jp-Notebook').innerText.includes('store after step 2')", timeout=30_000)
        stepped = page.evaluate(NOTEBOOK_TEXT)
        assert "current step (2)" in stepped and "current step (0)" not in stepped
        assert "store after step 0" not in stepped
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "jupyterlab-world-changed.png"))

        # a real model's route is typed: nothing runs, and the world on show is dropped
        model = page.locator(".jupyter-widgets:has(> label:text-is(\"model\")) input").first
        model.fill("openai/gpt-test-not-called")
        model.press("Enter")
        page.wait_for_function(
            "() => { const t = document.querySelector('.jp-Notebook').innerText;"
            " return t.includes('press Run') && t.includes('waiting for Run'); }", timeout=30_000)
        waiting = page.evaluate(NOTEBOOK_TEXT)
        assert new not in waiting and not WORLD_ID.search(waiting)
        assert page.locator(".jp-OutputArea .main-svg").count() == 0
        browser.close()
