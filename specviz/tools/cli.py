"""The command line: `specviz COMMAND ...` (the same as `python -m specviz COMMAND ...`).

`generate` writes GenerationTrace JSON lines (a stable interface other tools read); the other commands are the
measuring tools, each with its own --help.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import torch
from tqdm import tqdm

from specviz.core.args import add_holding_flags, holding_options, positive
from specviz.core.config import (
    DRAFTERS,
    DTYPES,
    ModelConfig,
    RunConfig,
    SamplingConfig,
)
from specviz.core.output import check_output, replacing
from specviz.core.prompts import check_text, encode_prompt, read_prompts
from specviz.engine.record import generate
from specviz.methods.catalog import METHODS, with_knobs
from specviz.models.loading import load_pair
from specviz.tools.acceptance import main as acceptance_main
from specviz.tools.bench.run import main as bench_main
from specviz.tools.budget import main as budget_main
from specviz.tools.copy_calibration import main as copy_calibration_main
from specviz.tools.engine import main as engine_main
from specviz.tools.export import main as export_main
from specviz.tools.families import main as families_main
from specviz.tools.lessons import main as lessons_main
from specviz.tools.loadtest import main as loadtest_main
from specviz.tools.lookup_priors import main as lookup_priors_main
from specviz.tools.pagecost import main as pagecost_main
from specviz.tools.record import main as record_main
from specviz.tools.report import main as report_main
from specviz.tools.screenshot import main as screenshot_main
from specviz.tools.sweep import main as sweep_main
from specviz.train.__main__ import main as train_main

_D = RunConfig()


def run_config(a: argparse.Namespace) -> RunConfig:
    """The flags -> a RunConfig: each flag sets the knob of that name on the chosen method (methods.catalog);
    --k is the chain's and prompt lookup's K and the heuristic's start K."""
    run = RunConfig(
        method=a.method,
        max_new_tokens=a.max_new_tokens,
        drafter=a.drafter,
        record_top=a.record_top,
        sampling=SamplingConfig(temperature=a.temperature, top_k=a.top_k, top_p=a.top_p, seed=a.seed),
    )
    if a.method == "heuristic" and a.k is not None:  # a start K past the schedule's cap raises the cap
        run = replace(run, heuristic=replace(run.heuristic, max_k=max(run.heuristic.max_k, a.k)))
    return with_knobs(
        run,
        a.method,
        {
            "k": a.k,
            "start_k": a.k,
            "h": a.threshold,
            "k_max": a.k_max,
            "budget": a.budget,
            "width": a.width,
            "depth": a.depth,
            "copy": a.copy,
        },
    )


def _generate_parser(sub):
    p = sub.add_parser("generate", help="decode prompts with one method and write GenerationTrace JSON lines")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one user message (wrapped in the target's chat template)")
    src.add_argument("--prompts", help="JSON-lines file with a 'turns' list per line (Spec-Bench shape)")
    p.add_argument("--limit", type=positive(int), default=None, help="use only the first N prompts of --prompts")
    p.add_argument("--method", choices=METHODS, default=_D.method)
    p.add_argument("--k", type=positive(int), default=None, help="draft length K (chain, lookup), start K (heuristic)")
    p.add_argument(
        "--copy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drafting methods (not ar, lookup): also copy tokens from the context (prompt lookup) "
        "where that beats the draft",
    )
    p.add_argument("--threshold", type=positive(float), default=None, help="SpecDec++ stop threshold h")
    p.add_argument("--k-max", type=positive(int), default=None, help="SpecDec++ maximum draft length")
    p.add_argument("--budget", type=positive(int), default=None, help="tree node budget (dyspec, sequoia)")
    p.add_argument("--width", type=positive(int), default=None, help="k-ary tree width")
    p.add_argument("--depth", type=positive(int), default=None, help="k-ary tree depth")
    p.add_argument("--max-new-tokens", type=positive(int), default=_D.max_new_tokens)
    p.add_argument("--temperature", type=float, default=_D.sampling.temperature)
    p.add_argument("--top-p", type=float, default=_D.sampling.top_p)
    p.add_argument("--top-k", type=int, default=_D.sampling.top_k)
    p.add_argument("--seed", type=int, default=_D.sampling.seed)
    p.add_argument("--dtype", choices=DTYPES, default=ModelConfig().dtype)
    p.add_argument("--device", default=ModelConfig().device)
    p.add_argument(
        "--target", default=None, help="local folder, .gguf file or hub id (default: shipped SmolLM2-135M-Instruct)"
    )
    p.add_argument("--draft", default=None, help="local folder or hub id (default: the draft shipped in models/)")
    p.add_argument(
        "--eagle",
        default=None,
        help="EAGLE drafter folder ('none' = off; default: the shipped one with the default pair)",
    )
    p.add_argument(
        "--context-vocab",
        action=argparse.BooleanOptionalAction,
        default=ModelConfig().context_vocab,
        help="a reduced-vocabulary draft head also covers the tokens of its context (default: on)",
    )
    add_holding_flags(p)
    p.add_argument(
        "--drafter",
        choices=DRAFTERS,
        default=_D.drafter,
        help="who drafts: the EAGLE drafter, the standalone draft, or auto (EAGLE where available)",
    )
    p.add_argument(
        "--record-top",
        type=positive(int, zero=True),
        default=_D.record_top,
        help=f"per node, keep the top K of q, p and the residual for the inspector (default {_D.record_top}; 0: off)",
    )
    p.add_argument("--threads", type=positive(int), default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--out", required=True, help="output JSON-lines file, one GenerationTrace per prompt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_generate(a: argparse.Namespace) -> int:
    # every argument is checked before a model loads
    run = run_config(a)
    if a.prompt is not None:
        check_text(a.prompt)
    prompts = [{"turns": [a.prompt]}] if a.prompt is not None else read_prompts(a.prompts, a.limit)
    check_output(a.out)
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    pair = load_pair(
        ModelConfig(
            target=a.target,
            draft=a.draft,
            eagle=a.eagle,
            dtype=a.dtype,
            device=a.device,
            context_vocab=a.context_vocab,
            **holding_options(a),
        ),
        progress=lambda m: print(m, file=sys.stderr),
    )
    print(
        f"specviz: loaded {pair.info['target']} + {pair.info['draft']} ({pair.info['dtype']}, {pair.info['device']}) "
        f"in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    encoded = [encode_prompt(pair.tokenizer, p["turns"][0]) for p in prompts]
    tokens = ms = 0
    with replacing(a.out) as f:
        for p, ids in tqdm(list(zip(prompts, encoded)), desc=a.method, unit="prompt", disable=a.quiet, file=sys.stderr):
            trace = generate(pair, ids, run, prompt_text=p["turns"][0])
            d = trace.to_dict()
            d["text"] = pair.tokenizer.decode(list(trace.output_ids))
            for k in ("question_id", "category"):
                if k in p:
                    d[k] = p[k]
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
            tokens += len(trace.output_ids)
            ms += trace.total_ms
            if a.prompt is not None and not a.quiet:
                print(d["text"], file=sys.stderr)
    print(
        f"specviz: {a.method}: {tokens} tokens in {ms / 1e3:.2f} s = {tokens / max(ms, 1e-9) * 1e3:.2f} tokens/s "
        f"(decode time only; {len(prompts)} prompt(s))",
        file=sys.stderr,
    )
    return 0


TOOLS = {
    "bench": bench_main,
    "sweep": sweep_main,
    "budget": budget_main,
    "acceptance": acceptance_main,
    "lookup-priors": lookup_priors_main,
    "copy-calibration": copy_calibration_main,
    "record": record_main,
    "report": report_main,
    "screenshot": screenshot_main,
    "loadtest": loadtest_main,
    "families": families_main,
    "pagecost": pagecost_main,
    "train": train_main,
    "lessons": lessons_main,
    "export": export_main,
    "engine": engine_main,
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specviz", description="specviz: see speculative decoding, round by round")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _generate_parser(sub)
    for name, fn in TOOLS.items():
        doc = (sys.modules[fn.__module__].__doc__ or "").strip().splitlines()[0]
        sub.add_parser(name, help=doc.split("`: ", 1)[-1])
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        return TOOLS[argv[0]](argv[1:]) or 0
    a = parser().parse_args(argv)
    try:
        return cmd_generate(a)
    except (ValueError, FileNotFoundError, TimeoutError) as e:
        print(f"specviz: error: {e}", file=sys.stderr)
        return 2
