"""The losslessness invariant every method test checks, in one place: a run's greedy output is autoregressive
decoding's (tests/test_families.py holds it over families x methods; the method tests add their own invariants to
the trace this returns)."""

from __future__ import annotations

from dataclasses import replace

from specviz.core.config import RunConfig
from specviz.core.trace import GenerationTrace
from specviz.engine.record import generate

_AR: dict = {}


def autoregressive(pair, prompt, n: int) -> tuple[int, ...]:
    """Autoregressive decoding's greedy output, n tokens (kept per pair, prompt and length)."""
    key = (id(pair), tuple(prompt), n)
    if key not in _AR or _AR[key][0] is not pair:
        _AR[key] = (pair, generate(pair, prompt, RunConfig(method="ar", max_new_tokens=n)).output_ids)
    return _AR[key][1]


def greedy_equal(pair, prompt, run: RunConfig, n: int | None = None, drafter=None, baseline=None) -> GenerationTrace:
    """`run` on `pair` (n new tokens, default the run's), asserted greedy-equal to autoregressive decoding of
    `baseline` (default `pair` itself): its trace."""
    n = run.max_new_tokens if n is None else n
    trace = generate(pair, prompt, replace(run, max_new_tokens=n), drafter=drafter)
    want = autoregressive(pair if baseline is None else baseline, prompt, n)
    assert trace.output_ids == want, (run.method, trace.output_ids)
    return trace
