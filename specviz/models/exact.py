"""The loader's exactness probe: a target's logits through `LM` (its cache, tree mask, kernels and output layer)
against the model's own forward with the stock kernels.

A family that transforms its logits in a way `LM` does not reproduce (a scale, a cap, a bias) keeps greedy output
equal and samples from the wrong distribution, and comparing with specviz's own autoregressive path cannot see
it: only the model's own forward can. `probe` runs one short sequence both ways, the last tokens once as a chain
and once as a tree beside a sibling branch, and `check` refuses the model with a sentence where they differ.
"""

from __future__ import annotations

import torch

from specviz import kernels
from specviz.core.device import to_device
from specviz.models.lm import LM

PREFIX, TAIL = 8, 4  # the probe's prefix, then TAIL tokens as a chain beside a one-token sibling branch
TOLERANCE, HALF_TOLERANCE = 1e-4, 8e-2  # relative to the largest logit: fp32; bf16 / fp16 (rounding, kernels)


def probe_ids(vocab: int) -> list[int]:
    """A fixed, ordinary-looking probe sequence (no id below 3: BOS / EOS / pad in most vocabularies)."""
    return [3 + (7919 * i + 104729) % max(1, vocab - 3) for i in range(PREFIX + TAIL + 1)]


@torch.inference_mode()
def probe(lm: LM) -> float:
    """max |LM's logits - the model's own| / max |the model's own| over the probe's rows (chain and tree); `lm`'s
    cache is emptied before and after."""
    ids = probe_ids(lm.vocab_size)
    seq = ids[: PREFIX + TAIL]
    with kernels.stock(lm.model):
        ref = lm.model(to_device(torch.tensor([seq]), lm.device)).logits[0].float()  # (PREFIX + TAIL, V)
    lm.reset()
    try:
        head = lm.forward(seq[:PREFIX]).logits  # rows 0 .. PREFIX - 1
        tail = seq[PREFIX:]
        tree = [tail[0], ids[-1], *tail[1:]]  # a sibling branch beside the chain's first token
        parents = [-1, -1, 0, *range(2, TAIL)]  # chain 0 -> 2 -> 3 ...; node 1 hangs off the prefix
        rows = lm.forward(tree, parents=parents).logits[[0, *range(2, TAIL + 1)]]
    finally:
        lm.reset()
    ours = torch.cat([head, rows]).float()
    return float((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-6))


def check(lm: LM, name: str = "the target") -> float:
    """`probe`, and a ValueError with a sentence where `LM` does not reproduce the model's own logits."""
    err = probe(lm)
    tol = TOLERANCE if lm.dtype == torch.float32 else HALF_TOLERANCE
    if not err <= tol:
        raise ValueError(
            f"{name} ({type(lm.model).__name__}) gives logits through specviz's forward that differ from its own "
            f"forward by {err:.2g} of their scale (at most {tol:g} allowed): its family computes something specviz "
            "does not reproduce, so it cannot be verified exactly (docs/models.md says how to add a family)"
        )
    return err
