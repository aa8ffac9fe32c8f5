"""Headless Debian chromium (driven by Playwright, never a downloaded browser) opens the dashboard, runs the
default prompt, checks that the tree and stop-probability plots rendered, saves assets/screenshot.png, and opens
the stop head's calibration tab (its screenshot in the temp folder)."""
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from app_server import DTYPE, app_url  # noqa: E402

from specviz.config import METHOD_LABELS  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parent.parent / "assets" / "screenshot.png"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-dev-shm-usage"]
MAX_NEW = 16


@pytest.fixture(scope="module")
def page():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tempfile.mkdtemp(prefix="specviz-chromium-")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                    viewport={"width": 1440, "height": 1000})
        try:
            page = ctx.new_page()
            page.set_default_timeout(120_000)                                       # a busy 2-core machine
            yield page
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


def test_run_default_prompt_draws_tree_and_stop_plot(page):
    page.goto(app_url(), wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)          # the recorded trace, on load
    page.get_by_role("button", name="Sampling and length").click()                # keep the run short on CPU
    box = page.get_by_label("number input for max new tokens")
    box.fill(str(MAX_NEW))
    box.press("Enter")
    page.get_by_role("button", name="Model pair").click()
    page.get_by_label(DTYPE, exact=True).check()
    page.get_by_label("Method").click()                                            # SpecDec++: the stop plot fills too
    page.get_by_role("option", name=METHOD_LABELS["specdecpp"]).click()
    page.get_by_role("button", name="Run", exact=True).click()
    t0 = time.perf_counter()
    page.wait_for_function("/: round \\d+, /.test(document.querySelector('#sv-status')?.innerText)", timeout=120_000)
    first_tree = time.perf_counter() - t0
    page.wait_for_function("(s => s.startsWith('Done') && !s.includes('Timing'))"
                           "(document.querySelector('#sv-status')?.innerText || '')", timeout=240_000)
    total = time.perf_counter() - t0
    for plot in ("#sv-tree", "#sv-stop"):
        assert page.locator(f"{plot} .js-plotly-plot .main-svg").count() > 0, plot
    assert page.locator("#sv-tree .annotation").count() >= 2                    # token chips drawn
    title = "document.querySelector('#sv-tree .gtitle')?.textContent || ''"
    last = page.get_by_label("number input for Round").get_attribute("max")
    page.locator("#sv-output .token").last.click()                               # the last token -> last round
    page.wait_for_function(f"({title}).startsWith('Round {last}:')", timeout=30_000)
    shown = page.get_by_label("number input for Round").input_value()
    assert shown == last and int(shown) > 0
    page.get_by_role("button", name="◀ previous").click()                        # the stepper
    page.wait_for_function(f"({title}).startsWith('Round {int(shown) - 1}:')", timeout=30_000)
    resampled = page.locator("#sv-output .token[style*='245, 158, 11']")          # a round with a rejection
    if resampled.count():
        resampled.first.click()
        page.wait_for_timeout(1500)
        shown = page.get_by_label("number input for Round").input_value()
        assert page.evaluate(title).startswith(f"Round {shown}:")
    accepted = page.locator("#sv-output .token[style*='22, 163, 74']")            # the screenshot: a round with accepts
    if accepted.count():
        accepted.first.click()
        page.wait_for_timeout(1500)
    assert page.locator("#sv-stop .js-plotly-plot .scatterlayer .trace").count() > 0   # predicted stop probabilities
    page.get_by_role("button", name="Sampling and length").click()                # fold the controls back
    page.get_by_role("button", name="Model pair").click()
    page.wait_for_timeout(500)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    page.get_by_role("tab", name="Stop head").click()                             # the head's calibration
    page.wait_for_selector("#sv-calib .js-plotly-plot .scatterlayer .trace", timeout=30_000)
    assert "candidates judged" in page.locator("#sv-calib .js-plotly-plot").inner_text()
    page.screenshot(path=str(Path(tempfile.gettempdir()) / "specviz-stop-head.png"), full_page=True)
    print(f"time to first tree {first_tree:.1f} s; whole run {total:.1f} s")
