"""Choosing SpecDec++'s threshold h for the machine at hand: calibration rounds drafted to a fixed length, and the
stop rule replayed on them with the step costs measured there, for every h, k_min and k_max and every fixed K."""

from __future__ import annotations

import torch
from tqdm import tqdm

from specviz.analysis.costs import (
    StepCosts,
    costs_from_rounds,
    hindsight_k,
    measure_costs,
    replay,
)
from specviz.analysis.head_ceiling import ceiling
from specviz.core.config import RunConfig, SamplingConfig, SpecDecPPConfig
from specviz.core.prompts import encode_prompt
from specviz.engine.loop import iter_rounds
from specviz.methods.registry import drafter_kind
from specviz.methods.specdecpp.head import head_card
from specviz.methods.specdecpp.stop_rule import stop_point
from specviz.train.prompts import compose


def calibration_rounds(
    pair, prompts: list[list[int]], temperature: float, k_cal: int, tokens: int, seed: int = 0, drafter: str = "auto"
):
    """Rounds drafted to exactly k_cal candidates (k_min = k_max = k_cal), head factors recorded; EOS-cut ones kept."""
    cfg = SpecDecPPConfig(threshold=0.5, k_min=k_cal, k_max=k_cal)
    out = []
    for i, ids in enumerate(tqdm(prompts, desc=f"calibration T={temperature:g}", unit="prompt")):
        run = RunConfig(
            method="specdecpp",
            max_new_tokens=tokens,
            specdecpp=cfg,
            drafter=drafter,
            sampling=SamplingConfig(temperature=temperature, seed=seed + i),
        )
        out += [r for r in iter_rounds(pair, ids, run) if r.stop_reason in ("k_max", "eos")]
    return out


def choose_threshold(
    rounds, costs: StepCosts, eos_ids: set[int], hs: list[float], k_maxs: list[int], k_min: int | list[int]
) -> dict:
    """Modelled ms per token of every fixed K, every (h, k_min, k_max) of SpecDec++, and the per-round hindsight
    oracle. `k_min`: one bound or a list of them to choose from."""
    k_mins = [k_min] if isinstance(k_min, int) else list(k_min)
    k_cal = max(r.n_drafted for r in rounds)

    def per_token(length):
        ms, tok = replay(rounds, length, costs)
        return ms / tok

    def eos(r):
        return [t in eos_ids for t in r.tree.tokens[1:]]

    fixed = {k: per_token(lambda r, k=k: min(k, r.n_drafted)) for k in range(1, k_cal + 1)}
    spec = {}
    for k_lo in k_mins:
        for k_max in k_maxs:
            for h in hs:
                k_hi = min(k_max, k_cal)
                cfg = SpecDecPPConfig(threshold=h, k_min=min(k_lo, k_hi), k_max=k_hi)
                spec[(h, k_lo, k_max)] = per_token(lambda r, cfg=cfg: stop_point(r.accept_probs, eos(r), cfg))
    best_k = min(fixed, key=fixed.get)
    best = min(spec, key=spec.get)
    name = (
        (lambda h, lo, hi: f"h={h:g},k_max={hi}")
        if len(k_mins) == 1
        else (lambda h, lo, hi: f"h={h:g},k_min={lo},k_max={hi}")
    )
    return {
        "rounds": len(rounds),
        "costs": costs.to_dict(),
        "fixed_ms_per_token": fixed,
        "specdecpp_ms_per_token": {name(*key): v for key, v in spec.items()},
        "oracle_ms_per_token": per_token(lambda r: hindsight_k(r, costs)),
        "best_k": best_k,
        "h": best[0],
        "k_min": best[1],
        "k_max": best[2],
        "modelled_gain": fixed[best_k] / spec[best] - 1,
    }


def pick_h(
    pair,
    n_prompts: int,
    tokens: int,
    temperatures: list[float],
    k_cal: int,
    hs: list[float],
    k_maxs: list[int],
    k_min: int | list[int],
    seed: int = 0,
    drafter: str = "auto",
    what_if_aucs: list[float] = (),
) -> dict:
    """`what_if_aucs`: also replay the head sharpened to each of these AUCs on the same rounds (`head_ceiling`)."""
    prompts = [encode_prompt(pair.tokenizer, text) for _, text in compose(n_prompts, 104729 + seed)]
    kind = drafter_kind(RunConfig(method="specdecpp", drafter=drafter), pair)  # what SpecDec++ drafts with
    measured = measure_costs(pair, max_tokens=k_cal + 1, draft=pair.drafter_lm(kind))
    out = {"drafter": kind, "measured": measured.to_dict()}
    for t in temperatures:
        rounds = calibration_rounds(pair, prompts, t, k_cal, tokens, seed, kind)
        seen = costs_from_rounds(rounds)  # draft step and round overhead as the drafter sees them
        costs = StepCosts(seen.draft_ms, measured.verify_ms, seen.overhead_ms)
        out[f"T={t:g}"] = choose_threshold(rounds, costs, pair.eos_ids, hs, k_maxs, k_min)
        if what_if_aucs:
            lagged = head_card(pair, pair.drafter_lm(kind)).get("lag", True)
            out[f"T={t:g}"]["what_if"] = ceiling(
                rounds,
                lambda rs, costs=costs: choose_threshold(rs, costs, pair.eos_ids, hs, k_maxs, k_min),
                list(what_if_aucs),
                torch.Generator().manual_seed(seed),
                lagged=lagged,
            )
    return out
