"""One in-process dashboard on a free localhost port, shared by the app and browser tests."""
import os
import socket
import time

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The tests run the default pair in fp32: on CPUs without native bf16 (like this one) bf16 matmuls are
# several times slower, and these tests are about the app, not the dtype.
DTYPE = "fp32"
_url = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _patient_url_ok(url: str) -> bool:
    """gradio's launch() gives its own server 5 x 3 s to answer; a loaded 2-core machine can need more."""
    import httpx
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
    """Build, queue and launch app.py's Blocks once per test process (default pair loaded first)."""
    global _url
    if _url is None:
        import gradio.networking

        import app
        from specviz import session
        gradio.networking.url_ok = _patient_url_ok
        session.warm_up(session.model_config(session.DEFAULT_PAIR, DTYPE))
        demo = app.build_ui().queue(default_concurrency_limit=4, max_size=64)
        port = free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **app.launch_options())
        _url = f"http://127.0.0.1:{port}/"
    return _url
