"""`specviz screenshot`: regenerate the README's pictures (Debian's chromium, driven by Playwright, on a local app).

The dashboard runs in this process on a free localhost port with the default pair. assets/screenshot.png: the
browser runs the first example prompt with SpecDec++ (so the stop plot fills), opens a round with accepted tokens
and saves the page. assets/screenshots/: a sampled DySpec run at budget 32, its tree (tree.png), the inspector
opened by a click on a rejected node (inspector.png) and the tree halfway through its growth replay (growth.png).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from specviz.analysis import verification
from specviz.app import files, held, policy, ui
from specviz.core.args import output_file, positive
from specviz.core.assets import REPORT_SHOT, SCREENSHOT, TREE_SHOTS
from specviz.core.pairs import DEFAULT_PAIR
from specviz.methods.catalog import label

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
DTYPE = "fp32"  # a screenshot is about the page: fp32 runs fast on every CPU


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(dtype: str = DTYPE) -> str:
    """Load the default pair, launch the dashboard on a free localhost port without blocking; its URL."""
    held.warm_up(policy.model_config(DEFAULT_PAIR, dtype))
    demo = ui.build_ui().queue(default_concurrency_limit=4, max_size=64)
    port = free_port()
    demo.launch(
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        quiet=True,
        mcp_server=policy.mcp(),
        **ui.launch_options(),
    )
    return f"http://127.0.0.1:{port}/"


@contextlib.contextmanager
def browser_page(width: int = 1440, height: int = 1000) -> Iterator[object]:
    """A Playwright page in headless Debian chromium (never a downloaded browser), in a throwaway profile."""
    from playwright import sync_api  # optional: a development dependency (requirements-dev.txt)

    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"{CHROMIUM} is missing: apt-get install chromium")
    profile = tempfile.mkdtemp(prefix="specviz-chromium-")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": width, "height": height}
        )
        try:
            page = ctx.new_page()
            page.set_default_timeout(120_000)  # a busy 2-core machine
            yield page
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


def run_default_prompt(page, url: str, max_new: int, dtype: str = DTYPE) -> tuple[float, float]:
    """Open the page, run the first example prompt with SpecDec++ for `max_new` tokens and wait until it is done;
    seconds to the first drawn round and to the end."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)  # the recorded trace, on load
    page.get_by_role("button", name="Sampling and length").click()  # keep the run short on CPU
    box = page.get_by_label("number input for max new tokens")
    box.fill(str(max_new))
    box.press("Enter")
    page.get_by_role("button", name="Model pair").click()
    page.get_by_label(dtype, exact=True).check()
    page.get_by_label("Method").click()  # SpecDec++: the stop plot fills too
    page.get_by_role("option", name=label("specdecpp")).click()
    page.get_by_role("button", name="Run", exact=True).click()
    t0 = time.perf_counter()
    page.wait_for_function("/: round \\d+, /.test(document.querySelector('#sv-status')?.innerText)", timeout=120_000)
    first = time.perf_counter() - t0
    page.wait_for_function(
        "(s => s.startsWith('Done') && !s.includes('Timing'))(document.querySelector('#sv-status')?.innerText || '')",
        timeout=240_000,
    )
    return first, time.perf_counter() - t0


def show_accepted_round(page) -> None:
    """Open a round with accepted draft tokens and fold the controls back: the picture the README shows."""
    accepted = page.locator("#sv-output .token[style*='22, 163, 74']")
    if accepted.count():
        accepted.first.click()
        page.wait_for_timeout(1500)
    page.get_by_role("button", name="Sampling and length").click()
    page.get_by_role("button", name="Model pair").click()
    page.wait_for_timeout(500)


def set_number(page, label_text: str, value) -> None:
    box = page.get_by_label(f"number input for {label_text}")
    box.fill(str(value))
    box.press("Enter")


def run_tree_prompt(page, url: str, budget: int = 32, max_new: int = 24, temperature: float = 1.0) -> None:
    """Open the page and run a sampled DySpec decode at `budget` nodes of the first example prompt, to the end."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
    page.get_by_label("Method").click()
    page.get_by_role("option", name=label("dyspec")).click()
    set_number(page, "tree budget (draft nodes)", budget)
    page.get_by_role("button", name="Sampling and length").click()
    set_number(page, "max new tokens", max_new)
    set_number(page, "temperature (0 = greedy)", temperature)
    page.get_by_role("button", name="Model pair").click()
    page.get_by_label(DTYPE, exact=True).check()
    page.get_by_label("also time autoregressive decoding (for the speedup)").uncheck()
    page.get_by_role("button", name="Sampling and length").click()  # fold the controls back
    page.get_by_role("button", name="Model pair").click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "(document.querySelector('#sv-status')?.innerText || '').startsWith('Done')", timeout=240_000
    )
    page.wait_for_timeout(1000)


NODE_POINT = """kind => {
  const gd = document.querySelector('#sv-tree .js-plotly-plot');
  const t = gd && gd._fullData.find(d => d.meta === kind);
  if (!t || !t.x.length) return null;
  gd.scrollIntoView({block: 'center'});
  const box = gd.getBoundingClientRect(), s = gd._fullLayout._size;
  const i = t.x.length - 1;
  return {x: box.left + s.l + gd._fullLayout.xaxis.l2p(t.x[i]), y: box.top + s.t + gd._fullLayout.yaxis.l2p(t.y[i]),
          node: t.customdata[i]};
}"""


def click_node(page, kind: str) -> str | None:
    """Click the last node of `kind` (a tree status) in the tree plot, as a user would; its name, or None."""
    pt = page.evaluate(NODE_POINT, kind)
    if pt is None:
        return None
    pt = page.evaluate(NODE_POINT, kind)  # positions after the scroll
    page.mouse.click(pt["x"], pt["y"])
    return pt["node"]


def show_rejection(page) -> str | None:
    """Step to a round with a rejected node and click it; the node's name (None: no round had one)."""
    for _ in range(64):
        node = click_node(page, "rejected")
        if node is not None:
            page.wait_for_function(
                f"(document.querySelector('#sv-inspect')?.innerText || '').includes('node {node},')", timeout=30_000
            )
            return node
        page.get_by_role("button", name="next ▶").click()
        page.wait_for_timeout(800)
    return None


def tree_shots(page, out: Path) -> list[Path]:
    """The tree, the inspector at a rejection and the growth halfway, as three pictures in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    show_rejection(page)
    tree, inspect = out / "tree.png", out / "inspector.png"
    page.locator("#sv-tree").screenshot(path=str(tree))
    page.locator("#sv-inspect").screenshot(path=str(inspect))
    n = int(page.get_by_label("number input for Growth replay: step (0 = the verdicts)").get_attribute("max") or 0)
    set_number(page, "Growth replay: step (0 = the verdicts)", max(1, n // 2))
    page.wait_for_function(
        "(document.querySelector('#sv-tree .gtitle')?.textContent || '').includes('how the tree grew')",
        timeout=30_000,
    )
    page.wait_for_timeout(500)
    growth = out / "growth.png"
    page.locator("#sv-tree").screenshot(path=str(growth))
    return [tree, inspect, growth]


def verification_shot(page, url: str, out: Path) -> Path:
    """The sampled tree lesson's verification replay at its first sibling judged against a residual (the tree with
    that node ringed, the step's words and the residual's bars), as one picture in `out`."""
    entry = next(e for e in files.lessons() if e["id"] == "second-sibling")
    _, trace, _ = files.lesson(entry["title"])
    walk = verification.steps(trace, entry["round"])
    k = next((i for i, st in enumerate(walk, 1) if st.after is not None and st.accepted), len(walk))
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
    page.get_by_role("button", name="Lessons (no model needed)").click()
    page.get_by_label(entry["title"]).check()
    page.locator("#sv-vr-next").wait_for(state="visible", timeout=30_000)
    set_number(page, "Verification step (0 = the verdicts)", k)
    page.wait_for_function(
        f"(document.querySelector('#sv-vr-text')?.innerText || '').includes('Step {k} of')", timeout=30_000
    )
    page.wait_for_timeout(800)
    scrolled = page.evaluate("window.scrollY")  # boxes are in the viewport; a full-page clip is in the page
    top = page.locator("#sv-tree").bounding_box()
    bottom = page.locator("#sv-verify").bounding_box()
    shot = out / "verification.png"
    height = bottom["y"] + bottom["height"] - top["y"]
    page.screenshot(
        path=str(shot),
        full_page=True,
        clip={"x": bottom["x"], "y": top["y"] + scrolled, "width": bottom["width"], "height": height},
    )
    return shot


def run_prompt_set(page, url: str, n: int = 2, max_new: int = 12) -> None:
    """Open the page's Prompt set tab and run the picked method over n Spec-Bench prompts, to the end."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
    page.get_by_role("button", name="Sampling and length").click()
    set_number(page, "max new tokens", max_new)
    page.get_by_role("button", name="Model pair").click()
    page.get_by_label(DTYPE, exact=True).check()
    page.get_by_role("tab", name="Prompt set").click()
    set_number(page, "or run the method on the left over N prompts", n)
    page.locator("#sv-set-run").click()
    page.wait_for_function(
        f"(document.querySelector('#sv-set-summary')?.innerText || '').includes('over {n} prompts')", timeout=300_000
    )
    page.wait_for_timeout(500)


def report_shot(page, report: Path, out: Path, height: int = 1500) -> Path:
    """The top of a `specviz report` HTML file, as the README shows it."""
    page.set_viewport_size({"width": 1200, "height": height})
    page.goto(report.resolve().as_uri(), wait_until="load")
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(out))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz screenshot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=output_file, default=SCREENSHOT)
    ap.add_argument("--trees", type=Path, default=TREE_SHOTS, help="folder for the tree, inspector and growth pictures")
    ap.add_argument("--max-new-tokens", type=positive(int), default=16)
    ap.add_argument("--report", type=Path, default=None, help="only photograph this `specviz report` HTML file")
    ap.add_argument(
        "--verification", action="store_true", help="only photograph a lesson's verification replay (verification.png)"
    )
    a = ap.parse_args(argv)
    if a.report is not None:
        if not a.report.is_file():
            print(f"specviz screenshot: error: {a.report} is not a file", file=sys.stderr)
            return 2
        with browser_page() as page:
            shot = report_shot(page, a.report, REPORT_SHOT)
        print(f"wrote {shot}")
        return 0
    url = serve()
    if a.verification:
        with browser_page() as page:
            print(f"wrote {verification_shot(page, url, a.trees)}")
        return 0
    with browser_page() as page:
        run_default_prompt(page, url, a.max_new_tokens)
        show_accepted_round(page)
        page.screenshot(path=str(a.out), full_page=True)
        run_tree_prompt(page, url)
        shots = [*tree_shots(page, a.trees), verification_shot(page, url, a.trees)]
    print(f"wrote {a.out}, " + ", ".join(str(p) for p in shots))
    return 0
