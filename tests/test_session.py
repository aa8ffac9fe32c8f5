"""The dashboard's shared state: a slow load holds up no run on the loaded pair; a failed load keeps it."""

import threading
from dataclasses import replace

import pytest
from conftest import make_pair

from specviz.app import held
from specviz.core.config import ModelConfig
from specviz.core.device import resolve_device, resolve_dtype
from specviz.core.pairs import DEFAULT_PAIR, PAIRS


def _resolved(cfg: ModelConfig) -> ModelConfig:
    return replace(cfg, dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device)))


@pytest.fixture
def loaded(monkeypatch):
    """The default pair 'loaded' (a tiny one), and a load_pair that waits on an event, then fails or loads."""
    default = PAIRS[DEFAULT_PAIR].model
    monkeypatch.setattr(held, "_pairs", {_resolved(default): make_pair()})
    gate, started = threading.Event(), threading.Event()
    outcome = {}

    def slow_load(cfg, progress=print):
        started.set()
        assert gate.wait(30)
        if outcome.get("fail"):
            raise FileNotFoundError("model folder not found: /nowhere")
        return make_pair(seed=1)

    monkeypatch.setattr(held, "load_pair", slow_load)
    return default, gate, started, outcome


def _load_in_background(cfg):
    box = {}

    def work():
        try:
            box["pair"] = held.loaded(cfg)
        except FileNotFoundError as e:
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t, box


@pytest.mark.parametrize("fail", [False, True])
def test_a_slow_load_holds_up_no_run_on_the_loaded_pair(loaded, fail):
    default, gate, started, outcome = loaded
    outcome["fail"] = fail
    default_pair = held.loaded(default)
    custom = replace(default, target="/some/folder")
    t, box = _load_in_background(custom)
    assert started.wait(30)
    # mid-load: the loaded pair is served at once, and the decode lock is free
    assert held.loaded(default) is default_pair
    assert held.busy.acquire(timeout=1)
    held.busy.release()
    gate.set()
    t.join(30)
    if fail:  # a failed custom load leaves the default pair loaded
        assert "error" in box and held.loaded(default) is default_pair
    else:  # one pair in memory: the new one replaced the old once it had loaded
        assert held.loaded(custom) is box["pair"] and list(held._pairs) == [_resolved(custom)]
