"""A Space's first visitor: `python app.py` as a Space runs it (SPACE_ID set: a public page) opens on the first
lesson; in Debian's chromium a teacher then opens the sampled tree lesson and steps its verification replay to the
end, each step's sentence on screen and the node it judges (or the token it draws) ringed in the tree."""

import os
import re

import pytest

from specviz.analysis.verification import END, steps
from specviz.app import files
from specviz.tools import screenshot
from specviz.tools.pagecost import serve_app
from specviz.viz.tree import NEWEST_BORDER
from specviz.viz.verification import sentence

pytestmark = pytest.mark.slow

RINGED = (
    "(() => { const gd = document.querySelector('#sv-tree .js-plotly-plot');"
    f" return ((gd && gd.layout && gd.layout.annotations) || []).filter(a => a.bordercolor === '{NEWEST_BORDER}')"
    ".length; })()"
)


@pytest.fixture(scope="module")
def space_page():
    if not os.path.exists(screenshot.CHROMIUM):
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    proc, url = serve_app({"SPACE_ID": "someone/specviz", "SPECVIZ_PUBLIC": "1"})  # as a Space is by default
    try:
        with screenshot.browser_page() as page:
            page.goto(url, wait_until="domcontentloaded")
            yield page
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def plain(markdown: str) -> str:
    return re.sub(r"[*`]", "", markdown)


def test_a_space_opens_on_the_first_lesson(space_page):
    first = files.lessons()[0]
    space_page.wait_for_function(
        "(document.querySelector('#sv-status')?.innerText || '').includes('Lesson:')", timeout=120_000
    )
    assert first["title"] in space_page.locator("#sv-status").inner_text()
    assert space_page.get_by_label(first["title"]).is_checked()


def test_step_a_sampled_tree_lesson_to_its_end(space_page, tmp_path):
    entry = next(e for e in files.lessons() if e["id"] == "second-sibling")
    _, trace, _ = files.lesson(entry["title"])
    walk = steps(trace, entry["round"])
    space_page.get_by_label(entry["title"]).check()
    space_page.wait_for_function(
        f"(document.querySelector('#sv-status')?.innerText || '').includes({entry['title']!r})", timeout=60_000
    )
    nxt = space_page.locator("#sv-vr-next")
    nxt.wait_for(state="visible", timeout=30_000)  # the lesson opened the replay
    for k, st in enumerate(walk, 1):
        nxt.click()
        words = plain(sentence(st, trace.token_text)[0])[:40]
        space_page.wait_for_function(
            f"(t => t.includes('Step {k} of {len(walk)}') && t.includes({words!r}))"
            "(document.querySelector('#sv-vr-text')?.innerText || '')",
            timeout=30_000,
        )
        if st.kind != END:
            space_page.wait_for_function(f"{RINGED} === 1", timeout=30_000)  # one node ringed: the one judged
    space_page.screenshot(path=str(tmp_path / "verification.png"), full_page=True)
