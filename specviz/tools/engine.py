"""`specviz engine`: record a served engine's speculative decoding over a prompt set, and explain it with specviz.

    specviz engine --url http://127.0.0.1:8000 --prompts prompts.jsonl --max-new-tokens 96 --temperature 0 \\
        --target pair/target --draft pair/draft --reference --out run.json

The server is an OpenAI-compatible one that returns token ids and per-request speculative metrics (vLLM with
--per-request-spec-decode-metrics detailed; docs/engines.md). RUN.json (docs/engine-run.schema.json) holds per
prompt the engine's output ids and per-step accepted / drafted counts, unchanged, and with --reference specviz's
free run with the same folders, its count at each of the engine's steps and the reason for each difference. Every
argument is checked before the server is asked; the file is written whole at the end, or not at all.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.analysis.engine_run import add_reference, record
from specviz.analysis.served import acceptance_length, pooled_steps, reason_counts
from specviz.core.args import output_file, positive
from specviz.core.config import DTYPES, ModelConfig, SamplingConfig
from specviz.core.output import replacing
from specviz.core.prompts import read_prompts, stratified
from specviz.core.server import ServerError, check_url, probe
from specviz.models.loading import load_pair
from specviz.viz.served import sampled_note


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specviz engine", description=__doc__.split("\n\n")[0].split("`: ", 1)[-1])
    ap.add_argument("--url", required=True, help="the server's address, such as http://127.0.0.1:8000")
    ap.add_argument("--prompts", required=True, help="JSON-lines prompts (Spec-Bench shape: a 'turns' list per line)")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--limit", type=positive(int), default=None, help="only the first N prompts")
    pick.add_argument(
        "--n-prompts",
        type=positive(int),
        default=None,
        help="N prompts balanced over the file's tasks, as `specviz bench` draws them (seed 0)",
    )
    ap.add_argument("--max-new-tokens", type=positive(int), required=True)
    ap.add_argument("--temperature", type=float, required=True, help="0: greedy")
    ap.add_argument("--seed", type=int, default=None, help="the request's seed (sampled runs)")
    ap.add_argument("--target", default=None, help="the target folder the server loaded (for --reference)")
    ap.add_argument("--draft", default=None, help="the draft folder the server loaded (for --reference)")
    ap.add_argument("--reference", action="store_true", help="add specviz's reference and step-by-step comparison")
    ap.add_argument(
        "--dtype", choices=DTYPES, default="bf16", help="the reference's dtype: the server's (default bf16)"
    )
    ap.add_argument("--timeout", type=positive(float), default=300.0, help="seconds one request may take")
    ap.add_argument("--threads", type=positive(int), default=None, help="torch CPU threads for the reference")
    ap.add_argument("--out", required=True, type=output_file, help="the run file (JSON) to write")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def check_args(a: argparse.Namespace) -> list[dict]:
    """Everything that can be checked before the server is asked; the prompts read."""
    check_url(a.url)
    SamplingConfig(temperature=a.temperature)  # the sampling settings' own checks, with their sentences
    if a.reference and (a.target is None or a.draft is None):
        raise ValueError(
            "--reference needs --target and --draft: the folders the server loaded (`specviz export` writes them)"
        )
    for what, d in (("target", a.target), ("draft", a.draft)):
        if d is not None and not (Path(d) / "config.json").is_file():
            raise ValueError(f"--{what} {d} is not a model folder (no config.json)")
    rows = read_prompts(a.prompts, a.limit)
    return stratified(rows, a.n_prompts, 0) if a.n_prompts else rows


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    say = lambda m: print(m, file=sys.stderr)
    try:
        prompts = check_args(a)
        server = probe(a.url)
        say(f"specviz engine: {server.name} {server.version} at {server.url} serves {server.model}")
        bars: dict[str, tqdm] = {}

        def progress(done: int, total: int, what: str) -> None:
            if what not in bars:
                bars[what] = tqdm(total=total, desc=what, unit="prompt", disable=a.quiet, file=sys.stderr)
            bar = bars[what]
            bar.update(done - bar.n)

        settings = {"prompts": str(a.prompts), "limit": a.limit, "n_prompts": a.n_prompts}
        settings |= {"target": a.target, "draft": a.draft}
        t0 = time.perf_counter()
        run = record(server, prompts, a.max_new_tokens, a.temperature, a.seed, a.timeout, progress, settings)
        if a.reference:
            if a.threads:
                torch.set_num_threads(a.threads)
            pair = load_pair(ModelConfig(target=a.target, draft=a.draft, eagle="none", dtype=a.dtype), say)
            run = add_reference(run, pair, progress)
        for bar in bars.values():
            bar.close()
    except (ServerError, ValueError, FileNotFoundError) as e:
        say(f"specviz engine: error: {e}")
        return 2
    with replacing(a.out) as f:
        f.write(run.model_dump_json(indent=None) + "\n")
    length = lambda reference=False: f"{acceptance_length(pooled_steps(run, reference)[0]) or float('nan'):.3f}"
    say(
        f"specviz engine: {len(run.prompts)} prompts in {time.perf_counter() - t0:.0f} s; engine acceptance length "
        f"{length()} ({run.label})"
    )
    if a.reference:
        parted = sum(p.reference.first_difference is not None for p in run.prompts)
        say(
            f"  specviz at the engine's steps: {length(True)}; {parted} of {len(run.prompts)} prompts part "
            f"somewhere; reasons: {reason_counts(run) or 'none'}"
        )
        if note := sampled_note(run):
            say(f"  {note}")
    say(f"  wrote {a.out}")
    return 0
