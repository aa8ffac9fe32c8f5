"""`specviz record`: record a trace (with its autoregressive baseline) for the dashboard's no-model mode.

The files go into assets/traces, where the dashboard lists them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specviz.app.files import dump, example_prompts
from specviz.app.policy import model_config
from specviz.app.runs import baseline, run_to_end
from specviz.core.args import positive
from specviz.core.config import DRAFTERS, ModelConfig, RunConfig
from specviz.core.pairs import DEFAULT_PAIR
from specviz.core.trace import GenerationTrace


def record(
    method: str,
    out: str | Path,
    max_new_tokens: int = RunConfig().max_new_tokens,
    dtype: str = ModelConfig().dtype,
    copy: bool = RunConfig().copy,
    drafter: str = RunConfig().drafter,
) -> GenerationTrace:
    """Decode the first example prompt with `method` on the default pair and write a trace file (with baseline)."""
    prompt, model = example_prompts()[0], model_config(DEFAULT_PAIR, dtype)
    run = RunConfig(method=method, max_new_tokens=max_new_tokens, copy=copy, drafter=drafter)
    trace = run_to_end(prompt, run, model)
    Path(out).write_text(dump(trace, baseline(prompt, run, model)), encoding="utf-8")
    return trace


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="record a trace file for assets/traces with the default pair")
    ap.add_argument("method")
    ap.add_argument("out")
    ap.add_argument("--max-new-tokens", type=positive(int), default=RunConfig().max_new_tokens)
    ap.add_argument("--dtype", default=ModelConfig().dtype)
    ap.add_argument("--copy", action="store_true", help="also copy from the context (RunConfig.copy)")
    ap.add_argument(
        "--drafter", choices=DRAFTERS, default=RunConfig().drafter, help="eagle, the standalone draft (model) or auto"
    )
    a = ap.parse_args(argv)
    t = record(a.method, a.out, a.max_new_tokens, a.dtype, a.copy, a.drafter)
    print(f"{a.out}: {len(t.output_ids)} tokens in {len(t.rounds)} rounds, {t.total_ms / 1e3:.1f} s")
    return 0
