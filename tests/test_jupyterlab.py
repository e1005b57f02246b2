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


def _settle(page, status: str, *, absent: str = "", present: tuple[str, ...] = ()) -> str:  # noqa: ANN001
    """Wait until the explorer's busy line (set last, after every view is drawn) matches
    ``status`` (a regular expression) and the notebook holds ``present`` but not
    ``absent``; return the notebook's HTML. Whatever still shows ``absent`` after 60 s
    fails the test, with what was on the page."""
    js = ("([status, absent, present]) => { const s = document.querySelector('.wb-explorer-status');"
          " const html = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').innerHTML;"
          " return !!s && new RegExp(status).test(s.innerText) && (!absent || !html.includes(absent))"
          " && present.every(p => html.includes(p)); }")
    try:
        page.wait_for_function(js, arg=[status, absent, list(present)], timeout=60_000)
    except Exception:  # noqa: BLE001 - report what the page showed instead
        html = page.evaluate(NOTEBOOK_TEXT)
        at = html.find(absent) if absent else -1
        pytest.fail(f"the explorer did not settle on {status!r} without {absent!r} and with {present!r}; "
                    f"status {page.locator('.wb-explorer-status').inner_text()!r}; "
                    + (f"{absent!r} still shown in: ...{html[max(0, at - 300): at + 200]}..." if at >= 0 else ""))
    return page.evaluate(NOTEBOOK_TEXT)


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
        old = _summary_world(page)
        before = _settle(page, f"world {old} ", present=('class="main-svg"', f"world {old} ·", "current step (0)"))
        assert before.count(old) >= 4  # summary, timeline title, step view and transcripts all name it
        assert condition.input_value() == "store"

        condition.select_option("private")
        after = _settle(page, r"world [0-9a-f]{10}-\d{4} ", absent=old, present=('class="main-svg"', "· private ·"))
        new = _summary_world(page)
        assert new != old
        assert old not in after, "an output of the previous world is still shown"
        assert set(WORLD_ID.findall(after)) == {new}  # every world id on the page is the new one
        assert "cross_agent_access: <b>False</b>" in after  # private: nobody reads another's entry
        assert after.count(new) >= 4

        # the step slider drives the timeline's highlight and the store view together
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        stepped = _settle(page, f"world {new} ", absent="current step (0)",
                          present=("current step (2)", "store after step 2", "<b>step 2 of"))
        assert "store after step 0" not in stepped
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "jupyterlab-world-changed.png"))

        # a real model's route is typed: nothing runs, and the world on show is dropped
        model = page.locator(".jupyter-widgets:has(> label:text-is(\"model\")) input").first
        model.fill("openai/gpt-test-not-called")
        model.press("Enter")
        waiting = _settle(page, "waiting for Run", absent=new, present=("press Run",))
        assert not WORLD_ID.search(waiting) and page.locator(".jp-OutputArea svg.main-svg").count() == 0
        browser.close()


def test_dollar_values_are_shown_as_written_not_typeset(lab, tmp_path):
    """A value such as ``$240,000 | $240,000`` (a recall's ground truth) in a block the
    package renders stays as written in JupyterLab: every block carries the class
    MathJax skips. A paragraph without it, beside, is typeset: MathJax is on here."""
    import nbformat
    from playwright.sync_api import sync_playwright

    money = "$240,000 | $240,000"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import pandas as pd\n"
        "from IPython.display import HTML, display\n"
        "from workbench.views.readable import readable_html\n"
        f"display(HTML(readable_html(pd.DataFrame({{'accepted': [{money!r}], 'n': [1]}}), caption={money!r})))\n"
        "display(HTML('<p id=\"wb-control\">$x^2 + y$</p>'))")]
    nbformat.write(nb, tmp_path / "notebooks" / "money.ipynb")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_browser(), args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"{lab}/lab/tree/notebooks/money.ipynb")
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=60_000)
        time.sleep(2)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        page.locator("#wb-control mjx-container").first.wait_for(timeout=90_000)  # MathJax typeset the control
        table = page.locator(".jp-OutputArea table.wb-table").first
        caption = page.locator(".jp-OutputArea p.wb-caption").first
        assert money in table.inner_text() and money in caption.inner_text()
        assert page.locator(".jp-OutputArea .wb-table-box mjx-container, .jp-OutputArea p.wb-caption mjx-container"
                            ).count() == 0
        browser.close()
