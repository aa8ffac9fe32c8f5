"""Numbers over a set of prompts: why a draft's acceptance is low, as pure functions of traces (no torch).

A `RunSet` (`analysis.runset`) is one method's traces over a set of prompts (a `generate --prompts` file, or one
setting of a bench run kept with `--traces`). Every function here pools rounds or judged nodes across the set;
`analysis.compare` pairs two sets prompt by prompt.

Judged node: a drafted node the verifier decided on (accepted or rejected; not one left unvisited below a rejection).
Sibling rank r: a judged node is its parent's r-th drafted child, in the order the drafter drew them (Sequoia's
positional acceptance vector reads acceptance by r).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from specviz.analysis.metrics import (
    acceptance_by_position,
    auc,
    brier,
    calibration_bins,
    head_predictions,
    time_split,
    tokens_per_call,
    tokens_per_second,
)
from specviz.analysis.runset import RunSet
from specviz.core.prompts import task_of
from specviz.core.trace import ACCEPTED, REJECTED, RESAMPLE, GenerationTrace, RoundTrace
from specviz.core.tree import children

# -- per prompt --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptRow:
    qid: str
    category: str
    tokens: int
    rounds: int
    tau: float
    tokens_per_s: float
    acceptance: float | None  # accepted / drafted nodes
    prompt: str


def prompt_rows(rs: RunSet) -> list[PromptRow]:
    rows = []
    for r in rs.runs:
        t = r.trace
        drafted = sum(x.n_drafted for x in t.rounds)
        rows.append(
            PromptRow(
                r.qid,
                r.category,
                len(t.output_ids),
                len(t.rounds),
                tokens_per_call(t.rounds),
                tokens_per_second(t),
                sum(x.n_accepted for x in t.rounds) / drafted if drafted else None,
                t.prompt_text,
            )
        )
    return rows


def worst_prompts(rows: Sequence[PromptRow], n: int = 5) -> list[int]:
    """Indices into `rows` (`prompt_rows`) of the n prompts with the lowest τ (ties: fewer tokens/s first)."""
    return sorted(range(len(rows)), key=lambda i: (rows[i].tau, rows[i].tokens_per_s))[:n]


# -- acceptance ----------------------------------------------------------------------------------------


def position_acceptance(rs: RunSet) -> dict[str, list[tuple[int, int, int]]]:
    """{"all": [(d, reached, accepted)], task: [...]}: acceptance at draft depth d (metrics' definition), pooled
    over the set and per task (Spec-Bench's eight MT-bench categories are one task; other categories stand alone)."""
    out = {"all": acceptance_by_position(rs.rounds)}
    by_cat: dict[str, list[RoundTrace]] = defaultdict(list)
    for r in rs.runs:
        by_cat[task_of(r.category)].extend(r.trace.rounds)
    if len(by_cat) > 1:
        out.update({c: acceptance_by_position(by_cat[c]) for c in sorted(by_cat)})
    return out


def judged_nodes(rnd: RoundTrace) -> list[int]:
    """Drafted nodes the verifier decided on (accepted or rejected), copied ones left out."""
    copied = set(rnd.copied or ())
    return [c for c in range(1, len(rnd.tree)) if rnd.status[c] in (ACCEPTED, REJECTED) and c not in copied]


def sibling_rank_acceptance(rs: RunSet) -> list[tuple[int, int, int]]:
    """[(r, judged, accepted)] for sibling rank r = 1..: how often a parent's r-th drawn child was accepted when
    judged. For a chain only r = 1 exists."""
    judged, accepted = Counter(), Counter()
    for rnd in rs.rounds:
        kids = children(rnd.tree.parents)
        rank = {c: i + 1 for u in kids for i, c in enumerate(u)}
        for c in judged_nodes(rnd):
            judged[rank[c]] += 1
            accepted[rank[c]] += rnd.status[c] == ACCEPTED
    return [(r, judged[r], accepted[r]) for r in sorted(judged)]


def binned(pairs: Sequence[tuple[float, int]], edges: Sequence[float]) -> list[tuple[float, float, int, float, float]]:
    """[(lo, hi, n, mean x, accepted rate)] of (x, accepted) pairs in the bins [edges[i], edges[i + 1]) (the last
    bin closed); empty bins left out."""
    rows = []
    for i, (lo, hi) in enumerate(zip(edges, edges[1:])):
        last = i == len(edges) - 2
        sel = [(x, y) for x, y in pairs if lo <= x < hi or (last and x == hi)]
        if sel:
            rows.append((lo, hi, len(sel), sum(x for x, _ in sel) / len(sel), sum(y for _, y in sel) / len(sel)))
    return rows


PROB_EDGES = tuple(i / 10 for i in range(11))


def q_pairs(rs: RunSet) -> list[tuple[float, int]]:
    """(q, accepted) for every judged drafted node: DySpec grows its tree by q, betting that q predicts this."""
    return [(rnd.tree.q[c], int(rnd.status[c] == ACCEPTED)) for rnd in rs.rounds for c in judged_nodes(rnd)]


def q_reliability(rs: RunSet) -> dict:
    """How well the draft's q predicts acceptance: reliability bins, AUC and Brier score over judged nodes."""
    pairs = q_pairs(rs)
    return {"bins": binned(pairs, PROB_EDGES), "auc": auc(pairs), "brier": brier(pairs), "n": len(pairs)}


def margin_pairs(rs: RunSet) -> list[tuple[float, int]]:
    """(the target's top-1 probability minus its top-2, accepted) at every judged node whose round recorded
    p_top: a flat target (small margin) is where any draft struggles."""
    out = []
    for rnd in rs.rounds:
        for c in judged_nodes(rnd):
            top = rnd.p_top[c] if rnd.p_top is not None else None
            if top:
                out.append((top[0][1] - (top[1][1] if len(top) > 1 else 0.0), int(rnd.status[c] == ACCEPTED)))
    return out


def entropy_pairs(rs: RunSet) -> list[tuple[float, int]]:
    """(the target's entropy in nats where the node was judged, accepted) for rounds that recorded p_entropy."""
    return [
        (rnd.p_entropy[c], int(rnd.status[c] == ACCEPTED))
        for rnd in rs.rounds
        if rnd.p_entropy is not None
        for c in judged_nodes(rnd)
        if rnd.p_entropy[c] is not None
    ]


def entropy_edges(pairs: Sequence[tuple[float, int]], bins: int = 8) -> tuple[float, ...]:
    """Equal-width bins from 0 to the largest entropy seen (at least 1 nat)."""
    top = max([1.0] + [x for x, _ in pairs])
    top = math.ceil(top * 2) / 2
    return tuple(top * i / bins for i in range(bins + 1))


def head_calibration(rs: RunSet) -> dict | None:
    """SpecDec++'s head over the whole set: reliability bins, AUC, Brier; None for other methods."""
    if rs.method != "specdecpp":
        return None
    pairs = [p for t in rs.traces for p in head_predictions(t)]
    return {"bins": calibration_bins(pairs, 10), "auc": auc(pairs), "brier": brier(pairs), "n": len(pairs)}


# -- time ------------------------------------------------------------------------------------------------


def set_time_split(rs: RunSet) -> dict[str, float]:
    """Milliseconds summed over the set: draft, verify, overhead and other (prefill, glue)."""
    out = dict.fromkeys(("draft", "verify", "overhead", "other"), 0.0)
    for t in rs.traces:
        s = time_split(t)
        out["draft"] += s.draft_ms
        out["verify"] += s.verify_ms
        out["overhead"] += s.overhead_ms
        out["other"] += s.other_ms
    return out


def pooled(rs: RunSet) -> dict:
    """The set's headline: prompts, tokens, rounds, τ and tokens/s pooled over prompts."""
    tokens = sum(len(t.output_ids) for t in rs.traces)
    rounds = sum(len(t.rounds) for t in rs.traces)
    ms = sum(t.total_ms for t in rs.traces)
    return {
        "prompts": len(rs.runs),
        "tokens": tokens,
        "rounds": rounds,
        "tau": tokens / rounds if rounds else 0.0,
        "tokens_per_s": tokens / (ms / 1e3) if ms > 0 else 0.0,
    }


# -- where the draft and the target part ---------------------------------------------------------------


@dataclass(frozen=True)
class Disagreement:
    drafted: int  # the draft's best rejected guess where the accepted path ended
    target: int  # the token the target put there instead
    count: int
    examples: tuple[tuple[str, int, int], ...]  # (qid, round index, output position)


def disagreement_sites(trace: GenerationTrace) -> list[tuple[int, int, int, int]]:
    """[(drafted, target, round index, output position)] for every round whose accepted path ended at a node with
    drafted children, all rejected: the draft's most probable child there against the target's token."""
    out, pos = [], 0
    for rnd in trace.rounds:
        end = rnd.accepted_path[-1] if rnd.accepted_path else 0
        copied = set(rnd.copied or ())
        kids = [c for c in children(rnd.tree.parents)[end] if rnd.status[c] == REJECTED and c not in copied]
        if rnd.correction == RESAMPLE and kids and len(rnd.emitted) > rnd.n_accepted:
            best = max(kids, key=lambda c: rnd.tree.q[c])
            out.append((rnd.tree.tokens[best], rnd.emitted[rnd.n_accepted], rnd.index, pos + rnd.n_accepted))
        pos += len(rnd.emitted)
    return out


def disagreements(rs: RunSet, top: int = 20, examples: int = 3) -> list[Disagreement]:
    """The most frequent (drafted -> target) pairs over the set, each with a few places it happened."""
    count: Counter = Counter()
    where: dict[tuple[int, int], list] = defaultdict(list)
    for r in rs.runs:
        for drafted, target, index, pos in disagreement_sites(r.trace):
            count[drafted, target] += 1
            if len(where[drafted, target]) < examples:
                where[drafted, target].append((r.qid, index, pos))
    return [Disagreement(d, t, n, tuple(where[d, t])) for (d, t), n in count.most_common(top)]


def context_snippet(trace: GenerationTrace, pos: int, before: int = 8) -> str:
    """The output text of the `before` tokens that precede output position `pos`."""
    ids = trace.output_ids[max(0, pos - before) : pos]
    if trace.pieces is not None:
        return "".join(trace.pieces[max(0, pos - before) : pos])
    return "".join(trace.token_text.get(t, "") for t in ids)
