"""A pair's hardware measurements on this machine: what one forward costs per number of tree tokens (the target,
the standalone draft, the EAGLE drafter), the pair's positional acceptance vector (Sequoia's P[k]) at T = 0 and
T = 1, and the tree budgets they pick (`analysis.budget.picks`). `specviz budget` and the page's Hardware tab run
`measure_pair` on the loaded pair, dispatched or not, and keep the record as this machine's (`core.curves`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from specviz.analysis.budget import picks
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import RunConfig, SamplingConfig, TreeConfig
from specviz.core.curves import DRAFTER_CURVES, pick_key
from specviz.core.device import machine_info, sync
from specviz.core.prompts import encode_prompt, read_prompts
from specviz.core.sampling import make_rng
from specviz.engine.loop import iter_rounds
from specviz.methods.trees.static import StaticTreeDrafter
from specviz.models.lm import LM
from specviz.models.pair import Pair

SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)
STAR = 8  # the acceptance measurement's children at the root


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
    lm.forward(list(context), with_logits=False)
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


def measure_acceptance(pair: Pair, prompts: Sequence[Sequence[int]], run: RunConfig, width: int = STAR) -> dict:
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


def spread_prompts(pair: Pair, n: int, questions=None) -> list[list[int]]:
    """`n` Spec-Bench first turns spread over the file at odd offsets (half a stride from the evaluation prompts),
    encoded with the pair's chat template."""
    rows = read_prompts(questions or SPEC_BENCH)
    step = max(1, len(rows) // max(n, 1))
    return [encode_prompt(pair.tokenizer, rows[i]["turns"][0]) for i in range(step // 2, len(rows), step)][:n]


def context_ids(pair: Pair, tokens: int = 256, questions=None) -> list[int]:
    """A realistic context of `tokens` ids: the first Spec-Bench questions, run together."""
    rows = read_prompts(questions or SPEC_BENCH)
    return pair.tokenizer(" ".join(r["turns"][0] for r in rows[:40]))["input_ids"][:tokens]


def measure_pair(
    pair: Pair,
    context: Sequence[int],
    prompts: Sequence[Sequence[int]],
    tokens: int = 32,
    repeats: int = 5,
    clock: str = "wall",
    progress: Callable[[float, str], None] = lambda done, what: None,
) -> dict:
    """Every curve of `pair` on this machine, its acceptance vectors (each drafter, T = 0 and 1) over `prompts`, and
    the budgets they pick: one record (`core.curves.save_local` keeps it)."""
    drafters = {"draft": "model", **({"eagle": "eagle"} if pair.eagle is not None else {})}  # curve key -> drafter
    steps, done = 1 + len(drafters) * 3, 0

    def step(what: str) -> None:
        nonlocal done
        progress(done / steps, what)
        done += 1

    record = {
        "machine": machine_info(),
        "models": dict(pair.info),
        "dtype": pair.info["dtype"],
        "context": len(context),
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    step("the target's forward by tokens in it")
    record["target"] = measure_curve(pair.target, context, repeats=repeats, clock=clock)
    for key, choice in drafters.items():
        step(f"the {DRAFTER_CURVES[key]}'s forward by tokens in it")
        record[key] = measure_curve(pair.drafter_lm(choice), context, repeats=repeats, clock=clock)
    record["acceptance"] = {}
    for key, choice in drafters.items():
        for t in (0.0, 1.0):
            step(f"the {DRAFTER_CURVES[key]}'s acceptance by position, T = {t:g}")
            sampling = SamplingConfig(temperature=t)
            run = RunConfig(method="kary", max_new_tokens=tokens, sampling=sampling, drafter=choice)
            record["acceptance"][pick_key(key, t)] = measure_acceptance(pair, prompts, run)
    record["picks"] = picks(record, pair.info, TreeConfig().max_depth)
    progress(1.0, "done")
    return record
