"""`specviz budget`: measure the pair's verify and draft curves and store them with the budgets they pick."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from specviz.analysis.budget import picks
from specviz.core.args import add_holding_flags, holding_options, output_file, positive
from specviz.core.assets import SPEC_BENCH, VERIFY_CURVES
from specviz.core.config import DTYPES, ModelConfig, TreeConfig
from specviz.core.curves import DRAFTER_CURVES, load_curves, pick_label
from specviz.core.device import machine_info, sync
from specviz.core.output import replacing
from specviz.models.lm import LM
from specviz.models.loading import load_pair

SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)


def measure_curve(
    lm: LM, context: Sequence[int], sizes: Sequence[int] = SIZES, repeats: int = 5, clock: str = "wall"
) -> dict:
    """Median ms of one forward of n tree tokens (a binary-tree shape) on top of `context`, for each n.

    Sizes are interleaved within each repeat, so a slow spell hits all of them alike. clock "cpu" times
    the process's CPU time instead of wall time: on a CPU shared with other jobs (and one torch thread)
    that is what the forward would take on an idle core.
    """
    now = time.perf_counter if clock == "wall" else time.process_time
    lm.reset()
    lm.forward(list(context), rows=slice(0, 0))
    base = lm.length
    ids = [int(t) for t in context[-max(sizes) :]] * (max(sizes) // max(1, len(context)) + 1)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(repeats + 1):  # the first pass warms up
        for n in sizes:
            parents = [-1] + [(i - 1) // 2 for i in range(1, n)]
            sync(lm.device)
            t0 = now()
            lm.forward(ids[:n], parents=parents)
            sync(lm.device)
            if r:
                times[n].append((now() - t0) * 1e3)
            lm.crop(base)
    return {"n": list(sizes), "ms": [round(sorted(times[n])[len(times[n]) // 2], 3) for n in sizes], "clock": clock}


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
    ap.add_argument("--out", type=output_file, default=VERIFY_CURVES)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    pair = load_pair(
        ModelConfig(target=a.target, draft=a.draft, eagle=a.eagle, dtype=a.dtype, device=a.device, **holding_options(a))
    )
    text = " ".join(json.loads(line)["turns"][0] for line in a.questions.read_text().splitlines()[:40])
    context = pair.tokenizer(text)["input_ids"][: a.context]
    dtype = pair.info["dtype"]  # "auto" resolved
    record = {
        "machine": machine_info(),
        "models": dict(pair.info),
        "dtype": dtype,
        "context": len(context),
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
        "target": measure_curve(pair.target, context, repeats=a.repeats, clock=a.clock),
        "draft": measure_curve(pair.draft, context, repeats=a.repeats, clock=a.clock),
    }
    if pair.eagle is not None:  # fed no target features here: the same work as with them
        record["eagle"] = measure_curve(pair.eagle, context, repeats=a.repeats, clock=a.clock)
    record["picks"] = picks(record, pair.info, TreeConfig().max_depth)
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
