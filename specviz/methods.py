"""Method name -> drafter. Each method registers one builder here."""
from __future__ import annotations

from .config import RunConfig
from .drafters import ChainDrafter, Drafter, HeuristicDrafter


def _ar(run, pair, rng):
    return Drafter()


def _chain(run, pair, rng):
    return ChainDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.chain, pair.eos_ids)


def _heuristic(run, pair, rng):
    return HeuristicDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.heuristic, pair.eos_ids)


def _specdecpp(run, pair, rng):
    from .specdecpp import SpecDecPPDrafter, head_for_pair
    lm = pair.drafter_lm(run.drafter)
    if run.drafter == "auto" and lm is pair.eagle:
        try:
            head = head_for_pair(pair, lm)
        except ValueError:                                  # no head trained on the EAGLE drafter: the standalone one
            lm = pair.draft
            head = head_for_pair(pair, lm)
    else:
        head = head_for_pair(pair, lm)
    return SpecDecPPDrafter(lm, run.sampling, rng, head, run.specdecpp, pair.eos_ids)


def _dyspec(run, pair, rng):
    from .dyspec import DySpecDrafter
    return DySpecDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.dyspec, pair.eos_ids)


def _kary(run, pair, rng):
    from .static_trees import StaticTreeDrafter, kary
    return StaticTreeDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, kary(run.tree.width, run.tree.depth), pair.eos_ids)


def _sequoia(run, pair, rng):
    from .static_trees import StaticTreeDrafter, load_acceptance, sequoia
    shape = sequoia(run.tree.budget, load_acceptance(pair.info, run.sampling.temperature), run.tree.max_depth)
    return StaticTreeDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, shape, pair.eos_ids)


BUILDERS = {"ar": _ar, "chain": _chain, "heuristic": _heuristic, "specdecpp": _specdecpp,
            "dyspec": _dyspec, "kary": _kary, "sequoia": _sequoia}


def make_drafter(run: RunConfig, pair, rng) -> Drafter:
    if run.method not in BUILDERS:
        raise ValueError(f"method {run.method!r} is not available in this build")
    return BUILDERS[run.method](run, pair, rng)
