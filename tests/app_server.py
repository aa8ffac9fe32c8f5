"""One in-process dashboard on a free localhost port, shared by the app and browser tests."""

import os
import time

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio.networking  # noqa: E402
import httpx  # noqa: E402

from specviz.tools import screenshot  # noqa: E402

# The tests run the default pair in fp32: on CPUs without native bf16 bf16 matmuls are several times slower,
# and these tests are about the app, not the dtype.
DTYPE = screenshot.DTYPE
_url = None


def _patient_url_ok(url: str) -> bool:
    """gradio's launch() gives its own server 5 x 3 s to answer; a loaded 2-core machine can need more."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.head(url, timeout=30).status_code < 400:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(1)
    return False


def app_url() -> str:
    """Build, queue and launch the dashboard once per test process (default pair loaded first)."""
    global _url
    if _url is None:
        gradio.networking.url_ok = _patient_url_ok
        _url = screenshot.serve(DTYPE)
    return _url
