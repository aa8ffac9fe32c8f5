"""The dashboard's widget values -> a prompt, a RunConfig and a ModelConfig, each checked, with a message for anything
out of range."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from specviz.app import policy
from specviz.core.config import METHODS, ModelConfig, RunConfig
from specviz.core.pairs import DEFAULT_PAIR
from specviz.core.prompts import check_text
from specviz.methods.catalog import with_knobs

ERRORS = (ValueError, RuntimeError, OSError)  # what a handler shows as a sentence: bad settings, missing models

_DEFAULT = RunConfig()


def _whole(x, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x):
        raise ValueError(f"{name} must be a whole number, got {x!r}")
    return int(x)


def _number(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{name} must be a number, got {x!r}")
    return float(x)


def make_run(
    method, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new, seed, drafter=_DEFAULT.drafter
) -> RunConfig:
    """Widget values -> a validated RunConfig; ValueError (shown as gr.Error) on anything out of range.
    The K slider sets the chain's K and prompt lookup's length; `copy` adds prompt lookup to a drafting method."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if not isinstance(copy, bool):
        raise ValueError(f"'copy from the context' must be true or false, got {copy!r}")
    knobs = {
        "k": _whole(k, "K"),
        "start_k": _whole(start_k, "start K"),
        "h": _number(h, "threshold h"),
        "budget": _whole(budget, "budget"),
        "width": _whole(width, "tree width"),
        "depth": _whole(depth, "tree depth"),
        "copy": copy,
    }
    run = RunConfig(
        drafter=drafter,
        method=method,
        max_new_tokens=_whole(max_new, "max new tokens"),
        sampling=replace(
            _DEFAULT.sampling,
            temperature=_number(temperature, "temperature"),
            top_p=_number(top_p, "top-p"),
            seed=_whole(seed, "seed"),
        ),
    )
    return with_knobs(run, method, knobs)


def make_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type a question or pick an example")
    return check_text(prompt)


SETTINGS = (  # the page's settings, by the names its controls and the endpoints' parameters share
    "method", "k", "h", "budget", "width", "depth", "start_k", "copy", "temperature", "top_p", "max_new_tokens", "seed",
    "pair", "dtype", "target", "draft", "device_map", "max_memory", "drafter",
)  # fmt: skip


def defaults() -> dict:
    """Every setting (SETTINGS) at the page's default, from the config dataclasses: for the endpoints that take
    only some."""
    run = RunConfig()
    return {
        "method": run.method, "k": run.chain.k, "h": run.specdecpp.threshold, "budget": run.dyspec.budget,
        "width": run.tree.width, "depth": run.tree.depth, "start_k": run.heuristic.start_k, "copy": run.copy,
        "temperature": run.sampling.temperature, "top_p": run.sampling.top_p, "max_new_tokens": run.max_new_tokens,
        "seed": run.sampling.seed, "pair": DEFAULT_PAIR, "dtype": ModelConfig().dtype, "target": "",
        "draft": "", "device_map": "", "max_memory": "", "drafter": run.drafter,
    }  # fmt: skip


def make_configs(settings: Mapping[str, object]) -> tuple[RunConfig, ModelConfig]:
    """The page's settings, by name (SETTINGS) -> (the RunConfig for its method, the ModelConfig)."""
    missing = [n for n in SETTINGS if n not in settings]
    if missing:
        raise ValueError(f"settings missing: {', '.join(missing)}")
    s = settings
    run = make_run(
        s["method"], s["k"], s["h"], s["budget"], s["width"], s["depth"], s["start_k"], s["copy"],
        s["temperature"], s["top_p"], s["max_new_tokens"], s["seed"], s["drafter"],
    )  # fmt: skip
    model = policy.model_config(s["pair"], s["dtype"], s["target"], s["draft"], s["device_map"], s["max_memory"])
    return run, model
