"""The world explorer used as a person would: JupyterLab in headless chromium,
Run All, then a condition toggled with its widget re-runs the world in place.
Runs on a copy of the notebook so that JupyterLab never saves outputs into the
committed one."""
from __future__ import annotations

import os
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


def test_toggle_a_condition_in_jupyterlab(lab):
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
        select = page.locator(".widget-dropdown select").first
        select.wait_for(timeout=120_000)
        page.wait_for_selector(".jp-OutputArea .main-svg", timeout=60_000)  # the timeline is drawn
        summary = page.locator(".widget-html-content", has_text="cross_agent_access").first
        assert "· store ·" in summary.inner_text()
        select.select_option("private")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-html-content')].some(e => e.innerText.includes('· private ·'))",
            timeout=60_000)
        text = summary.inner_text()
        assert "· private ·" in text and "cross_agent_access: False" in text  # private: nobody reads another's value
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "jupyterlab-world-toggled.png"))
        browser.close()
