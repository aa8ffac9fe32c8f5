"""Replay another decoder's output through specviz, one of its steps a round.

A serving engine reports how many draft tokens it accepted at each step, never which; the step boundaries follow
from those counts (`core.served.step_tokens`). `replay` starts after the engine's prefill token and runs one full
specviz round from each step's prefix: the drafter proposes, the target verifies, the round records q, p and the
verdict as any round does, and then the engine's own tokens are committed (`iter_rounds(forced=...)`), so every
step is compared from the very prefix the engine had.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from specviz.core.config import MAX_NEW_TOKENS_LIMIT, RunConfig
from specviz.core.served import step_tokens
from specviz.core.trace import GenerationTrace
from specviz.engine.loop import iter_rounds, prepare
from specviz.engine.record import TraceBuilder
from specviz.models.pair import Pair

REPLAY_SLACK = 64  # tokens past the engine's output the drafter may think remain: its draft is never cut short


def replay(
    pair: Pair,
    prompt_ids: Sequence[int],
    output_ids: Sequence[int],
    per_step_accepted: Sequence[int],
    run: RunConfig,
    decoder: str,
    prompt_text: str = "",
) -> GenerationTrace:
    """The engine's output replayed: a trace whose prompt is the prompt plus the prefill's token and whose round s
    is specviz's round at engine step s (its own draft and verdict; `emitted` is the engine's step)."""
    steps = step_tokens(list(output_ids), list(per_step_accepted))
    start = [*prompt_ids, *output_ids[:1]]
    n = sum(len(s) for s in steps)
    t0 = time.perf_counter()
    run = replace(run, max_new_tokens=min(n + REPLAY_SLACK, MAX_NEW_TOKENS_LIMIT))  # never cuts a step's draft
    drafter, rng = prepare(pair, run)
    build = TraceBuilder(pair, drafter, start, run, prompt_text)
    for rnd in iter_rounds(pair, start, run, drafter, rng, forced=steps):
        build.add(rnd)
    return build.trace((time.perf_counter() - t0) * 1e3, replay=decoder)
