"""End to end through the decode loop: the first two sampled tokens follow the target's distribution."""

import torch
from scipy.stats import chisquare
from tiny import tiny_llama

from specviz.core.config import ChainConfig, RunConfig, SamplingConfig
from specviz.core.sampling import warp
from specviz.engine.record import generate
from specviz.models.lm import LM
from specviz.models.pair import Pair

V, N = 12, 2000
PROMPT = [3, 7, 5]


def _pair():
    target = tiny_llama(vocab=V, layers=1, hidden=16, seed=21)
    draft = tiny_llama(vocab=V, layers=1, hidden=16, seed=22)
    target.generation_config.eos_token_id = None  # every id is an ordinary token here
    return Pair(LM(target), LM(draft, half_rows=True), None, {})


def _exact(pair, cfg):
    """p(t1) and the marginal p(t2) = sum_t1 p(t1) p(t2 | t1) by enumeration."""
    with torch.inference_mode():
        m = pair.target.model
        p1 = warp(m(torch.tensor([PROMPT], device=m.device)).logits[0, -1], cfg)
        seqs = torch.tensor([PROMPT + [t] for t in range(V)], device=m.device)
        p2 = (p1[:, None] * warp(m(seqs).logits[:, -1], cfg)).sum(0)
    return p1, p2


def test_chain_decode_loop_samples_the_target_distribution():
    pair = _pair()
    counts = torch.zeros(2, V)
    for seed in range(N):
        cfg = SamplingConfig(temperature=1.0, seed=seed)
        out = generate(
            pair, PROMPT, RunConfig(method="chain", max_new_tokens=2, sampling=cfg, chain=ChainConfig(2))
        ).output_ids
        counts[0, out[0]] += 1
        counts[1, out[1]] += 1
    p1, p2 = _exact(pair, SamplingConfig(temperature=1.0))
    for c, p in ((counts[0], p1), (counts[1], p2)):
        assert chisquare(c.numpy(), (p / p.sum() * N).numpy()).pvalue > 1e-3
