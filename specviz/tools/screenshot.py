"""`specviz screenshot`: regenerate assets/screenshot.png (Debian's chromium, driven by Playwright, on a local app).

The dashboard runs in this process on a free localhost port with the default pair; the browser runs the first
example prompt with SpecDec++ (so the stop plot fills), opens a round with accepted tokens and saves the page.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from specviz.app import session, ui
from specviz.core.args import output_file, positive
from specviz.core.assets import SCREENSHOT
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
    session.warm_up(session.model_config(session.DEFAULT_PAIR, dtype))
    demo = ui.build_ui().queue(default_concurrency_limit=4, max_size=64)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **ui.launch_options())
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz screenshot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=output_file, default=SCREENSHOT)
    ap.add_argument("--max-new-tokens", type=positive(int), default=16)
    a = ap.parse_args(argv)
    url = serve()
    with browser_page() as page:
        run_default_prompt(page, url, a.max_new_tokens)
        show_accepted_round(page)
        page.screenshot(path=str(a.out), full_page=True)
    print(f"wrote {a.out}")
    return 0
