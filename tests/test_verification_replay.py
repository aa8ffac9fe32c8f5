"""The verification replay teaches what the verifier did: every step recomputed from the verifier's own inputs
(the target's p, the draft's proposals, the draws) must give the replay's R(y), D(y), verdict, residual and final
draw, and every round's replayed verdicts are the recorded ones."""

import pytest
import torch

from specviz.analysis.verification import BONUS_DRAW, DRAW, END, JUDGE, missing, steps, verdicts
from specviz.core.config import MAX_RECORD_TOP, DySpecConfig, RunConfig, SamplingConfig
from specviz.core.sampling import residual
from specviz.core.trace import ACCEPTED, REJECTED
from specviz.core.tree import children
from specviz.engine import loop
from specviz.engine.record import generate
from specviz.engine.tops import top_pairs

PROMPT = [5, 9, 17, 3, 33, 8, 5, 9, 17, 3]  # repeats: copies from the context happen
RUNS = [
    ("chain", {}, False),
    ("dyspec", {"dyspec": DySpecConfig(budget=10)}, False),
    ("dyspec", {"dyspec": DySpecConfig(budget=10)}, True),
    ("sequoia", {}, False),
]


def captured_run(pair, monkeypatch, method, kw, copy, temperature):
    """A run with the verifier's inputs and verdict kept per round."""
    seen = []

    def keep(tree, probs, proposals, rng, copied=frozenset()):
        verdict = verify(tree, probs, proposals, rng, copied)
        seen.append((probs.clone(), {u: d.clone() for u, d in proposals.items()}, verdict))
        return verdict

    verify = loop.verify_sampled
    monkeypatch.setattr(loop, "verify_sampled", keep)
    s = SamplingConfig(temperature=temperature, seed=4)
    run = RunConfig(method=method, max_new_tokens=40, sampling=s, copy=copy, record_top=MAX_RECORD_TOP, **kw)
    trace = generate(pair, PROMPT, run)
    return trace, [None if len(r.tree) == 1 else seen.pop(0) for r in trace.rounds]  # a root-only round: no verify


def same_top(recorded, tensor):
    want = top_pairs(tensor[None], MAX_RECORD_TOP)[0]
    return [t for t, _ in recorded] == [t for t, _ in want] and all(
        abs(a - b) <= 1e-3 * max(b, 1e-6) for (_, a), (_, b) in zip(recorded, want)
    )


@pytest.mark.parametrize("method,kw,copy", RUNS, ids=[m + ("+copy" if c else "") for m, _, c in RUNS])
def test_every_sampled_step_is_what_the_verifier_did(tiny_pair, monkeypatch, method, kw, copy):
    pair = tiny_pair("random")
    trace, inputs = captured_run(pair, monkeypatch, method, kw, copy, 1.0)
    judged = rejected_then = 0
    for i, rnd in enumerate(trace.rounds):
        if inputs[i] is None:
            continue
        probs, proposals, verdict = inputs[i]
        replay = steps(trace, i)
        kids = children(rnd.tree.parents)
        R = D = None
        parent = -1
        for st in replay:
            if st.kind == JUDGE:
                if st.parent != parent:  # a new node's children: R is the target's p there, D its proposal
                    parent, R = st.parent, probs[st.parent]
                    D = proposals[st.parent].clone() if st.parent in proposals else None
                y = st.token
                if st.copied:
                    assert (st.r, st.d) == (float(R[y]), 1.0)
                elif D is not None:
                    assert (st.r, st.d) == (float(R[y]), float(D[y]))  # exactly the verifier's numbers
                assert st.accepted == (verdict.status[st.node] == ACCEPTED)
                judged += 1
                rejected_then += st.after is not None
                if not st.accepted:
                    if st.copied:
                        R = residual(R, torch.nn.functional.one_hot(torch.tensor(y), R.shape[-1]).to(R))
                    elif D is not None:
                        R = residual(R, D)
                        D[y] = 0.0
                        D = D / D.sum() if D.sum() > 0 else None
                    assert torch.equal(R, verdict.residuals[st.node])  # the residual the next step reads
                    assert same_top(rnd.residual_top[st.node], R)
            elif st.kind == DRAW:
                assert st.token == verdict.emitted[-1] and st.after is not None and kids[st.parent]
                assert same_top(st.bars, verdict.residuals[st.after])  # drawn from the last residual
            else:
                assert st.kind in (BONUS_DRAW, END) and (st.kind == END or not kids[st.parent])
        assert verdicts(replay) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}
    assert judged > 10
    assert rejected_then > 0 or method != "dyspec"  # a sibling judged against the residual its elder left


@pytest.mark.parametrize("method,kw,copy", RUNS[:2], ids=["chain", "dyspec"])
def test_greedy_rounds_replay_to_their_recorded_verdicts(tiny_pair, method, kw, copy):
    trace = generate(tiny_pair("random"), PROMPT, RunConfig(method=method, max_new_tokens=40, copy=copy, **kw))
    for i, rnd in enumerate(trace.rounds):
        replay = steps(trace, i)
        assert verdicts(replay) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}
        for st in replay:
            if st.kind == JUDGE:
                assert st.accepted == (st.token == st.target)


def test_a_trace_without_the_draws_names_what_is_missing(tiny_pair):
    run = RunConfig(method="chain", max_new_tokens=8, sampling=SamplingConfig(temperature=1.0, seed=1))
    trace = generate(tiny_pair("random"), PROMPT, run)
    i = next(i for i, r in enumerate(trace.rounds) if len(r.tree) > 1)
    old = trace.rounds[i].__class__(**{**trace.rounds[i].__dict__, "judged": None})
    assert missing(old, greedy=False) == ["judged"]
    trace = trace.__class__(**{**trace.__dict__, "rounds": (*trace.rounds[:i], old, *trace.rounds[i + 1 :])})
    with pytest.raises(ValueError, match="does not record judged"):
        steps(trace, i)
