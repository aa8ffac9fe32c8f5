"""Method name -> drafter: each method's builder, under the name `methods.catalog` describes it by.

A builder takes (run, pair, rng) and returns the `Drafter` the round loop calls; `make_drafter` adds the
copy switch (prompt lookup) where `RunConfig.copy` asks for it.
"""

from __future__ import annotations

from specviz.core.config import RunConfig
from specviz.core.curves import device_curve
from specviz.methods.base import Drafter
from specviz.methods.catalog import CATALOG, COPY_SWITCHED, method
from specviz.methods.chain import ChainDrafter, HeuristicDrafter
from specviz.methods.lookup.drafter import CopySwitch, LookupDrafter
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import has_head, head_for_pair
from specviz.methods.trees.acceptance import load_acceptance
from specviz.methods.trees.dyspec import DySpecDrafter
from specviz.methods.trees.static import StaticTreeDrafter, kary, sequoia


def _ar(run, pair, rng):
    return Drafter()


def _chain(run, pair, rng):
    return ChainDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.chain, pair.eos_ids)


def _heuristic(run, pair, rng):
    return HeuristicDrafter(pair.drafter_lm(run.drafter), run.sampling, rng, run.heuristic, pair.eos_ids)


def _specdecpp(run, pair, rng):
    lm = pair.eagle if drafter_kind(run, pair) == "eagle" else pair.draft
    return SpecDecPPDrafter(
        lm,
        run.sampling,
        rng,
        head_for_pair(pair, lm),
        run.specdecpp,
        pair.eos_ids,
        record=run.record_top > 0,  # the head's inputs per step, for the inspector
    )


def _dyspec(run, pair, rng):
    lookup = run.lookup if run.copy else None
    return DySpecDrafter(
        pair.drafter_lm(run.drafter),
        run.sampling,
        rng,
        run.dyspec,
        pair.eos_ids,
        lookup,
        _curve(pair) if lookup and lookup.extend_to else None,
        record_frontier=run.record_top,  # the best slots at each growth step, for the replay
    )


def _kary(run, pair, rng):
    return StaticTreeDrafter(
        pair.drafter_lm(run.drafter), run.sampling, rng, kary(run.tree.width, run.tree.depth), pair.eos_ids
    )


def _sequoia(run, pair, rng):
    lm = pair.drafter_lm(run.drafter)
    P = load_acceptance(pair.info.get("target"), pair.drafter_name(lm), run.sampling.temperature)
    return StaticTreeDrafter(lm, run.sampling, rng, sequoia(run.tree.budget, P, run.tree.max_depth), pair.eos_ids)


def _lookup(run, pair, rng):
    return LookupDrafter(
        run.lookup, pair.eos_ids, _curve(pair) if run.lookup.extend_to else None, not run.sampling.greedy
    )


def _curve(pair):
    """The pair's stored verify curve (copies past the budget need one), or None."""
    return device_curve(pair.info)


BUILDERS = {
    "ar": _ar,
    "chain": _chain,
    "heuristic": _heuristic,
    "specdecpp": _specdecpp,
    "dyspec": _dyspec,
    "kary": _kary,
    "sequoia": _sequoia,
    "lookup": _lookup,
}
assert set(BUILDERS) == set(CATALOG), "every method in methods.catalog has one builder here"


def drafter_kind(run: RunConfig, pair) -> str:
    """Which draft a run uses: "none" (autoregressive), "eagle" or "model" (RunConfig.drafter resolved).

    "auto" takes the EAGLE drafter where the pair has one, except for SpecDec++ without an acceptance
    head trained on it, which then drafts with the standalone model and its head."""
    if run.method in ("ar", "lookup"):
        return "none"
    lm = pair.drafter_lm(run.drafter)
    if run.method == "specdecpp" and run.drafter == "auto" and lm is pair.eagle:
        if not has_head(pair, lm):
            return "model"
    return "eagle" if lm is pair.eagle and lm is not None else "model"


def make_drafter(run: RunConfig, pair, rng) -> Drafter:
    drafter = BUILDERS[method(run.method).name](run, pair, rng)
    if run.copy and run.method in COPY_SWITCHED:
        drafter = CopySwitch(
            drafter, run.lookup, pair.eos_ids, _curve(pair) if run.lookup.extend_to else None, not run.sampling.greedy
        )
    return drafter
