"""Headless Debian chromium (driven by Playwright, never a downloaded browser) opens the dashboard, runs the
default prompt, checks that the tree and stop-probability plots rendered, takes the README's screenshot into a
temporary folder (`specviz screenshot` regenerates assets/screenshot.png), and opens the stop head's calibration
tab."""

import os

import pytest
from app_server import DTYPE, app_url

from specviz.methods.catalog import label
from specviz.tools import screenshot
from specviz.tools.families import save_pair

pytestmark = pytest.mark.slow  # the real default pair / a browser: outside the quick loop

MAX_NEW = 16


@pytest.fixture(scope="module")
def page():
    if not os.path.exists(screenshot.CHROMIUM):
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    with screenshot.browser_page() as page:
        yield page


def test_run_default_prompt_draws_tree_and_stop_plot(page, tmp_path):
    first_tree, total = screenshot.run_default_prompt(page, app_url(), MAX_NEW, DTYPE)
    for plot in ("#sv-tree", "#sv-stop"):
        assert page.locator(f"{plot} .js-plotly-plot .main-svg").count() > 0, plot
    assert page.locator("#sv-tree .annotation").count() >= 2  # token chips drawn
    title = "document.querySelector('#sv-tree .gtitle')?.textContent || ''"
    last = page.get_by_label("number input for Round").get_attribute("max")
    page.locator("#sv-output .token").last.click()  # the last token -> last round
    page.wait_for_function(f"({title}).startsWith('Round {last}:')", timeout=30_000)
    shown = page.get_by_label("number input for Round").input_value()
    assert shown == last and int(shown) > 0
    page.get_by_role("button", name="◀ previous").click()  # the stepper
    page.wait_for_function(f"({title}).startsWith('Round {int(shown) - 1}:')", timeout=30_000)
    resampled = page.locator("#sv-output .token[style*='245, 158, 11']")  # a round with a rejection
    if resampled.count():
        page.evaluate("document.querySelector('#sv-tree .gtitle').textContent = ''")  # stale until redrawn
        resampled.first.click()
        box = "document.querySelector(\"input[aria-label='number input for Round']\")"
        page.wait_for_function(
            f"(() => {{ const t = {title}, i = {box}; "
            "return t !== '' && i && t.startsWith('Round ' + i.value + ':'); })()",
            timeout=30_000,
        )
    screenshot.show_accepted_round(page)  # the screenshot: a round with accepts
    assert page.locator("#sv-stop .js-plotly-plot .scatterlayer .trace").count() > 0  # predicted stop probabilities
    page.screenshot(path=str(tmp_path / "screenshot.png"), full_page=True)
    assert (tmp_path / "screenshot.png").stat().st_size > 50_000
    page.get_by_role("tab", name="Stop head").click()  # the head's calibration
    page.wait_for_selector("#sv-calib .js-plotly-plot .scatterlayer .trace", timeout=30_000)
    assert "candidates judged" in page.locator("#sv-calib .js-plotly-plot").inner_text()
    page.screenshot(path=str(tmp_path / "stop-head.png"), full_page=True)
    print(f"time to first tree {first_tree:.1f} s; whole run {total:.1f} s")


def test_click_a_rejected_node_of_a_budget_32_tree_to_see_its_residual(page, tmp_path):
    """DySpec at budget 32, sampled: a click on an accepted node, then on a rejected one, opens each in the
    inspector; the rejected one's panel shows q against p, its uniform draw and the residual after it."""
    screenshot.run_tree_prompt(page, app_url(), budget=32, max_new=MAX_NEW)
    assert page.locator("#sv-tree .annotation").count() > 8
    accepted = screenshot.click_node(page, "accepted")
    if accepted is not None:
        page.wait_for_function(
            f"(document.querySelector('#sv-inspect')?.innerText || '').includes('node {accepted},')", timeout=30_000
        )
        assert "accepted draft token" in page.locator("#sv-inspect").inner_text()
    node = screenshot.show_rejection(page)
    assert node is not None, "no round of the run had a rejected node"
    text = page.locator("#sv-inspect").inner_text()
    assert "rejected draft token" in text and "uniform draw u" in text
    assert "q: the draft's distribution" in text and "p: the target's distribution" in text
    assert "residual norm(max(0, p − q)) after rejecting" in text
    shots = screenshot.tree_shots(page, tmp_path)
    assert "how the tree grew" in page.evaluate("document.querySelector('#sv-tree .gtitle')?.textContent || ''")
    assert all(p.stat().st_size > 10_000 for p in shots)


def test_the_prompt_set_tab_runs_a_set_and_opens_a_prompts_rounds(page, tmp_path):
    """The Prompt set tab runs the picked method over two Spec-Bench prompts with a progress bar, draws the set's
    figures and table; a click on a prompt opens its rounds in the round view; a wrong file gets a sentence."""
    screenshot.run_prompt_set(page, app_url(), n=2, max_new=12)
    assert page.locator("#sv-set-table .virtual-row").count() == 2
    for plot in ("#sv-set-pos", "#sv-set-tau", "#sv-set-q"):
        assert page.locator(f"{plot} .js-plotly-plot .main-svg").count() > 0, plot
    page.locator("#sv-set-table [data-testid=cell-1-0]").click()
    page.wait_for_function(
        "(document.querySelector('#sv-status')?.innerText || '').includes('of the set')", timeout=30_000
    )
    page.screenshot(path=str(tmp_path / "prompt-set.png"), full_page=True)
    bad = tmp_path / "not-traces.jsonl"
    bad.write_text('{"turns": ["a prompt, not a trace"]}\n')
    page.locator("#sv-set-tab input[type=file]").first.set_input_files(str(bad))
    page.wait_for_selector("text=could not read that traces file", timeout=30_000)


def test_train_a_head_for_a_local_pair_then_run_specdecpp(page, tmp_path):
    """A tiny local pair without a head: SpecDec++ asks for one, the page trains it (the quick preset, with its
    progress), and SpecDec++ then runs on the same loaded pair."""
    target, draft = save_pair("llama", tmp_path)
    page.goto(app_url(), wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
    page.get_by_role("button", name="Sampling and length").click()
    screenshot.set_number(page, "max new tokens", 8)
    page.get_by_role("button", name="Model pair").click()
    page.get_by_label("fp32", exact=True).check()
    page.get_by_label("target (local folder or hub id; overrides the pair)").fill(str(target))
    page.get_by_label("draft (local folder or hub id)").fill(str(draft))
    page.get_by_label("Method").click()
    page.get_by_role("option", name=label("specdecpp")).click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("text=needs an acceptance head", timeout=120_000)  # the error names what to do
    page.locator("#sv-train-head").click()
    page.wait_for_selector("#sv-head-note .progress-text, #sv-head-note .eta-bar", timeout=60_000)  # the progress bar
    page.wait_for_function(
        "(document.querySelector('#sv-head-note')?.innerText || '').includes('held-out AUC')", timeout=300_000
    )
    assert (draft / "acceptance_head.safetensors").exists()  # where SpecDec++ looks for it
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "(s => s.startsWith('Done') && !s.includes('Timing'))(document.querySelector('#sv-status')?.innerText || '')",
        timeout=240_000,
    )
    assert "8 tokens" in page.locator("#sv-status").inner_text()
