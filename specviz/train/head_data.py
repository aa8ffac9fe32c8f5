"""Training data for the SpecDec++ acceptance head: target continuations, draft alternatives, soft labels.

Notation: X_1..X_T the target's continuation of a prompt; at each position i the draft, run on the
same target text X_<i, proposes its alternative D_i; ``p``, ``q`` the target's and the draft's
next-token distributions at i under the batch's regime; the label is ``y_i = min(1, p(D_i) / q(D_i))``,
the exact probability that speculative sampling accepts D_i there.

Regimes (our choice; the official code labels at T = 1 only): labels follow the warping the head
will run under, and each batch of prompts is one of the two regimes specviz decodes in. Greedy:
X_i and D_i are argmaxes and y_i = 1[argmax p = D_i] (the T -> 0 limit of min(1, p/q)). Sampled:
X_i ~ p and D_i ~ q at T = 1. Top-k / top-p are not modelled.

Mixing (official recipe): the head's input sequence is Z_i = X_i with probability r (0.15), else
D_i; the draft runs over prompt + Z, and the hidden state at the position of each D_i (the head
scores the token it reads, as at inference) is stored with y_i. Target positions carry no label.
The draft is frozen, so features are computed once and the head trains on them. Each row also carries
the scalar columns of `specviz.methods.specdecpp.inputs` (imported here as `head_inputs`) for D_i: its q, the
regime, its depth (the draft tokens in Z up to and including it), the context's n-gram continuation after
prompt + X_<i, and for a feature drafter the target's entropy where it drew the round's last target token
Z_(i - depth); built by the same functions the drafter calls at run time.

A feature drafter (`specviz.models.eagle.EagleLM`, which reads the target's features f beside each token) is
labelled the same way, teacher-forced: its q_i reads X_<i with the target's exact features, as the first
drafted token of a round does. Its mixed sequence is read as the engine reads a round: a target
token Z_j = X_j with the exact feature f_(j-1), a draft token Z_j = D_j with the drafter's own
prediction f^_(j-1) of its parent (taken from a first pass over Z with exact features everywhere, the
two-pass approximation the drafter itself was trained with).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import DynamicCache

from specviz.core.config import SamplingConfig
from specviz.core.sampling import warp
from specviz.methods.specdecpp import inputs as head_inputs
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.models import direct
from specviz.models.eagle import (
    copy_ngram,
    eagle_inputs,
    lookup_tensors,
    previous_features,
    uses_copy,
    with_zero_taps,
)
from specviz.models.lm import LM
from specviz.train.config import HeadTrainConfig

GREEDY, SAMPLED = SamplingConfig(temperature=0.0), SamplingConfig(temperature=1.0)


@dataclass
class HeadData:
    """One row per labelled position: the draft's hidden state (N, H) fp32 at D's input position (`features`, what
    a lagged head reads) and where D's logits came from (`features_before`, a head without the lag), label y,
    prompt index, and the scalar `head_inputs.columns` (N, len(CATALOG)) of D (log q(D), regime, ...)."""

    features: torch.Tensor
    label: torch.Tensor
    prompt: torch.Tensor
    columns: torch.Tensor
    features_before: torch.Tensor

    FIELDS = ("features", "label", "prompt", "columns", "features_before")

    def for_head(self, lag: bool) -> HeadData:
        """The rows as a head with or without the lag reads them (`features` = the hidden state it reads)."""
        return (
            self if lag else HeadData(self.features_before, self.label, self.prompt, self.columns, self.features_before)
        )

    def subset(self, keep: torch.Tensor) -> HeadData:
        return HeadData(*(getattr(self, k)[keep] for k in self.FIELDS))

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k).contiguous() for k in self.FIELDS}

    @property
    def greedy(self) -> torch.Tensor:
        return self.columns[:, CATALOG.index("greedy")]

    @property
    def q_draft(self) -> torch.Tensor:
        return self.columns[:, CATALOG.index("log_q")].exp()


def _positions(mask: torch.Tensor, n: int) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)[:, -n:]


def _forward(lm: LM, ids: torch.Tensor, mask: torch.Tensor, cache: DynamicCache, taps=()) -> torch.Tensor:
    """Batched forward of ids (B, L) on top of `cache`; mask (B, past + L) marks real tokens. -> hidden (B, L, H),
    with `taps` the features (B, L, H (1 + m)) of `models.direct.forward`."""
    out = lm.base(
        input_ids=ids,
        attention_mask=mask,
        position_ids=_positions(mask, ids.shape[1]),
        cache=cache,
        use_cache=True,
        output_hidden_states=bool(taps),
    )
    return direct.with_taps(lm.base, out, taps)


def _left_pad(prompts: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - len(p) :] = torch.tensor(p)
        mask[b, width - len(p) :] = 1
    return ids.to(device), mask.to(device)


def _context(ids: torch.Tensor, mask: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, V) bool: the tokens of each left-padded row (the draft's context vocabulary, `LM.logits`); grown in place
    with each drawn token as the rows go on."""
    seen = torch.zeros(len(ids), vocab, dtype=torch.bool, device=ids.device)
    real = mask[:, : ids.shape[1]].bool()
    seen[torch.arange(len(ids), device=ids.device)[:, None].expand_as(ids)[real], ids[real]] = True
    return seen


def _draw(probs: torch.Tensor, greedy: bool, rng: torch.Generator) -> torch.Tensor:
    if greedy:
        return probs.argmax(-1)
    return torch.multinomial(probs, 1, generator=rng)[:, 0]


def _eagle_forward(lm: LM, ids: torch.Tensor, feats: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A feature drafter over whole padded sequences: ids (B, L), input features (B, L, H) -> f^ (B, L, H).
    A drafter with the copy input reads each position's lookup over its own row's prefix (as it was trained)."""
    copy = None
    if uses_copy(lm.model):
        rows = [row[m.bool()].tolist() for row, m in zip(ids.cpu(), mask[:, : ids.shape[1]].cpu())]
        copy = lookup_tensors(rows, copy_ngram(lm.model), ids.shape[1], left=True, device=ids.device)
    g = eagle_inputs(lm.model, ids, feats, copy)
    return lm.base(inputs_embeds=g, attention_mask=mask, position_ids=_positions(mask, ids.shape[1])).last_hidden_state


@torch.inference_mode()
def batch_rows(
    target: LM,
    draft: LM,
    prompts: list[list[int]],
    cfg: HeadTrainConfig,
    greedy: bool,
    rng: torch.Generator,
    eos_ids: set[int],
    pad: int,
) -> dict[str, torch.Tensor]:
    """Continue a batch of prompts with the target, label the draft's alternatives, mix, featurise."""
    ids, mask = _left_pad(prompts, pad, target.device)
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=target.device)
    rows_of = _feature_draft_rows if draft.wants_target_features else _token_draft_rows
    states, Y, dist, X, D, use_target, keep, tent = rows_of(target, draft, ids, mask, cfg, greedy, rng, eos)
    feats, before = states[:, 1:], states[:, :-1]  # at D_i's position / at the one before it
    depth, run = torch.zeros_like(Y), torch.zeros_like(Y[:, 0])  # draft tokens in Z up to and including i
    for i in range(Y.shape[1]):
        run = torch.where(use_target[:, i], 0.0, run + 1)
        depth[:, i] = run
    copy = _copy_columns(prompts, X.cpu(), D.cpu())
    # the round's last committed token is X_(i - depth) (X_-1: the prompt's last), drawn from tent[:, i - depth + 1]
    last = (torch.arange(Y.shape[1], device=Y.device) - depth.long() + 1).clamp(min=0)
    tent = torch.zeros_like(Y) if tent is None else tent.gather(1, last)
    cols = head_inputs.columns(dist.cpu(), torch.full(Y.shape, float(greedy)), depth.cpu(), copy, tent.cpu())
    rows = keep.nonzero()
    return {
        "features": feats[keep].float().cpu(),
        "features_before": before[keep].float().cpu(),
        "label": Y[keep].cpu(),
        "columns": cols[keep.cpu()],
        "seq": rows[:, 0].cpu(),
    }


def _copy_columns(prompts: list[list[int]], X: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """copy_n, copy_y of each D_i after the context prompt + X_<i (the text the label is conditioned on)
    -> (B, T, 2)."""
    out = torch.zeros(*X.shape, 2)
    for b, prompt in enumerate(prompts):
        index = head_inputs.new_index()
        index.extend(prompt)
        for i in range(X.shape[1]):
            out[b, i] = torch.tensor(head_inputs.copy_columns(index, [], int(D[b, i])))
            index.extend([int(X[b, i])])
    return out


def _label(p: torch.Tensor, q: torch.Tensor, x: torch.Tensor, greedy: bool, rng) -> tuple[torch.Tensor, ...]:
    """The draft's alternative d ~ q, its label y and its `head_inputs.distribution_columns`, per row."""
    d = _draw(q, greedy, rng)
    q_d = q.gather(1, d[:, None])[:, 0]
    y = (x == d).float() if greedy else torch.clamp(p.gather(1, d[:, None])[:, 0] / q_d, max=1.0)
    return d, y, head_inputs.distribution_columns(q, d)


def _token_draft_rows(target, draft, ids, mask, cfg, greedy, rng, eos):
    dev, regime = target.device, GREEDY if greedy else SAMPLED
    caches = DynamicCache(config=target.config), DynamicCache(config=draft.config)
    h_t = _forward(target, ids, mask, caches[0])[:, -1]
    h_d = _forward(draft, ids, mask, caches[1])[:, -1]
    B, T = len(ids), cfg.new_tokens
    X, D, Y = (torch.zeros(B, T, dtype=dt, device=dev) for dt in (torch.long, torch.long, torch.float))
    dist = torch.zeros(B, T, 4, device=dev)
    alive = torch.ones(B, T, dtype=torch.bool, device=dev)
    live = torch.ones(B, dtype=torch.bool, device=dev)
    seen, rows = _context(ids, mask, draft.vocab_size), torch.arange(B, device=dev)
    for t in range(T):
        p, q = warp(target.logits(h_t), regime), warp(draft.logits(h_d, seen), regime)  # (B, V)
        x = _draw(p, greedy, rng)
        seen[rows, x] = True
        d, y, cols = _label(p, q, x, greedy, rng)
        X[:, t], D[:, t], Y[:, t], dist[:, t], alive[:, t] = x, d, y, cols, live
        live = live & ~torch.isin(x, eos)
        if not live.any():
            alive[:, t + 1 :] = False
            break
        mask = torch.cat([mask, torch.ones(B, 1, dtype=mask.dtype, device=dev)], 1)
        h_t = _forward(target, x[:, None], mask, caches[0])[:, -1]
        h_d = _forward(draft, x[:, None], mask, caches[1])[:, -1]
    use_target = (torch.rand(B, T, generator=rng, device=rng.device) < cfg.mixing_ratio).to(dev)
    Z = torch.where(use_target, X, D)
    full_mask = torch.cat([mask[:, : ids.shape[1]], torch.ones(B, T, dtype=mask.dtype, device=dev)], 1)
    states = _forward(draft, torch.cat([ids, Z], 1), full_mask, DynamicCache(config=draft.config))[
        :, ids.shape[1] - 1 :
    ]
    return states, Y, dist, X, D, use_target, alive & ~use_target, None


def _feature_draft_rows(target, draft, ids, mask, cfg, greedy, rng, eos):
    """The rows of a feature drafter (see the module docstring)."""
    dev, regime = target.device, GREEDY if greedy else SAMPLED
    cache = DynamicCache(config=target.config)
    H, taps = target.config.hidden_size, getattr(draft, "taps", ())
    hs = [_forward(target, ids, mask, cache, taps)]  # target features [f, u^k ...], block by block
    B, T, L = len(ids), cfg.new_tokens, ids.shape[1]
    X = torch.zeros(B, T, dtype=torch.long, device=dev)
    alive = torch.ones(B, T, dtype=torch.bool, device=dev)
    live = torch.ones(B, dtype=torch.bool, device=dev)
    for t in range(T):
        x = _draw(warp(target.logits(hs[-1][:, -1, :H]), regime), greedy, rng)
        X[:, t], alive[:, t] = x, live
        live = live & ~torch.isin(x, eos)
        if not live.any() or t == T - 1:
            alive[:, t + 1 :] = False
            break
        mask = torch.cat([mask, torch.ones(B, 1, dtype=mask.dtype, device=dev)], 1)
        hs.append(_forward(target, x[:, None], mask, cache, taps))
    n = len(hs) - 1  # continuation positions with f
    X, alive = X[:, : n + 1], alive[:, : n + 1]
    fu = torch.cat(hs, 1)  # (B, L + n, H (1 + m)): [f, u^k ...] over prompt + X
    f = fu[..., :H]
    seq, full = torch.cat([ids, X], 1), torch.cat([mask[:, :L], torch.ones(B, n + 1, dtype=mask.dtype, device=dev)], 1)
    # q_i: the drafter on the target's text with exact features; p_i: the target at the same positions
    h_d = _eagle_forward(draft, seq[:, :-1], previous_features(fu), full[:, :-1])[:, L - 1 :]  # (B, n + 1, H)
    h_t = f[:, L - 1 :]
    Y, D = (torch.zeros(B, n + 1, dtype=dt, device=dev) for dt in (torch.float, torch.long))
    dist = torch.zeros(B, n + 1, 4, device=dev)
    # target_entropy of the distributions that drew the prompt's last token and X_0 .. X_n: f at L - 2 ...,
    # each through the drafter's support after the token it drew
    seen, rows = _context(ids, mask, draft.vocab_size), torch.arange(B, device=dev)
    tent = [head_inputs.target_entropy(draft, f[:, L - 2], seen)]
    for i in range(n + 1):
        p, q = warp(target.logits(h_t[:, i]), regime), warp(draft.logits(h_d[:, i], seen), regime)
        D[:, i], Y[:, i], dist[:, i] = _label(p, q, X[:, i], greedy, rng)
        seen[rows, X[:, i]] = True
        tent.append(head_inputs.target_entropy(draft, f[:, L - 1 + i], seen))
    use_target = (torch.rand(B, n + 1, generator=rng, device=rng.device) < cfg.mixing_ratio).to(dev)
    Z = torch.cat([ids, torch.where(use_target, X, D)], 1)
    exact = previous_features(torch.cat([fu, torch.zeros_like(fu[:, :1])], 1))  # f_(j-1) (and taps) along X
    first = _eagle_forward(draft, Z, exact, full)
    own = torch.cat([torch.ones_like(ids, dtype=torch.bool), use_target], 1)  # reads an exact f
    guess = with_zero_taps(previous_features(first), fu.shape[-1])
    states = _eagle_forward(draft, Z, torch.where(own[..., None], exact, guess), full)[:, L - 1 :]
    return states, Y, dist, X, D, use_target, alive & ~use_target, torch.stack(tent, 1)


def build_head_data(
    target: LM,
    draft: LM,
    prompts: list[list[int]],
    cfg: HeadTrainConfig,
    eos_ids: set[int],
    pad: int = 0,
    progress=None,
    folder: Path | None = None,
) -> HeadData:
    """Rows for every prompt, batch by batch (sorted by length to keep padding small).

    Batch b draws from its own generator seeded (cfg.seed, b), so with `folder` set each finished batch
    is stored there and an interrupted run resumes where it stopped, with the same result."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    parts = []
    for b, start in enumerate(range(0, len(order), cfg.gen_batch)):
        idx = order[start : start + cfg.gen_batch]
        path = folder / f"batch-{b:04d}.safetensors" if folder else None
        if path is not None and path.exists():
            r = load_file(path)
        else:
            rng = torch.Generator(device=target.device).manual_seed(cfg.seed * 1_000_003 + b)
            greedy = bool(torch.rand((), generator=rng, device=rng.device) < cfg.greedy_fraction)
            r = batch_rows(target, draft, [prompts[i] for i in idx], cfg, greedy, rng, eos_ids, pad)
            r["prompt"] = torch.tensor(idx)[r.pop("seq")]
            if path is not None:
                folder.mkdir(parents=True, exist_ok=True)
                save_file({k: v.contiguous() for k, v in r.items()}, path)
        parts.append(r)
        if progress is not None:
            progress(len(idx) * cfg.new_tokens)
    cat = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    return HeadData(cat["features"], cat["label"], cat["prompt"], cat["columns"], cat["features_before"])
