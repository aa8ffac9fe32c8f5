"""`specviz acceptance`: measure the pair's positional acceptance vector (Sequoia's P[k]) with a wide k-ary tree."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from specviz.analysis.hardware import STAR, measure_acceptance, spread_prompts
from specviz.core.args import positive
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import DRAFTERS, DTYPES, ModelConfig, RunConfig, SamplingConfig
from specviz.methods.trees.acceptance import save_acceptance
from specviz.models.loading import load_pair


def main(argv: Sequence[str] | None = None) -> None:
    """`specviz acceptance`: measure the default pair's acceptance vector and cache it."""

    ap = argparse.ArgumentParser(prog="specviz acceptance", description=main.__doc__)
    ap.add_argument("--dtype", default=ModelConfig.dtype, choices=DTYPES)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument(
        "--prompts",
        type=positive(int),
        default=8,
        help="Spec-Bench prompts (first turn), spread over the file "
        "at odd offsets (half a stride from the evaluation prompts)",
    )
    ap.add_argument("--tokens", type=positive(int), default=64, help="new tokens per prompt")
    ap.add_argument("--width", type=positive(int), default=STAR)
    ap.add_argument("--drafter", default=RunConfig.drafter, choices=DRAFTERS, help="which drafter to measure")
    ap.add_argument("--questions", type=Path, default=SPEC_BENCH)
    a = ap.parse_args(argv)
    pair = load_pair(ModelConfig(dtype=a.dtype))
    prompts = spread_prompts(pair, a.prompts, a.questions)
    run = RunConfig(
        method="kary", max_new_tokens=a.tokens, sampling=SamplingConfig(temperature=a.temperature), drafter=a.drafter
    )
    record = measure_acceptance(pair, prompts, run, a.width)
    save_acceptance(record)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
