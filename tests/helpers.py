"""Test-only helpers over the library's records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specviz.analysis.costs import StepCosts, costs_from_rounds, hindsight_k
from specviz.core.trace import GenerationTrace


def path_to(parents: Sequence[int], i: int) -> list[int]:
    """Node ids from the root down to i, inclusive."""
    out = []
    while i != -1:
        out.append(i)
        i = parents[i]
    return out[::-1]


def with_hindsight(trace: GenerationTrace, costs: StepCosts | None = None) -> GenerationTrace:
    """The trace with every round's `hindsight_k` filled in (costs default to the trace's own timings)."""
    costs = costs or costs_from_rounds(list(trace.rounds))
    return replace(trace, rounds=tuple(replace(r, hindsight_k=hindsight_k(r, costs)) for r in trace.rounds))
