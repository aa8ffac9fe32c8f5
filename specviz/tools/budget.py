"""`specviz budget`: measure the loaded pair's verify and draft curves and its acceptance by position on this
machine (a dispatched target included), and keep them with the budgets they pick as this machine's measurement of
the pair (the page's Hardware tab reads it); never another machine's curve."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from specviz.analysis.hardware import context_ids, measure_pair, spread_prompts
from specviz.core.args import add_holding_flags, holding_options, output_file, positive
from specviz.core.assets import SPEC_BENCH, VERIFY_CURVES
from specviz.core.config import DTYPES, ModelConfig
from specviz.core.curves import DRAFTER_CURVES, load_curves, pick_label, save_local
from specviz.core.output import replacing
from specviz.models.loading import load_pair


def main(argv: Sequence[str] | None = None) -> None:

    ap = argparse.ArgumentParser(prog="specviz budget", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default=ModelConfig.dtype, choices=DTYPES)
    ap.add_argument("--context", type=int, default=256, help="tokens already in the cache")
    ap.add_argument("--repeats", type=positive(int), default=5)
    ap.add_argument(
        "--clock",
        default="wall",
        choices=("wall", "cpu"),
        help="cpu: process CPU time (use with --threads 1 on a machine shared with other jobs)",
    )
    ap.add_argument("--threads", type=positive(int), default=torch.get_num_threads())
    ap.add_argument(
        "--questions", type=Path, default=SPEC_BENCH, help="JSON lines with 'turns'; their first turns make the context"
    )
    ap.add_argument("--device", default=ModelConfig.device, help="auto, cpu or cuda[:N]")
    ap.add_argument("--target", default=None, help="local folder, .gguf file or hub id (default: the shipped pair)")
    ap.add_argument("--draft", default=None, help="local folder or hub id (default: the shipped draft)")
    ap.add_argument(
        "--eagle",
        default=None,
        help="EAGLE drafter folder ('none' = off; default: the shipped one with the default pair)",
    )
    add_holding_flags(ap)
    ap.add_argument(
        "--acceptance-prompts", type=positive(int), default=8, help="Spec-Bench prompts the acceptance vector reads"
    )
    ap.add_argument("--acceptance-tokens", type=positive(int), default=32, help="new tokens per such prompt")
    ap.add_argument(
        "--out",
        type=output_file,
        default=None,
        help="also write the record into this curves file, by dtype (the shipped one: "
        f"{VERIFY_CURVES.relative_to(VERIFY_CURVES.parents[1])}); this machine's own copy is always kept",
    )
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    pair = load_pair(
        ModelConfig(target=a.target, draft=a.draft, eagle=a.eagle, dtype=a.dtype, device=a.device, **holding_options(a))
    )
    prompts = spread_prompts(pair, a.acceptance_prompts, a.questions)
    bar = tqdm(total=100, desc="specviz budget", unit="%")

    def progress(done: float, what: str) -> None:
        bar.set_postfix_str(what)
        bar.update(round(done * 100) - bar.n)

    record = measure_pair(
        pair,
        context_ids(pair, a.context, a.questions),
        prompts,
        a.acceptance_tokens,
        a.repeats,
        a.clock,
        progress,
    )
    bar.close()
    dtype = record["dtype"]
    print(f"this machine's measurement of the pair: {save_local(record)}")
    if a.out:  # a curves file by dtype (assets/verify_curve.json: the shipped one)
        curves = json.dumps({**load_curves(a.out), dtype: record}, indent=1) + "\n"
        with replacing(a.out) as f:
            f.write(curves)
    print(f"{dtype}: target ms by tree tokens n", dict(zip(record["target"]["n"], record["target"]["ms"])))
    for who, label in DRAFTER_CURVES.items():
        if who in record:
            print(f"{dtype}: {label} ms by n", dict(zip(record[who]["n"], record[who]["ms"])))
    for key, p in record["picks"].items():
        top = sorted(p["table"], key=lambda r: -r[3])[:5]
        who, t = pick_label(key)
        print(
            f"{who}, {t}: best tree budget {p['budget']} ({p['tokens_per_s']:.1f} expected tokens/s); top five "
            + ", ".join(f"{m}: {tps:.1f}" for m, _, _, tps in top)
        )


if __name__ == "__main__":
    main()
