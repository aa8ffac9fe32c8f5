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
    lm = pair.eagle if drafter_kind(run, pair) == "eagle" else pair.draft
    return SpecDecPPDrafter(lm, run.sampling, rng, head_for_pair(pair, lm), run.specdecpp, pair.eos_ids)


def _dyspec(run, pair, rng):
    from .dyspec import DySpecDrafter
    lookup = run.lookup if run.copy else None
    return DySpecDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.dyspec, pair.eos_ids, lookup,
                         _curve(pair) if lookup and lookup.extend_to else None)


def _kary(run, pair, rng):
    from .static_trees import StaticTreeDrafter, kary
    return StaticTreeDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, kary(run.tree.width, run.tree.depth), pair.eos_ids)


def _sequoia(run, pair, rng):
    from .static_trees import StaticTreeDrafter, load_acceptance, sequoia
    lm = pair.drafter_lm(run.drafter)
    P = load_acceptance(pair.info.get("target"), pair.drafter_name(lm), run.sampling.temperature)
    return StaticTreeDrafter(lm, run.sampling, rng, sequoia(run.tree.budget, P, run.tree.max_depth), pair.eos_ids)


def _lookup(run, pair, rng):
    from .lookup import LookupDrafter
    return LookupDrafter(run.lookup, pair.eos_ids, _curve(pair) if run.lookup.extend_to else None,
                         not run.sampling.greedy)


def _curve(pair):
    """The pair's stored verify curve (copies past the budget need one), or None."""
    from .budget import device_curve
    return device_curve(pair.info)


BUILDERS = {"ar": _ar, "chain": _chain, "heuristic": _heuristic, "specdecpp": _specdecpp,
            "dyspec": _dyspec, "kary": _kary, "sequoia": _sequoia,
            "lookup": _lookup}


def drafter_kind(run: RunConfig, pair) -> str:
    """Which draft a run uses: "none" (autoregressive), "eagle" or "model" (RunConfig.drafter resolved).

    "auto" takes the EAGLE drafter where the pair has one, except for SpecDec++ without an acceptance
    head trained on it, which then drafts with the standalone model and its head."""
    if run.method in ("ar", "lookup"):
        return "none"
    lm = pair.drafter_lm(run.drafter)
    if run.method == "specdecpp" and run.drafter == "auto" and lm is pair.eagle:
        from .specdecpp import has_head
        if not has_head(pair, lm):
            return "model"
    return "eagle" if lm is pair.eagle and lm is not None else "model"


COPY_SWITCHED = ("chain", "heuristic", "specdecpp", "kary", "sequoia")   # RunConfig.copy: copy rounds
COPYING = COPY_SWITCHED + ("dyspec",)                                   # ... and DySpec: copy slots in its tree


def make_drafter(run: RunConfig, pair, rng) -> Drafter:
    if run.method not in BUILDERS:
        raise ValueError(f"method {run.method!r} is not available in this build")
    drafter = BUILDERS[run.method](run, pair, rng)
    if run.copy and run.method in COPY_SWITCHED:
        from .lookup import CopySwitch
        drafter = CopySwitch(drafter, run.lookup, pair.eos_ids, _curve(pair) if run.lookup.extend_to else None,
                             not run.sampling.greedy)
    return drafter
