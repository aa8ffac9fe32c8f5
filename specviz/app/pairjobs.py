"""Work on the loaded pair beside decoding: training its SpecDec++ head with the quick preset and measuring its
verify-cost curves on this machine (`app.pairwork` is the page's side of both). No gradio here."""

from __future__ import annotations

import threading
import time

from specviz.analysis.hardware import context_ids, measure_pair, spread_prompts
from specviz.app import held, policy
from specviz.core.assets import SHIPPED_NAMES
from specviz.core.config import ModelConfig, RunConfig
from specviz.core.curves import save_local
from specviz.methods.registry import drafter_kind
from specviz.methods.specdecpp.head import head_config
from specviz.train.config import QUICK
from specviz.train.head import fit_for_pair

HARDWARE_PROMPTS, HARDWARE_TOKENS, HARDWARE_REPEATS = 4, 24, 3  # the Hardware tab's measurement: under a minute


def train_head(cfg: ModelConfig, progress, stop: threading.Event) -> dict:
    """Train a SpecDec++ head for the drafter SpecDec++ uses on the pair `cfg` (loaded once, kept loaded) with the
    quick preset, where SpecDec++ then finds it (no reload); its card. `progress(fraction, what)`; `stop` set ends
    it (`train.head.Stopped`), writing nothing."""
    if policy.public():
        raise ValueError("a public page never trains: run specviz on your own machine to train a head for your pair")
    pair = held.loaded(cfg)
    stop.clear()
    drafter = _specdecpp_lm(pair)
    if pair.drafter_name(drafter) in SHIPPED_NAMES:
        raise ValueError(
            "the shipped drafters come with their heads (trained with the full recipe: docs/training.md); "
            "the quick preset is for your own pair: name its target and draft under Model pair"
        )
    with held.hold(what="the model is busy with a run; train when it ends"):
        _, card = fit_for_pair(pair, drafter, QUICK, "spec-bench", progress, stop.is_set)
    return card


def _specdecpp_lm(pair):
    """The drafter SpecDec++ runs with on `pair` at the page's default drafter choice (`registry.drafter_kind`)."""
    return pair.eagle if drafter_kind(RunConfig(method="specdecpp"), pair) == "eagle" else pair.draft


def head_card_of(cfg: ModelConfig) -> dict | None:
    """The card of the SpecDec++ head the loaded pair `cfg` would use ({} none yet; None: the pair is not loaded)."""
    pair = held.if_loaded(cfg)
    return None if pair is None else head_config(pair, _specdecpp_lm(pair))


def step_ms(cfg: ModelConfig) -> float:
    """The loaded pair `cfg`'s ms of a one-token target forward plus a draft one, timed here (0: not loaded, or busy
    with a run)."""
    pair = held.if_loaded(cfg)
    if pair is None or not held.busy.acquire(blocking=False):
        return 0.0
    try:
        total = 0.0
        for lm in (pair.target, pair.draft):
            lm.reset()
            for _ in range(2):  # the second is timed: the first pays for a fresh shape
                t0 = time.perf_counter()
                lm.forward([0])
            total += (time.perf_counter() - t0) * 1e3
            lm.reset()
        return total
    finally:
        held.busy.release()


def measure_hardware(cfg: ModelConfig, progress) -> dict:
    """The pair `cfg`'s curves, acceptance vectors and budget picks measured on this machine (`analysis.hardware`),
    kept as this machine's record of it; the record."""
    if policy.public():
        raise ValueError("a public page shares its machine: measure on your own machine with `specviz budget`")
    pair = held.loaded(cfg)
    with held.hold(what="the model is busy with a run; measure when it ends"):
        prompts = spread_prompts(pair, HARDWARE_PROMPTS)
        record = measure_pair(pair, context_ids(pair), prompts, HARDWARE_TOKENS, HARDWARE_REPEATS, "wall", progress)
    save_local(record)
    return record
