"""`specviz loadtest`: the dashboard under load, through gradio_client against a local server in this process.

Measures what a public Space needs: concurrent clients all served with their queue positions and identical
outputs for identical seeds, Stop in the middle of a long run (and in the autoregressive baseline) freeing the
model for the next request within a round, resident memory over many requests with trace uploads among them,
and the export folder and Gradio's cache staying bounded. Prints one JSON record.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from gradio_client import Client, handle_file

from specviz.app import exports, files
from specviz.core.args import output_file, positive
from specviz.core.config import RunConfig
from specviz.core.output import replacing
from specviz.tools import screenshot

D = RunConfig()


def run_kwargs(prompt: str, max_new: int, **kw) -> dict:
    return {"prompt": prompt, "method": "chain", "max_new_tokens": max_new, "compare": False, "api_name": "/run", **kw}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() else 0.0


def concurrent(url: str, clients: int, requests: int) -> dict:
    """`clients` clients at once, `requests` each, all with the same prompt and seed (sampled, T = 1)."""

    def one(i: int) -> tuple[list[str], int]:
        c = Client(url, verbose=False)
        statuses, rank = [], 0
        for _ in range(requests):
            job = c.submit(**run_kwargs("Count to five.", 8, temperature=1.0, seed=7))
            while not job.done():
                rank = max(rank, job.status().rank or 0)
                time.sleep(0.05)
            out = job.result()
            statuses.append(json.dumps(out[2]))  # the output tokens, coloured by origin
        return statuses, rank

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, range(clients)))
    outputs = {s for r, _ in results for s in r}
    return {
        "clients": clients,
        "requests_each": requests,
        "served": sum(len(r) for r, _ in results),
        "distinct_outputs": len(outputs),
        "max_queue_position": max(k for _, k in results),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def cancel(url: str, compare: bool) -> dict:
    """Stop a 400-token run after its first rounds (or, with `compare`, in its baseline); seconds until the next
    request (2 tokens) is done, and that request's own decode time."""
    c = Client(url, verbose=False)
    job = c.submit(**run_kwargs("Write a long story about a lighthouse.", 400 if not compare else 128, compare=compare))
    want = "Timing" if compare else "round"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(want in str(o[0]) for o in job.outputs() if o):
        time.sleep(0.1)
    job.cancel()
    t0 = time.perf_counter()
    out = c.predict(**run_kwargs("Name a colour.", 2))
    return {
        "phase": "baseline" if compare else "decode",
        "next_request_s": round(time.perf_counter() - t0, 2),
        "next_status": out[0][:60],
    }


def memory(url: str, n: int, trace_file: Path) -> dict:
    """RSS before and after `n` requests, every fourth a trace upload."""
    c = Client(url, verbose=False)
    proc = psutil.Process(os.getpid())
    for _ in range(5):  # warm-up: first calls allocate caches for good
        c.predict(**run_kwargs("Say hi.", 1))
    before = proc.memory_info().rss
    for i in range(n):
        if i % 4 == 3:
            c.predict(handle_file(str(trace_file)), api_name="/import_trace")
        else:
            c.predict(**run_kwargs(f"Say hi to {i}.", 1))
    after = proc.memory_info().rss
    return {
        "requests": n,
        "uploads": n // 4,
        "rss_mb_before": round(before / 1e6, 1),
        "rss_mb_after": round(after / 1e6, 1),
        "growth": round(after / before - 1, 4),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz loadtest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=positive(int), default=8)
    ap.add_argument("--requests", type=positive(int), default=3, help="requests per client")
    ap.add_argument("--memory-requests", type=positive(int), default=100)
    ap.add_argument("--out", type=output_file, default=None, help="also write the record here (JSON)")
    a = ap.parse_args(argv)
    gradio_cache = Path(os.environ.get("GRADIO_TEMP_DIR", Path(tempfile.gettempdir()) / "gradio"))
    cache_before, export_before = folder_mb(gradio_cache), folder_mb(exports.FOLDER)
    url = screenshot.serve()
    trace_file = next(iter(files.recorded().values()))
    result = {
        "concurrent": concurrent(url, a.clients, a.requests),
        "cancel": [cancel(url, compare=False), cancel(url, compare=True)],
        "memory": memory(url, a.memory_requests, trace_file),
        "export_folder_mb_added": round(folder_mb(exports.FOLDER) - export_before, 2),
        "gradio_cache_mb_added": round(folder_mb(gradio_cache) - cache_before, 2),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with replacing(a.out) as f:
            f.write(text + "\n")
    return 0
