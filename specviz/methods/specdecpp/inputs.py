"""Scalar inputs of the SpecDec++ acceptance head, beyond the draft's hidden state (our addition to the paper).

The head scores a candidate Y drawn from the draft's distribution q (the official lag: Y is the input
token of the draft step that computes the score, `specviz.methods.specdecpp.stop_rule`). Besides the hidden
state it can read a few numbers the drafter has for free, each a column of `CATALOG`:

    log_q     log q(Y), the draft's own probability of the candidate
    greedy    1 when the round decodes greedily (the label is then 1[argmax p = Y], else min(1, p/q))
    entropy   H(q) in nats, the draft's uncertainty at that position
    log_top1  log of q's largest probability (above log_q when a sampled Y is not the draft's argmax)
    log_top2  log of q's second-largest probability (with log_top1: the margin of the argmax)
    depth     how many candidates of this round Y is, counting Y (1 for the first drafted token)
    copy_n    the length of the context's longest suffix n-gram that occurred before (prompt lookup), / max_ngram
    copy_y    1 when the token that followed that earlier occurrence is Y: the text itself agrees with the draft
    target_entropy  H of the target's distribution that drew the round's last committed token, over the
              drafter's output vocabulary: how predictable the text is here (feature drafters only, which
              hold the target's hidden state of that position; 0 for a token-level draft)

The training data (`specviz.train.head_data`) and the drafter (`specviz.methods.specdecpp.drafter`) both
build these columns here, so the head reads at run time what it was trained on. A head lists the columns it reads
(`AcceptanceHead.inputs`).
"""

from __future__ import annotations

import torch

from specviz.core.config import LookupConfig
from specviz.core.ngram import NgramIndex

CATALOG = ("log_q", "greedy", "entropy", "log_top1", "log_top2", "depth", "copy_n", "copy_y", "target_entropy")
LEGACY = {(False, False): (), (True, False): ("log_q",), (True, True): ("log_q", "greedy")}  # q_feature, regime_feature
MAX_DEPTH = 8  # depth is read as min(depth, MAX_DEPTH) / MAX_DEPTH


def check(inputs) -> tuple[str, ...]:
    inputs = tuple(inputs)
    unknown = [name for name in inputs if name not in CATALOG]
    if unknown or len(set(inputs)) != len(inputs):
        raise ValueError(f"acceptance-head inputs must be distinct names from {CATALOG}, got {inputs}")
    return inputs


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """H in nats over the last dim; zero-probability entries (a reduced vocabulary) count zero."""
    return torch.special.entr(probs.float()).sum(-1)


def distribution_columns(q: torch.Tensor, y: torch.Tensor, support: torch.Tensor | None = None) -> torch.Tensor:
    """log_q, entropy, log_top1, log_top2 for candidates y (...) drawn from distributions q (..., V) -> (..., 4).
    `support`: token ids outside which q is zero (a reduced-vocabulary draft's `head_ids`): the same values,
    computed over those ids only (a sixth of the work on the shipped drafts)."""
    q = q.float()
    q_y = q.gather(-1, y[..., None].long())[..., 0]
    if support is not None:
        q = q.index_select(-1, support.to(q.device))
    top = torch.topk(q, min(2, q.shape[-1]), dim=-1).values
    top2 = top[..., 1] if q.shape[-1] > 1 else torch.zeros_like(q_y)
    return torch.stack(
        [
            torch.log(q_y.clamp_min(1e-6)),
            entropy(q),
            torch.log(top[..., 0].clamp_min(1e-6)),
            torch.log(top2.clamp_min(1e-6)),
        ],
        -1,
    )


@torch.inference_mode()
def target_entropy(lm, hidden: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
    """target_entropy from the target's post-norm hidden state(s) (..., H), through drafter `lm`'s output layer
    (over its support; `context` (B, V): each row's own, for batched training rows, see `LM.logits`)."""
    flat = hidden.reshape(-1, hidden.shape[-1])
    return entropy(torch.softmax(lm.logits(flat.to(lm.dtype), context), -1)).reshape(hidden.shape[:-1])


def new_index() -> NgramIndex:
    """The n-gram index behind copy_n / copy_y: the default prompt lookup's longest n-gram, whatever a run's own."""
    return NgramIndex(LookupConfig().max_ngram)


def copy_columns(index: NgramIndex, extra: list[int], y: int) -> tuple[float, float]:
    """copy_n, copy_y for candidate y after the context `index.ctx` + `extra` (drafted tokens not yet indexed).

    An n-gram that reaches into `extra` is looked up among the indexed context only, so a candidate deep in a
    round sees the matches the committed text holds (what the training rows see up to the few drafted tokens)."""
    n, toks = index.propose(1, after=extra)
    return (n / index.max_ngram, float(toks[0] == y)) if n else (0.0, 0.0)


def columns(
    dist: torch.Tensor, greedy: torch.Tensor, depth: torch.Tensor, copy: torch.Tensor, target_entropy: torch.Tensor
) -> torch.Tensor:
    """The full CATALOG row(s): dist (..., 4) from `distribution_columns`, greedy (...), depth (...) counting
    from 1, copy (..., 2) from `copy_columns`, target_entropy (...) -> (..., len(CATALOG)) fp32."""
    d = depth.float().clamp(max=MAX_DEPTH) / MAX_DEPTH
    return torch.cat(
        [
            dist[..., :1],
            greedy.float()[..., None],
            dist[..., 1:],
            d[..., None],
            copy.float(),
            target_entropy.float()[..., None],
        ],
        -1,
    )


def select(rows: torch.Tensor, inputs: tuple[str, ...]) -> torch.Tensor:
    """The columns a head reads, in its order: rows (..., len(CATALOG)) -> (..., len(inputs))."""
    return rows[..., [CATALOG.index(name) for name in inputs]]


def named_rows(inputs: tuple[str, ...], rows: list[torch.Tensor]) -> tuple[dict[str, float], ...]:
    """The columns a head read at each draft step, by name, as plain numbers (a trace's `head_inputs`)."""
    if not rows:
        return ()
    picked = select(torch.stack(rows), inputs).tolist()
    return tuple({name: round(float(v), 6) for name, v in zip(inputs, row)} for row in picked)
