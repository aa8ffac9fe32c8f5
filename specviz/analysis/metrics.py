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

from specviz.core.trace import ACCEPTED, BONUS, RESAMPLE, GenerationTrace, RoundTrace

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
    """[(d, reached, accepted)] for draft depth d = 1..max: rounds drafting to depth d, and of those, accepting d
    tokens."""
    depth = [_depth(r) for r in rounds]
    top = max(depth, default=0)
    return [
        (d, sum(x >= d for x in depth), sum(r.n_accepted >= d for r, x in zip(rounds, depth) if x >= d))
        for d in range(1, top + 1)
    ]


def expected_accepted(rnd: RoundTrace) -> float:
    """The accepted length the draft expected of its tree: the sum over drafted nodes of the product of q along the
    path to each (the chance its whole path is accepted, if each node is accepted with its own q: DySpec's premise)."""
    value = [1.0] * len(rnd.tree)
    for i in range(1, len(rnd.tree)):
        value[i] = value[rnd.tree.parents[i]] * rnd.tree.q[i]
    return sum(value[1:])


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


def loop_speedup(trace: GenerationTrace, baseline: GenerationTrace) -> float | None:
    """`speedup` over the decode loop alone (the rounds' draft + verify + overhead time): the prompt's prefill and
    the set-up, the same work in both runs, left out."""
    loops = [time_split(t) for t in (trace, baseline)]
    ms = [s.total_ms - s.other_ms for s in loops]
    if min(ms) <= 0 or not baseline.output_ids:
        return None
    return (len(trace.output_ids) / ms[0]) / (len(baseline.output_ids) / ms[1])


def summarize(trace: GenerationTrace) -> Summary:
    return Summary(
        trace.method,
        len(trace.output_ids),
        len(trace.rounds),
        tokens_per_call(trace.rounds),
        acceptance_rate(trace.rounds),
        tokens_per_second(trace),
        time_split(trace),
    )


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


# -- the SpecDec++ acceptance head, judged against what the verifier did --------------------------


def judged_labels(rnd: RoundTrace) -> list[int]:
    """1 / 0 for each candidate of a chain round up to and including its first non-accepted one: the candidates
    the verifier judged given an accepted prefix (the event the acceptance head predicts)."""
    out = []
    for status in rnd.status[1:]:
        out.append(int(status == ACCEPTED))
        if not out[-1]:
            break
    return out


def recorded_head(trace: GenerationTrace) -> dict:
    """What the trace says of its acceptance head (`trace.models["acceptance_head"]`; older traces lack it): "lag"
    (bool), "reject_weight" and "heldout_auc" (floats), each only where present and well-formed (a trace file is
    input)."""
    head = trace.models.get("acceptance_head")
    head = head if isinstance(head, dict) else {}
    out = {"lag": head["lag"]} if isinstance(head.get("lag"), bool) else {}
    for key in ("reject_weight", "heldout_auc"):
        v = head.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e6:
            out[key] = float(v)
    return out


def head_lag(trace: GenerationTrace) -> bool:
    """Whether the run's acceptance head was the lagged one (the paper's: step i's factor scores candidate i - 1,
    and step 1's is 1): as recorded, or for older traces inferred from that forced 1."""
    head = recorded_head(trace)
    if "lag" in head:
        return head["lag"]
    firsts = [r.accept_probs[0] for r in trace.rounds if r.accept_probs]
    return bool(firsts) and all(a == 1.0 for a in firsts)


def head_factors(rnd: RoundTrace, lagged: bool) -> tuple[int, tuple[float, ...]]:
    """(offset, factors): candidate i's predicted acceptance is factors[i] = accept_probs[i + offset]. A lagged
    head records candidate i's at step i + 1 (and 1 at step 1), so its round's last candidate has none."""
    probs = rnd.accept_probs or ()
    return (1, probs[1:]) if lagged else (0, probs)


def head_predictions(trace: GenerationTrace) -> list[tuple[float, int]]:
    """(predicted P(accept), realised 0 / 1) for every judged candidate the head scored (SpecDec++ runs)."""
    lagged = head_lag(trace)
    return [pair for r in trace.rounds for pair in zip(head_factors(r, lagged)[1], judged_labels(r))]


def auc(pairs: Sequence[tuple[float, float]]) -> float | None:
    """P(a positive's score > a negative's), ties counting one half. A label y in [0, 1] is a positive of weight y
    and a negative of weight 1 - y (hard labels are 0 / 1; the head's training labels are soft). None without both."""
    groups: dict[float, list[float]] = {}
    for s, y in pairs:
        g = groups.setdefault(s, [0.0, 0.0])
        g[0] += y
        g[1] += 1 - y
    wins = below = 0.0
    for s in sorted(groups):
        pos, neg = groups[s]
        wins += pos * (below + 0.5 * neg)
        below += neg
    total_pos = sum(g[0] for g in groups.values())
    return wins / (total_pos * below) if total_pos > 0 and below > 0 else None


def brier(pairs: Sequence[tuple[float, int]]) -> float | None:
    """Mean squared error of the predicted probabilities; None when empty."""
    return sum((s - y) ** 2 for s, y in pairs) / len(pairs) if pairs else None


def calibration_bins(pairs: Sequence[tuple[float, int]], bins: int = 5) -> list[tuple[float, float, int, float, float]]:
    """[(lo, hi, n, mean predicted, realised rate)] over `bins` equal-width bins of the prediction (empty ones
    left out)."""
    rows = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [(s, y) for s, y in pairs if lo <= s < hi or (b == bins - 1 and s == 1.0)]
        if sel:
            rows.append((lo, hi, len(sel), sum(s for s, _ in sel) / len(sel), sum(y for _, y in sel) / len(sel)))
    return rows
