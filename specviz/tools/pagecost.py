"""`specviz pagecost`: what the dashboard's own work costs beside the decode it shows, in one run on one machine.

For each setting, the same prompt and settings decode twice, alternately: through the library, as `specviz
generate` runs it (in this process), and through the page's /run endpoint (gradio_client against `python app.py`
started on a free local port in a process of its own, as a browser's page would be served; the autoregressive
comparison off). Reported per setting: the decode loop's tokens/s in each (tokens over the
rounds' draft + verify + overhead time, read from each trace), their ratio, the request's wall time from submit to
its last update against the page run's own decode time (prefill included), and the whole-call speedup each shows
against an autoregressive run of the same prompt. Prints one JSON record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import httpx
from gradio_client import Client

from specviz.analysis.metrics import speedup, time_split
from specviz.app import held, policy
from specviz.core.args import output_file, positive
from specviz.core.assets import REPO
from specviz.core.config import RunConfig, SamplingConfig
from specviz.core.output import replacing
from specviz.core.pairs import DEFAULT_PAIR
from specviz.core.prompts import encode_prompt
from specviz.core.trace import GenerationTrace
from specviz.engine.record import generate
from specviz.methods.catalog import with_knobs
from specviz.tools import screenshot

D = RunConfig()
SETTINGS = {  # name: (method, knobs, temperature, max new tokens)
    "dyspec-32-T1-128": ("dyspec", {"budget": 32}, 1.0, 128),
    f"{D.method}-T0-512": (D.method, {}, 0.0, 512),
}
PROMPT = "Write a detailed travel guide to Kyoto: where to stay, what to eat, and a day-by-day plan for a week."


def loop_tokens_per_s(trace) -> float:
    s = time_split(trace)
    return len(trace.output_ids) / max(s.total_ms - s.other_ms, 1e-9) * 1e3


def measure(client: Client, pair, name: str, repeats: int, dtype: str) -> dict:
    method, knobs, temperature, n = SETTINGS[name]
    run = with_knobs(
        RunConfig(method=method, max_new_tokens=n, sampling=SamplingConfig(temperature=temperature)), method, knobs
    )
    ids = encode_prompt(pair.tokenizer, PROMPT)
    ar = generate(pair, ids, RunConfig(method="ar", max_new_tokens=n, sampling=run.sampling))
    cli, page, walls = [], [], []
    for _ in range(repeats):
        cli.append(generate(pair, ids, run))
        t0 = time.perf_counter()
        out = client.predict(
            prompt=PROMPT, method=method, temperature=temperature, max_new_tokens=n, compare=False, dtype=dtype,
            api_name="/run",
            **{"k": run.chain.k, "budget": run.dyspec.budget, **knobs},
        )  # fmt: skip
        walls.append(time.perf_counter() - t0)
        page.append(GenerationTrace.from_dict(out[-1]))
    best = lambda xs: max(xs)  # noqa: E731  (the least disturbed of the repeats)
    cli_tps, page_tps = best([loop_tokens_per_s(t) for t in cli]), best([loop_tokens_per_s(t) for t in page])
    wall_over_decode = min(w / (t.total_ms / 1e3) for w, t in zip(walls, page))
    return {
        "tokens": len(page[-1].output_ids),
        "cli_loop_tokens_per_s": round(cli_tps, 2),
        "page_loop_tokens_per_s": round(page_tps, 2),
        "page_over_cli": round(page_tps / cli_tps, 3),
        "request_wall_s": [round(w, 2) for w in walls],
        "page_decode_s": [round(t.total_ms / 1e3, 2) for t in page],
        "wall_over_decode": round(wall_over_decode, 3),
        "speedup_cli": round(max(speedup(t, ar) for t in cli), 3),
        "speedup_page": round(max(speedup(t, ar) for t in page), 3),
    }


def serve_app(extra_env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """`python app.py` on a free localhost port (with `extra_env`: SPACE_ID, say), waited for (the default pair
    loads first); (process, URL)."""
    port = screenshot.free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1", **(extra_env or {})}
    proc = subprocess.Popen([sys.executable, str(REPO / "app.py")], env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.head(url, timeout=10).status_code < 400:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    raise RuntimeError(f"the dashboard did not come up on {url}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz pagecost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--repeats", type=positive(int), default=2)
    ap.add_argument("--dtype", default="auto", choices=("auto", "fp32", "bf16"))
    ap.add_argument("--out", type=output_file, default=None, help="also write the JSON record here")
    a = ap.parse_args(argv)
    proc, url = serve_app()
    try:
        client = Client(url, verbose=False)
        pair = held.loaded(policy.model_config(DEFAULT_PAIR, a.dtype))
        settings = {n: measure(client, pair, n, a.repeats, a.dtype) for n in a.settings}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    record = {"dtype": pair.info["dtype"], "settings": settings}
    text = json.dumps(record, indent=1)
    print(text)
    if a.out:
        with replacing(a.out) as f:
            f.write(text + "\n")
    return 0
