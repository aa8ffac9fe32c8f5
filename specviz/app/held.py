"""The loaded model pair and its locks: one pair kept in memory, one decode on it at a time.

The pair's KV caches are shared state, so every decode holds `busy`. Loading a pair holds `_loading` instead, so a
slow load does not stop runs on the loaded pair. No gradio here; torch loads on first use."""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from dataclasses import replace

from specviz.core.config import ModelConfig, RunConfig
from specviz.core.device import resolve_device, resolve_dtype
from specviz.core.pairs import DEFAULT_PAIR, PAIRS
from specviz.core.prompts import encode_prompt
from specviz.engine.loop import iter_rounds
from specviz.models.loading import load_pair

BUSY_TIMEOUT_S = 300

MODEL_SLOTS = 2  # requests the page lets in at once: one decoding, one loading a pair or next in line

busy = threading.Lock()  # held while a decode uses the pair's caches

_loading = threading.Lock()  # held while a pair loads

_pairs: dict[ModelConfig, object] = {}


@contextmanager
def hold(lock: threading.Lock = busy, what: str = "the model is busy with other runs"):
    if not lock.acquire(timeout=BUSY_TIMEOUT_S):
        raise RuntimeError(f"{what}; try again in a minute")
    try:
        yield
    finally:
        lock.release()


def resolved(cfg: ModelConfig) -> ModelConfig:
    """`cfg` as `_pairs` keys it: "auto" dtype is what it picks."""
    return replace(cfg, dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device)))


def if_loaded(cfg: ModelConfig):
    """The pair for `cfg` if it is the one in memory, else None (nothing loads)."""
    return _pairs.get(resolved(cfg))


def loaded(cfg: ModelConfig):
    """The loaded pair for `cfg`. One pair is kept in memory: a new one loads under `_loading`, never `_busy`,
    so a slow load (a big model, a slow hub) does not hold up runs on the pair already loaded; the new pair
    replaces the old only once it has loaded, so a failed load leaves the old one serving. A run still
    decoding on the old pair keeps it until it ends."""
    cfg = resolved(cfg)
    if cfg in _pairs:
        return _pairs[cfg]
    with hold(_loading, "another model pair is loading"):
        if cfg not in _pairs:
            pair = load_pair(cfg, progress=lambda msg: print(msg, flush=True))
            _pairs.clear()
            _pairs[cfg] = pair
        return _pairs[cfg]


@contextmanager
def holding(cfg: ModelConfig):
    """The loaded pair for `cfg`, held for one caller's whole piece of work (no run decodes on it meanwhile)."""
    pair = loaded(cfg)
    with hold():
        yield pair


@contextmanager
def no_collector():
    """Python's cycle collector off for a round: its full scans of a page's heap (Gradio, plotly, the traces) land
    inside the decode otherwise, and a round's tensors and records are freed by reference counts."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def warm_up(cfg: ModelConfig = PAIRS[DEFAULT_PAIR].model) -> None:
    """Load the default pair and run two tokens through it ahead of the first click (the first forwards
    of a fresh process are slow); run in a background thread at launch."""
    pair = loaded(cfg)
    with hold():
        for _ in iter_rounds(pair, encode_prompt(pair.tokenizer, "Hi"), RunConfig(max_new_tokens=2)):
            pass
    gc.collect()
    gc.freeze()  # the page's long-lived objects (Gradio, the models) leave the collector's scans
