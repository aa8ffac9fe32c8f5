"""A round's verification, step by step, in the order the verifier ran it (`core.verify`), from what the trace
records alone: the records a teacher steps through (`viz.verification` puts them in words and bars).

Greedy: at each depth the drafted children are compared, in order, with the target's choice there (the token the
round emitted at that depth); the first equal one is kept. Sampled: child y of a node is judged with its draw u
against min(1, R(y) / D(y)), R the target's distribution at the node (after each rejected sibling, the residual
norm(max(0, R - D))) and D the draft's (its earlier children removed); a copied child's D is a point mass. After
the last rejection the token is drawn from the residual; after a full accept, the bonus token from the target.

Notation: R(y), D(y) as recorded in `RoundTrace.judged`; u in `RoundTrace.u`; a step's `bars` is the top of the
distribution it reads (`p_top` of the first sibling, `residual_top` after a rejection).
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.trace import ACCEPTED, REJECTED, UNVISITED, GenerationTrace, RoundTrace
from specviz.core.tree import children

JUDGE, DRAW, BONUS_DRAW, END = "judge", "draw", "bonus", "end"  # step kinds


@dataclass(frozen=True)
class Step:
    """One step of a round's verification.

    kind: JUDGE (a child judged), DRAW (the token drawn from the residual, or the greedy correction), BONUS_DRAW (the
    token after a fully accepted path) or END (the round's length cut it short). node: the judged child (JUDGE), else
    None; parent: the node whose children are judged; depth: the parent's depth. token: the judged or drawn token.
    accepted: JUDGE's verdict. greedy: the round's regime. target: greedy, the target's choice at this depth.
    r, d, u: sampled JUDGE, R(y), D(y) and the draw (d = 1 for a copied child). copied: a child copied from the
    context. after: the rejected sibling whose residual this step reads (None: the target's own distribution).
    bars: the top of the distribution the step reads, [[token, probability], ...] (None where not recorded)."""

    kind: str
    parent: int
    depth: int
    token: int | None
    node: int | None = None
    accepted: bool | None = None
    greedy: bool = True
    target: int | None = None
    r: float | None = None
    d: float | None = None
    u: float | None = None
    copied: bool = False
    after: int | None = None
    bars: tuple | None = None

    @property
    def ratio(self) -> float | None:
        """min(1, R(y) / D(y)): the probability this child is accepted."""
        if self.r is None or self.d is None:
            return None
        return 1.0 if self.d <= 0 else min(1.0, self.r / self.d)


def missing(rnd: RoundTrace, greedy: bool) -> list[str]:
    """The fields a replay of this round needs that the trace does not record (sampled rounds: `u` and `judged`)."""
    if greedy or len(rnd.tree) == 1:
        return []
    return [name for name in ("u", "judged") if getattr(rnd, name) is None]


def steps(trace: GenerationTrace, index: int) -> list[Step]:
    """Round `index`'s verification, step by step (ValueError naming the missing fields where it cannot be)."""
    rnd = trace.rounds[index]
    greedy = trace.greedy
    lacking = missing(rnd, greedy)
    if lacking:
        raise ValueError(
            f"round {rnd.index} cannot be replayed: this trace does not record {' and '.join(lacking)} "
            "(recorded by an older specviz); record it again to step through its verification"
        )
    kids = children(rnd.tree.parents)
    out: list[Step] = []
    u, depth = 0, 0
    while True:
        after, nxt = None, None
        for c in kids[u]:
            if rnd.status[c] == UNVISITED:
                break
            step = _judge(rnd, c, u, depth, greedy, after)
            out.append(step)
            if step.accepted:
                nxt = c
                break
            after = c
        if nxt is None:
            break
        u, depth = nxt, depth + 1
    if depth + 1 > len(rnd.emitted):  # the run's length ended the round before its last token
        out.append(Step(END, u, depth, None, greedy=greedy))
        return out
    token = rnd.emitted[depth]
    kind = BONUS_DRAW if not kids[u] else DRAW  # a leaf reached, or every child of u rejected
    bars = _top(rnd.residual_top, after) if after is not None and not greedy else None
    out.append(Step(kind, u, depth, token, greedy=greedy, target=token if greedy else None, after=after, bars=bars))
    return out


def _judge(rnd: RoundTrace, c: int, parent: int, depth: int, greedy: bool, after: int | None) -> Step:
    y, copied = rnd.tree.tokens[c], c in set(rnd.copied or ())
    if greedy:
        target = rnd.emitted[depth] if depth < len(rnd.emitted) else None
        bars = _top(rnd.p_top, c)
        return Step(JUDGE, parent, depth, y, c, y == target, True, target, copied=copied, after=after, bars=bars)
    judged, u = rnd.judged[c], rnd.u[c]
    bars = _top(rnd.residual_top, after) if after is not None else _top(rnd.p_top, c)
    if judged is None:  # the draft's distribution was exhausted: rejected without a draw
        return Step(JUDGE, parent, depth, y, c, False, False, copied=copied, after=after, bars=bars)
    r, d = judged
    return Step(JUDGE, parent, depth, y, c, u * d < r, False, r=r, d=d, u=u, copied=copied, after=after, bars=bars)


def _top(tops, node) -> tuple | None:
    if tops is None or node is None or node >= len(tops) or tops[node] is None:
        return None
    return tuple(tuple(pair) for pair in tops[node])


def verdicts(step_list: list[Step]) -> dict[int, str]:
    """The status each judged node gets in the replay (to hold against the recorded one)."""
    return {s.node: ACCEPTED if s.accepted else REJECTED for s in step_list if s.kind == JUDGE}
