"""`specviz acceptance`: measure the pair's positional acceptance vector (Sequoia's P[k]) with a wide k-ary tree."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specviz.core.args import positive
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import DRAFTERS, DTYPES, ModelConfig, RunConfig, SamplingConfig
from specviz.core.prompts import encode_prompt
from specviz.core.sampling import make_rng
from specviz.engine.loop import iter_rounds
from specviz.methods.trees.acceptance import save_acceptance
from specviz.methods.trees.static import StaticTreeDrafter
from specviz.models.loading import load_pair


def measure_acceptance(pair, prompts: Sequence[Sequence[int]], run, width: int = 8) -> dict:
    """Sequoia's measurement: a star of `width` children at the root, verified round after round along
    each prompt's generation; P[k] = fraction of rounds in which the k-th drawn child was accepted."""
    counts, rounds = np.zeros(width), 0
    lm = pair.drafter_lm(run.drafter)
    for i, ids in enumerate(prompts):
        rng = make_rng(run.sampling.seed + i, pair.target.device)
        drafter = StaticTreeDrafter(lm, run.sampling, rng, [-1] * 1 + [0] * width, pair.eos_ids)
        for rnd in iter_rounds(pair, ids, run, drafter, rng):
            if rnd.n_drafted == 0:
                continue
            rounds += 1
            if rnd.accepted_path:
                counts[rnd.accepted_path[0] - 1] += 1
    return {
        "target": pair.info.get("target"),
        "draft": pair.drafter_name(lm),
        "temperature": run.sampling.temperature,
        "width": width,
        "prompts": len(prompts),
        "rounds": rounds,
        "vector": [round(float(c) / max(rounds, 1), 5) for c in counts],
    }


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
    ap.add_argument("--width", type=positive(int), default=8)
    ap.add_argument("--drafter", default=RunConfig.drafter, choices=DRAFTERS, help="which drafter to measure")
    ap.add_argument("--questions", type=Path, default=SPEC_BENCH)
    a = ap.parse_args(argv)
    pair = load_pair(ModelConfig(dtype=a.dtype))
    lines = a.questions.read_text().splitlines()
    step = max(1, len(lines) // a.prompts)
    prompts = [
        encode_prompt(pair.tokenizer, json.loads(lines[i])["turns"][0]) for i in range(step // 2, len(lines), step)
    ][: a.prompts]
    run = RunConfig(
        method="kary", max_new_tokens=a.tokens, sampling=SamplingConfig(temperature=a.temperature), drafter=a.drafter
    )
    record = measure_acceptance(pair, prompts, run, a.width)
    save_acceptance(record)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
