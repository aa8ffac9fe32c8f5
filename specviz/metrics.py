"""Numbers from traces: pure functions of a `GenerationTrace`, no torch. Shared by the app and the bench.

Definitions (the ones peers use, so numbers can be compared):

- τ (tokens per target call) = emitted tokens / verification rounds. Every round is one target
  forward, and the emitted tokens include the bonus or resampled token, so plain autoregressive
  decoding has τ = 1 (EAGLE's "compression ratio", vLLM's mean acceptance length).
- acceptance rate = accepted draft tokens / drafted tokens (all drafted nodes, so a wide tree has a
  low rate even when τ is high).
- acceptance at position d = rounds whose accepted path reaches depth d / rounds whose draft
  reached depth d (vLLM's per-position counts, made conditional on the draft being that long).
- tokens/s = emitted tokens / wall-clock seconds of decoding (prefill included).
- time split: summed draft, verify and overhead (cache bookkeeping, drafter update) time of every
  round; "other" is what the rounds do not account for (prefill, Python glue).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .trace import BONUS, RESAMPLE, GenerationTrace, RoundTrace

# How each output token was produced; see `token_origins`.
DRAFTED, CORRECTED, BONUS_TOKEN, TARGET = "accepted draft", "resampled", "bonus", "target only"
ORIGINS = (DRAFTED, BONUS_TOKEN, CORRECTED, TARGET)


@dataclass(frozen=True)
class TimeSplit:
    """Milliseconds spent per phase of one run."""

    draft_ms: float
    verify_ms: float
    overhead_ms: float
    other_ms: float

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.verify_ms + self.overhead_ms + self.other_ms


@dataclass(frozen=True)
class Summary:
    """The headline numbers of one run."""

    method: str
    tokens: int
    rounds: int
    tau: float
    acceptance: float | None
    tokens_per_s: float
    time: TimeSplit


def _depth(rnd: RoundTrace) -> int:
    """Deepest drafted node of the round's tree (0 for a root-only tree)."""
    d = [0] * len(rnd.tree)
    for i in range(1, len(d)):
        d[i] = d[rnd.tree.parents[i]] + 1
    return max(d)


def tokens_per_call(rounds: Sequence[RoundTrace]) -> float:
    """τ: emitted tokens per target forward (1.0 for autoregressive decoding)."""
    return sum(len(r.emitted) for r in rounds) / len(rounds) if rounds else 0.0


def acceptance_rate(rounds: Sequence[RoundTrace]) -> float | None:
    """Accepted / drafted tokens over the run; None when nothing was drafted."""
    drafted = sum(r.n_drafted for r in rounds)
    return sum(r.n_accepted for r in rounds) / drafted if drafted else None


def acceptance_by_position(rounds: Sequence[RoundTrace]) -> list[tuple[int, int, int]]:
    """[(d, reached, accepted)] for draft depth d = 1..max: rounds drafting to depth d, and of those, accepting d tokens."""
    depth = [_depth(r) for r in rounds]
    top = max(depth, default=0)
    return [(d, sum(x >= d for x in depth), sum(r.n_accepted >= d for r, x in zip(rounds, depth) if x >= d))
            for d in range(1, top + 1)]


def accepted_length_histogram(rounds: Sequence[RoundTrace]) -> list[int]:
    """counts[n] = rounds that accepted exactly n draft tokens, n = 0..longest draft."""
    c = Counter(r.n_accepted for r in rounds)
    top = max([_depth(r) for r in rounds] + list(c), default=0)
    return [c.get(n, 0) for n in range(top + 1)]


def time_split(trace: GenerationTrace) -> TimeSplit:
    rs = trace.rounds
    draft, verify, over = (sum(r.draft_ms for r in rs), sum(r.verify_ms for r in rs), sum(r.overhead_ms for r in rs))
    return TimeSplit(draft, verify, over, max(0.0, trace.total_ms - draft - verify - over))


def tokens_per_second(trace: GenerationTrace) -> float:
    return len(trace.output_ids) / (trace.total_ms / 1e3) if trace.total_ms > 0 else 0.0


def speedup(trace: GenerationTrace, baseline: GenerationTrace) -> float | None:
    """Wall-clock speedup in tokens/s over `baseline` (normally autoregressive on the same prompt and settings)."""
    base = tokens_per_second(baseline)
    return tokens_per_second(trace) / base if base > 0 else None


def summarize(trace: GenerationTrace) -> Summary:
    return Summary(trace.method, len(trace.output_ids), len(trace.rounds), tokens_per_call(trace.rounds),
                   acceptance_rate(trace.rounds), tokens_per_second(trace), time_split(trace))


def round_origins(rnd: RoundTrace) -> list[str]:
    """How each emitted token of a round was produced (one of ORIGINS)."""
    n = len(rnd.emitted)
    if rnd.n_drafted == 0:
        return [TARGET] * n
    last = BONUS_TOKEN if rnd.correction == BONUS else CORRECTED if rnd.correction == RESAMPLE else TARGET
    kinds = [DRAFTED] * min(rnd.n_accepted, n)
    return (kinds + [last] * (n - len(kinds)))[:n]


def token_origins(trace: GenerationTrace) -> list[tuple[int, str, int]]:
    """[(token id, origin, round index)] for every output token, in order."""
    return [(t, kind, r.index) for r in trace.rounds for t, kind in zip(r.emitted, round_origins(r))]
