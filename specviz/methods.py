"""Method name -> drafter. Each method registers one builder here."""
from __future__ import annotations

from .config import RunConfig
from .drafters import ChainDrafter, Drafter, HeuristicDrafter


def _ar(run, pair, rng):
    return Drafter()


def _chain(run, pair, rng):
    return ChainDrafter(pair.draft, run.sampling, rng, run.chain, pair.eos_ids)


def _heuristic(run, pair, rng):
    return HeuristicDrafter(pair.draft, run.sampling, rng, run.heuristic, pair.eos_ids)


BUILDERS = {"ar": _ar, "chain": _chain, "heuristic": _heuristic}


def make_drafter(run: RunConfig, pair, rng) -> Drafter:
    if run.method not in BUILDERS:
        raise ValueError(f"method {run.method!r} is not available in this build")
    return BUILDERS[run.method](run, pair, rng)
