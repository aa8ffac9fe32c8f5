"""`specviz copy-calibration`: fit how a copy's acceptance depends on its prior and on the draft's own rating.

A greedy DySpec round with copying runs the draft at the root before it values the copy, so it knows the draft's
probability q of the first copied token as well as the token's prior alpha_1 (`specviz.core.priors.LOOKUP_ACCEPTANCE`).
This tool decodes composed training prompts (never Spec-Bench) with DySpec and copying, keeps (alpha_1, q, whether
the target's greedy token was the copied one) for every round that had a copy, and fits
P(accepted) = sigmoid(b0 + b1 logit(alpha_1) + b2 logit(q)) by logistic regression: the numbers behind
`specviz.core.priors.COPY_CALIBRATION`, printed as JSON with the accuracy table they summarise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import torch
from tqdm import tqdm

from specviz.core.args import positive
from specviz.core.config import DTYPES, DySpecConfig, LookupConfig, ModelConfig, RunConfig
from specviz.core.prompts import encode_prompt
from specviz.core.sampling import make_rng
from specviz.engine.loop import iter_rounds
from specviz.methods.lookup.plan import logit
from specviz.methods.registry import make_drafter
from specviz.models.loading import load_pair
from specviz.train.prompts import compose

Q_BINS = (0.0, 0.01, 0.05, 0.15, 0.3, 0.5, 0.8, 1.0)


def copy_ratings(pair, prompts: Sequence[Sequence[int]], run: RunConfig, progress: bool = True) -> list[tuple]:
    """(alpha_1, q, accepted) for each greedy round of `run` (a tree method with copying) that offered a copy: the
    first copied token's prior, the draft's probability of it, and whether the target's argmax was that token."""
    rows = []
    for i, ids in enumerate(tqdm(prompts, desc="copy ratings", unit="prompt", disable=not progress, file=sys.stderr)):
        rng = make_rng(run.sampling.seed + i, pair.target.device)
        drafter = make_drafter(run, pair, rng)
        for rnd in iter_rounds(pair, ids, run, drafter, rng):
            c = rnd.copy_rating
            if c is not None and rnd.emitted:
                rows.append((c["prior"], c["q"], rnd.emitted[0] == c["token"]))
    return rows


def fit(rows: Sequence[tuple]) -> tuple[float, float, float]:
    """(b0, b1, b2) of the logistic regression of `accepted` on logit(alpha_1) and logit(q) (both clipped to
    [1e-4, 1 - 1e-4])."""
    if len(rows) < 3:
        raise ValueError(f"need a few rounds with copies to fit, got {len(rows)}")
    x = torch.tensor([[1.0, logit(a), logit(q)] for a, q, _ in rows], dtype=torch.float64)
    y = torch.tensor([float(ok) for *_, ok in rows], dtype=torch.float64)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=200, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y) + 1e-4 * (w[1:] ** 2).sum()
        value.backward()
        return value

    opt.step(loss)
    return tuple(round(float(v), 3) for v in w.detach())


def by_rating(rows: Sequence[tuple]) -> list[dict]:
    """Rounds, their acceptance and their mean prior by the draft's probability of the copied token."""
    out = []
    for lo, hi in zip(Q_BINS, Q_BINS[1:]):
        got = [r for r in rows if lo <= r[1] < hi or (hi == 1.0 and r[1] == 1.0)]
        if got:
            out.append(
                {
                    "q": [lo, hi],
                    "rounds": len(got),
                    "accepted": round(sum(r[2] for r in got) / len(got), 3),
                    "mean_prior": round(sum(r[0] for r in got) / len(got), 3),
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="specviz copy-calibration", description=__doc__.splitlines()[0].split(": ")[1])
    ap.add_argument("--dtype", default=ModelConfig.dtype, choices=DTYPES)
    ap.add_argument("--prompts", type=positive(int), default=48, help="composed training prompts")
    ap.add_argument("--seed", type=int, default=7, help="which composed prompts")
    ap.add_argument("--tokens", type=positive(int), default=128, help="new tokens per prompt")
    ap.add_argument("--budget", type=positive(int), default=4, help="DySpec's node budget (the README's fastest, 4)")
    a = ap.parse_args(argv)
    pair = load_pair(ModelConfig(dtype=a.dtype))
    prompts = [encode_prompt(pair.tokenizer, text) for _, text in compose(a.prompts, a.seed)]
    run = RunConfig(
        method="dyspec",
        max_new_tokens=a.tokens,
        copy=True,
        lookup=LookupConfig(draft_rated=False),
        dyspec=DySpecConfig(budget=a.budget),
    )
    rows = copy_ratings(pair, prompts, run)
    print(json.dumps({"rounds": len(rows), "copy_calibration": fit(rows), "by_rating": by_rating(rows)}, indent=1))


if __name__ == "__main__":
    main()
