"""Which rounds of a trace teach what: each lesson kind's test of a round, and the round of a trace that shows it
best. `specviz lessons` records runs of the shipped pair and keeps, for each kind, the first round that passes."""

from __future__ import annotations

from collections.abc import Callable

from specviz.core.trace import ACCEPTED, REJECTED, GenerationTrace, RoundTrace
from specviz.core.tree import children

VERIFY, STOP, GROWTH = "verify", "stop", "growth"  # the view a lesson opens on


def full_accept(trace: GenerationTrace, r: RoundTrace) -> bool:
    """A greedy chain of at least three drafted tokens, every one accepted, and the bonus token after them."""
    return trace.greedy and r.n_drafted >= 3 and r.n_accepted == r.n_drafted and r.correction == "bonus"


def resampled(trace: GenerationTrace, r: RoundTrace) -> bool:
    """A sampled chain round whose rejected token was replaced by a draw from the residual (recorded)."""
    rejected = [c for c in range(1, len(r.tree)) if r.status[c] == REJECTED]
    return (
        not trace.greedy
        and r.correction == "resample"
        and bool(rejected)
        and r.residual_top is not None
        and r.residual_top[rejected[-1]] is not None
    )


def second_sibling(trace: GenerationTrace, r: RoundTrace) -> bool:
    """A sampled tree round where a child was accepted after an elder sibling was rejected: judged against the
    residual its elder left."""
    if trace.greedy:
        return False
    kids = children(r.tree.parents)
    return any(
        r.status[c] == ACCEPTED and any(r.status[e] == REJECTED for e in kids[u][: kids[u].index(c)])
        for u in range(len(r.tree))
        for c in kids[u]
    )


def threshold_stop(trace: GenerationTrace, r: RoundTrace) -> bool:
    """SpecDec++ stopped drafting because P(at least one rejection) crossed h, after at least two tokens."""
    return r.stop_reason == "threshold" and r.stop_probs is not None and len(r.stop_probs) >= 2


def grew_toward(trace: GenerationTrace, r: RoundTrace) -> bool:
    """A DySpec tree whose growth is recorded and whose accepted path went down a branch other than the first child
    somewhere, at least two tokens deep: the tree spent nodes where the target then went."""
    if r.expand_order is None or r.n_accepted < 2:
        return False
    kids = children(r.tree.parents)
    return any(kids[r.tree.parents[c]][0] != c for c in r.accepted_path)


def copied(trace: GenerationTrace, r: RoundTrace) -> bool:
    """A token copied from the context (prompt lookup) and accepted."""
    return any(r.status[c] == ACCEPTED for c in r.copied or ())


KINDS: dict[str, tuple[Callable[[GenerationTrace, RoundTrace], bool], str]] = {
    "full-accept": (full_accept, VERIFY),
    "resampled": (resampled, VERIFY),
    "second-sibling": (second_sibling, VERIFY),
    "threshold-stop": (threshold_stop, STOP),
    "grew-toward": (grew_toward, GROWTH),
    "copied": (copied, VERIFY),
}


def find(trace: GenerationTrace, kind: str) -> int | None:
    """The index of the first round of `trace` that shows lesson `kind`, or None."""
    test = KINDS[kind][0]
    return next((i for i, r in enumerate(trace.rounds) if test(trace, r)), None)
