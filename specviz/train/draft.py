"""Distil the target into a small standalone draft (a plain Llama causal LM) and ship it.

Notation: p_i the target's next-token distribution at response position i (its top-k, `data.py`),
q_i the draft's, V' the reduced output vocabulary (the `head_size` most frequent response tokens,
ties by id; the end-of-turn token always in). The draft is the target's layers `init_layers` + its
final norm; embeddings and the tied output layer are the target's, frozen, so the draft stores only
its own layers. Loss at i: cross-entropy -sum_{v in top-k(p_i) ∩ V'} p~_i(v) log q_i(v), with p~ the
target's top-k renormalised over V' and q_i the softmax over V' (= KL(p~ || q) + const).
Shipped format: `config.json` (LlamaConfig) and `draft.safetensors` (layers + norm, bf16, plus
"specviz.head_ids" int64), read by `specviz.models.loading.load_shipped_draft`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaForCausalLM

from specviz.train.config import DraftTrainConfig
from specviz.train.data import Distill
from specviz.train.loop import adamw, optimise, resume

HEAD_KEY = "specviz.head_ids"


def head_ids(responses: list[list[int]], size: int, always: set[int]) -> torch.Tensor:
    """Sorted ids of the `size` most frequent response tokens (ties by id), `always` included."""
    counts = torch.zeros(max(max((max(r) for r in responses if r), default=0), *always) + 1, dtype=torch.long)
    for r in responses:
        counts += torch.bincount(torch.tensor(r, dtype=torch.long), minlength=len(counts))[: len(counts)]
    for t in always:
        counts[t] = counts.max() + 1
    order = sorted(range(len(counts)), key=lambda t: (-int(counts[t]), t))
    return torch.tensor(sorted(order[:size]), dtype=torch.long)


def build_draft(target, layers: tuple[int, ...]) -> LlamaForCausalLM:
    """A fp32 Llama draft: copies of the target layers `layers` and its final norm; embeddings shared (frozen)."""
    cfg = copy.deepcopy(target.config)
    cfg.num_hidden_layers = len(layers)
    cfg.tie_word_embeddings = True
    cfg.layer_types = None if not hasattr(cfg, "layer_types") else ["full_attention"] * len(layers)
    draft = LlamaForCausalLM(cfg).float()
    src = target.model
    with torch.no_grad():
        for j, i in enumerate(layers):
            draft.model.layers[j].load_state_dict({k: v.float() for k, v in src.layers[i].state_dict().items()})
        draft.model.norm.weight.copy_(src.norm.weight.float())
        draft.model.embed_tokens.weight = torch.nn.Parameter(
            src.embed_tokens.weight.detach().float(), requires_grad=False
        )
    draft.tie_weights()
    return draft


def own_state(draft) -> dict[str, torch.Tensor]:
    """The draft's trainable weights (layers + final norm), by their Hugging Face names."""
    return {n: p for n, p in draft.named_parameters() if p.requires_grad}


# -- loss ------------------------------------------------------------------------------------


def distill_loss(
    hidden: torch.Tensor,
    head_w: torch.Tensor,
    slot: torch.Tensor,
    top_ids: torch.Tensor,
    top_lp: torch.Tensor,
    allow: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean cross-entropy of q = softmax(hidden @ head_w.T) (n, V') to the target's top-k restricted to V'.

    hidden (n, H); head_w (V', H); slot (V,) = index in V' or -1; top_ids / top_lp (n, k); allow (n, V'): the
    columns each row's q covers (`context_head`; None: all)."""
    logits = hidden @ head_w.T  # (n, V')
    if allow is not None:
        logits = logits.masked_fill(~allow, float("-inf"))
    logq = torch.log_softmax(logits, -1)
    s = slot[top_ids.long()]  # (n, k)
    ok = s >= 0
    if allow is not None:
        ok &= allow.gather(1, s.clamp(min=0))
    p = top_lp.float().exp() * ok
    p = p / p.sum(-1, keepdim=True).clamp(min=1e-9)
    return -torch.where(ok, p * logq.gather(1, s.clamp(min=0)), 0.0).sum(-1).mean()


def context_head(
    x: torch.Tensor, valid: torch.Tensor, pos: torch.Tensor, head_w: torch.Tensor, slot: torch.Tensor, emb: torch.Tensor
):
    """The output layer a context vocabulary (`ModelConfig.context_vocab`) gives a training batch: V' plus the
    batch's E tokens outside it, each usable by a row once its own sequence has held it up to the row's position
    (the drafter predicting position t + 1 has been fed x_<=t).

    x, valid (B, L) ids and mask; pos (n, 2) each row's (sequence, position) -> head_w (V'+E, H), slot (V,),
    allow (n, V'+E) or None (no token outside V')."""
    ext = x[valid & (slot[x] < 0)].unique()  # (E,)
    if not len(ext):
        return head_w, slot, None
    hit = (x[:, :, None] == ext) & valid[:, :, None]  # (B, L, E)
    first = torch.where(hit.any(1), hit.float().argmax(1), x.shape[1])  # (B, E) first position held
    allow = torch.cat(
        [torch.ones(len(pos), len(head_w), dtype=torch.bool), first[pos[:, 0]] <= pos[:, 1, None]], 1
    )  # (n, V'+E)
    slot = slot.clone()
    slot[ext] = len(head_w) + torch.arange(len(ext))
    return torch.cat([head_w, emb[ext].to(head_w.dtype)]), slot, allow


def batch_plan(data: Distill, batch_tokens: int, steps: int, seed: int) -> list[list[int]]:
    """`steps` batches of sequence indices (each <= batch_tokens tokens), epochs in seeded random order."""
    g = torch.Generator().manual_seed(seed)
    lens = (data.starts[1:] - data.starts[:-1]).tolist()
    plan: list[list[int]] = []
    while len(plan) < steps:
        cur, used = [], 0
        for s in torch.randperm(len(data), generator=g).tolist():
            if cur and used + lens[s] > batch_tokens:
                plan.append(cur)
                cur, used = [], 0
            cur.append(s)
            used += lens[s]
        plan.append(cur)
    return plan[:steps]


def step_loss(draft, data: Distill, seqs: list[int], head_w, slot) -> torch.Tensor:
    """Forward a right-padded batch of sequences; loss over their response positions."""
    items = [data.sequence(s) for s in seqs]
    L = max(len(ids) for ids, _, _ in items)
    x = torch.zeros(len(items), L, dtype=torch.long)
    for b, (ids, _, _) in enumerate(items):
        x[b, : len(ids)] = ids
    h = draft.model(input_ids=x).last_hidden_state  # (B, L, H) causal: pads unseen
    rows, pos = [], []
    for b, (_ids, P, r) in enumerate(items):
        n = r.stop - r.start
        rows.append(torch.arange(r.start, r.stop))
        pos.append(torch.stack([torch.full((n,), b), torch.arange(P - 1, P - 1 + n)], 1))
    rows, pos = torch.cat(rows), torch.cat(pos)
    return distill_loss(h[pos[:, 0], pos[:, 1]], head_w, slot, data.top_ids[rows], data.top_lp[rows])


@torch.no_grad()
def agreement(draft, data: Distill, head_w, slot, limit: int = 10_000) -> float:
    """Teacher-forced greedy agreement argmax q == argmax p over response positions of (greedy) sequences."""
    hit = tot = 0
    for s in range(len(data)):
        ids, P, r = data.sequence(s)
        h = draft.model(input_ids=ids[None]).last_hidden_state[0, P - 1 : P - 1 + (r.stop - r.start)]
        pred = (h @ head_w.T).argmax(-1)
        want = slot[data.top_ids[r, 0].long()]
        hit += int((pred == want).sum())
        tot += len(pred)
        if tot >= limit:
            break
    return hit / max(tot, 1)


@torch.no_grad()
def calibrate_norm(
    draft, data: Distill, seqs: list[int], head_w, slot, scales=(0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
) -> float:
    """Scale the final norm (tuned for the target's deep residual stream) to the loss-minimising value on one batch.

    Right after initialisation the draft's residual stream is close to the input embedding, so the
    target's final norm makes q sharply peaked on the wrong tokens; a scalar fixes that before training."""
    w0 = draft.model.norm.weight.clone()
    losses = {}
    for sc in scales:
        draft.model.norm.weight.copy_(w0 * sc)
        losses[sc] = float(step_loss(draft, data, seqs, head_w, slot))
    best = min(scales, key=losses.get)
    draft.model.norm.weight.copy_(w0 * best)
    return best


def train(
    draft, data: Distill, held: Distill, ids_v: torch.Tensor, cfg: DraftTrainConfig, ckpt: Path, on_checkpoint=None
) -> list[dict]:
    """AdamW on the draft's own weights; checkpoints (weights + optimiser moments) every `checkpoint_every` steps."""
    head_w = draft.model.embed_tokens.weight.detach()[ids_v]  # (V', H) frozen
    slot = torch.full((draft.config.vocab_size,), -1, dtype=torch.long)
    slot[ids_v] = torch.arange(len(ids_v))
    params = own_state(draft)
    opt = adamw(params, cfg)
    progress = resume(ckpt, params, opt)
    plan = batch_plan(data, cfg.batch_tokens, cfg.steps, cfg.seed)
    if progress.step == 0:
        progress.history.append(
            {
                "step": 0,
                "norm_scale": calibrate_norm(draft, data, plan[0], head_w, slot),
                "heldout_agreement": round(agreement(draft, held, head_w, slot, limit=3000), 4),
            }
        )
        print(json.dumps(progress.history[-1]))
    return optimise(
        draft,
        params,
        opt,
        cfg,
        progress,
        ckpt,
        step_loss=lambda step: (step_loss(draft, data, plan[step], head_w, slot), {}),
        evaluate=lambda: {"heldout_agreement": round(agreement(draft, held, head_w, slot, limit=3000), 4)},
        desc="draft train",
        on_checkpoint=on_checkpoint,
    )


# -- shipping ----------------------------------------------------------------------------------


def save_draft(draft, ids_v: torch.Tensor, folder: Path) -> Path:
    """Write config.json and draft.safetensors (own weights in bf16 + head ids) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = copy.deepcopy(draft.config)
    cfg.dtype = "bfloat16"
    cfg.save_pretrained(folder)
    t = {n: p.detach().to(torch.bfloat16).contiguous() for n, p in own_state(draft).items()}
    t[HEAD_KEY] = ids_v.long().contiguous()
    tmp = folder / "draft.safetensors.tmp"
    save_file(t, str(tmp), metadata={"format": "specviz-draft"})
    tmp.rename(folder / "draft.safetensors")
    return folder / "draft.safetensors"
