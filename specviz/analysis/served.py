"""A served engine's run against specviz's reference, step by step and over the set (no torch).

At every engine step (`core.served`'s notation) specviz replayed one round from the same prefix. At T = 0 each
step where the two counts differ gets a reason (`core.served.REASONS`), found from the replayed round's own records:
``p_top[j]`` is specviz's target at draft position j, ``q_top[j]`` its draft there, and the engine's step tokens
are its target's choices. Walking the positions both targets saw the same prefix at (up to one past the first
draft token the engine's output leaves):

1. specviz's target prefers another token than the engine emitted: ``target_tie`` when the two tokens' log
   probabilities lie within `TIE_LOGIT` of each other under specviz's target, else ``target``;
2. the engine accepted more: specviz's draft chose another token than the one the engine's draft must have
   proposed (it was accepted): ``draft_tie`` within `TIE_LOGIT` under specviz's draft, else ``draft``;
3. the engine accepted fewer: specviz's draft proposed the engine's own next token, which greedy verification
   must accept; ``draft_tie`` where the draft nearly chose another, else ``verification``.

At T > 0 the counts of one step differ by their random draws, so the two are compared over the set only (acceptance
by position with intervals). Acceptance length is vLLM's: 1 + accepted / steps.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import fisher_exact

from specviz.analysis.compare import Interval, first_difference, paired_bootstrap
from specviz.core.served import REASONS, EngineRun, PromptRecord, StepDifference, step_starts, step_tokens
from specviz.core.trace import GenerationTrace, RoundTrace

# Two candidates closer than this in log probability are a near-tie: bf16 keeps 8 significant bits, so logits of
# size 10 to 20 round in steps of 0.06 to 0.12, and two engines' different kernels move them by a few such steps.
TIE_LOGIT = 0.25
Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


def _prob(top: list | None, token: int) -> float | None:
    """`token`'s probability in a recorded top list, None where it fell outside the top."""
    return next((p for t, p in top or () if t == token), None)


def _near(top: list | None, a: int, b: int) -> tuple[bool, dict]:
    """Whether a and b are a near-tie in the distribution `top` is the top of, and their probabilities."""
    pa, pb = _prob(top, a), _prob(top, b)
    tie = pa is not None and pb is not None and pa > 0 and pb > 0 and abs(math.log(pa) - math.log(pb)) <= TIE_LOGIT
    return tie, {"tokens": [a, b], "p": [pa, pb]}


def _target_choice(rnd: RoundTrace, j: int, top: list | None) -> int | None:
    """specviz's target's greedy token at draft position j: the drafted token where the verifier accepted it, else
    the most probable other token (a rejected token is never the argmax; exact ties keep the verifier's order)."""
    drafted = rnd.tree.tokens[j]
    if rnd.status[j] == "accepted":
        return drafted
    return next((t for t, _ in top or () if t != drafted), None)


def classify(
    rnd: RoundTrace, engine_tokens: Sequence[int], accepted: int, drafted: int, position: int = 0
) -> StepDifference | None:
    """A greedy step (starting at output `position`) compared: None where specviz accepts what the engine accepted,
    else the difference and why."""
    ours = min(rnd.n_accepted, drafted)
    if ours == accepted:
        return None
    draft = list(rnd.tree.tokens[1:])  # a chain: node j drafts position j
    common = first_difference(draft, list(engine_tokens))
    common = len(draft) if common is None else common  # the draft tokens the engine's output repeats
    base = {"step": rnd.index, "position": position, "engine": accepted, "specviz": ours}
    for j in range(1, min(common + 1, len(draft), len(engine_tokens)) + 1):
        top = rnd.p_top[j] if rnd.p_top else None
        choice = _target_choice(rnd, j, top)
        if choice is not None and choice != engine_tokens[j - 1]:
            tie, detail = _near(top, choice, engine_tokens[j - 1])
            detail |= {"position": j}  # tokens: [specviz's target's choice, the engine's]
            return StepDifference(**base, reason="target_tie" if tie else "target", detail=detail)
    j = min(ours, accepted) + 1  # the first draft position the two counts disagree on
    q_top = rnd.q_top[j] if rnd.q_top and j < len(rnd.tree) else None
    if j > len(draft):  # specviz's draft stopped short (an end-of-text token drafted)
        return StepDifference(**base, reason="draft", detail={"tokens": [None, engine_tokens[j - 1]], "position": j})
    if accepted > ours:
        tie, detail = _near(q_top, draft[j - 1], engine_tokens[j - 1])
        return StepDifference(**base, reason="draft_tie" if tie else "draft", detail=detail | {"position": j})
    runner_up = next((t for t, _ in q_top or () if t != draft[j - 1]), draft[j - 1])
    tie, detail = _near(q_top, draft[j - 1], runner_up)
    return StepDifference(**base, reason="draft_tie" if tie else "verification", detail=detail | {"position": j})


def compare_steps(record: PromptRecord, replay: GenerationTrace) -> tuple[list[int], list[StepDifference]]:
    """specviz's count at each engine step (capped at the engine's draft length) and, greedy, the steps that
    differ. The last step is left out where the length limit cut it (its count is not all the engine's)."""
    acc, dr = record.per_step_accepted or [], record.per_step_drafted or []
    steps = step_tokens(record.output_ids, acc)
    starts = step_starts(len(record.output_ids), acc)
    counts = [min(r.n_accepted, d) for r, d in zip(replay.rounds, dr)]
    if not replay.greedy:
        return counts, []
    diffs = (
        classify(rnd, toks, acc[s], dr[s], starts[s])
        for s, (rnd, toks) in enumerate(zip(replay.rounds, steps))
        if len(toks) == acc[s] + 1  # a step the length limit cut is not all the engine's
    )
    return counts, [d for d in diffs if d is not None]


# -- over the set ---------------------------------------------------------------------------------------------


def acceptance_length(accepted: Sequence[int]) -> float | None:
    """vLLM's mean acceptance length: 1 + accepted tokens / steps (None with no step)."""
    return 1 + sum(accepted) / len(accepted) if accepted else None


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for k successes in n trials ((0, 1) with no trial)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


@dataclass(frozen=True)
class PositionRate:
    position: int  # draft position d = 1, 2, ...
    reached: int  # steps that drafted d tokens or more
    accepted: int  # of those, steps that accepted d or more
    lo: float
    hi: float

    @property
    def rate(self) -> float | None:
        return self.accepted / self.reached if self.reached else None


def by_position(accepted: Sequence[int], drafted: Sequence[int]) -> list[PositionRate]:
    """Per draft position d, the share of steps drafting d or more that accepted d or more, with a 95 % interval."""
    top = max(drafted, default=0)
    out = []
    for d in range(1, top + 1):
        n = sum(x >= d for x in drafted)
        k = sum(a >= d for a, x in zip(accepted, drafted) if x >= d)
        out.append(PositionRate(d, n, k, *wilson(k, n)))
    return out


def histogram(accepted: Sequence[int], drafted: Sequence[int]) -> list[int]:
    """counts[n] = steps that accepted exactly n draft tokens, n = 0 .. longest draft."""
    c = Counter(accepted)
    return [c.get(n, 0) for n in range(max([*drafted, *accepted], default=0) + 1)]


def pooled_steps(run: EngineRun, reference: bool = False) -> tuple[list[int], list[int]]:
    """Every step's (accepted, drafted) over the run's prompts: the engine's, or specviz's at the same steps."""
    acc, dr = [], []
    for p in run.prompts:
        if p.per_step_accepted is None or (reference and p.reference is None):
            continue
        ours = p.reference.per_step_accepted if reference else p.per_step_accepted
        acc += ours
        dr += p.per_step_drafted[: len(ours)]
    return acc, dr


def reason_counts(run: EngineRun) -> dict[str, int]:
    """How many differing steps each reason explains over the run (reasons in `core.served.REASONS` order)."""
    c = Counter(d.reason for p in run.prompts if p.reference for d in p.reference.differences)
    return {k: c[k] for k in REASONS if c[k]}


# a sampled run's acceptance at a draft position differs from the algorithm's when Fisher's exact test gives less
SAMPLED_ALPHA = 1e-3


@dataclass(frozen=True)
class RateCheck:
    """At one draft position of a sampled run: the engine's steps accepting it against specviz's at the same steps
    (each the algorithm's Bernoulli draw at the same prefix when the engine is exact), and Fisher's two-sided p."""

    position: int
    engine: tuple[int, int]  # (accepted d or more, drafted d or more)
    specviz: tuple[int, int]
    p_value: float


def sampled_check(run: EngineRun) -> list[RateCheck]:
    """Per draft position, whether the engine accepts as often as specviz's algorithm at the same steps: at T > 0 a
    step's count is random, but over a set the two rates must agree."""
    ours = {r.position: r for r in by_position(*pooled_steps(run, reference=True))}
    out = []
    for e in by_position(*pooled_steps(run)):
        o = ours.get(e.position)
        if o is None or not e.reached or not o.reached:
            continue
        table = [[e.accepted, e.reached - e.accepted], [o.accepted, o.reached - o.accepted]]
        out.append(
            RateCheck(e.position, (e.accepted, e.reached), (o.accepted, o.reached), float(fisher_exact(table)[1]))
        )
    return out


def tokens_per_s(p: PromptRecord) -> float:
    return len(p.output_ids) / p.wall_s if p.wall_s > 0 else 0.0


@dataclass(frozen=True)
class RunPair:
    """Two engine runs over the same prompts (two versions, two K): per-prompt differences B - A with intervals."""

    a: str
    b: str
    prompts: tuple[tuple[PromptRecord, PromptRecord], ...]
    acceptance_length: Interval | None
    tokens_per_s: Interval
    unpaired: int


def pair_runs(a: EngineRun, b: EngineRun, seed: int = 0) -> RunPair:
    """The prompts both runs hold (the same prompt token ids), in A's order."""
    by_ids = {}
    for p in b.prompts:
        by_ids.setdefault(tuple(p.prompt_ids), p)
    pairs = [(p, by_ids[tuple(p.prompt_ids)]) for p in a.prompts if tuple(p.prompt_ids) in by_ids]
    if not pairs:
        raise ValueError("the two engine runs share no prompt (the same prompt token ids)")
    rng = np.random.default_rng(seed)
    lengths = [
        (acceptance_length(x.per_step_accepted or []), acceptance_length(y.per_step_accepted or [])) for x, y in pairs
    ]
    al = (
        paired_bootstrap([y - x for x, y in lengths], rng)
        if all(x is not None and y is not None for x, y in lengths)
        else None
    )
    tps = paired_bootstrap([tokens_per_s(y) - tokens_per_s(x) for x, y in pairs], rng)
    return RunPair(a.label, b.label, tuple(pairs), al, tps, len(a.prompts) - len(pairs))
