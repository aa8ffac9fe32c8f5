"""The dashboard's values -> a prompt, and from its `Settings` a RunConfig and a ModelConfig, each checked, with a
message for anything out of range."""

from __future__ import annotations

import math
from dataclasses import replace

from specviz.app import policy
from specviz.app.settings import Settings
from specviz.core.config import METHODS, ModelConfig, RunConfig
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


def make_run(s: Settings) -> RunConfig:
    """The page's settings -> a validated RunConfig; ValueError (shown as gr.Error) on anything out of range.
    The K slider sets the chain's K and prompt lookup's length; `copy` adds prompt lookup to a drafting method."""
    if s.method not in METHODS:
        raise ValueError(f"unknown method {s.method!r}")
    if not isinstance(s.copy, bool):
        raise ValueError(f"'copy from the context' must be true or false, got {s.copy!r}")
    knobs = {
        "k": _whole(s.k, "K"),
        "start_k": _whole(s.start_k, "start K"),
        "h": _number(s.h, "threshold h"),
        "budget": _whole(s.budget, "budget"),
        "width": _whole(s.width, "tree width"),
        "depth": _whole(s.depth, "tree depth"),
        "copy": s.copy,
    }
    run = RunConfig(
        drafter=s.drafter,
        method=s.method,
        max_new_tokens=_whole(s.max_new_tokens, "max new tokens"),
        sampling=replace(
            _DEFAULT.sampling,
            temperature=_number(s.temperature, "temperature"),
            top_p=_number(s.top_p, "top-p"),
            seed=_whole(s.seed, "seed"),
        ),
    )
    return with_knobs(run, s.method, knobs)


def make_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type a question or pick an example")
    return check_text(prompt)


def make_configs(s: Settings) -> tuple[RunConfig, ModelConfig]:
    """The page's settings -> (the RunConfig for its method, the ModelConfig)."""
    return make_run(s), policy.model_config(s.pair, s.dtype, s.target, s.draft, s.device_map, s.max_memory)
