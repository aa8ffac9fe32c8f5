"""Train the SpecDec++ acceptance head: `python -m specviz.train head`.

Data: `head_data` (target continuations of chat prompts from `prompts.compose`, never Spec-Bench, with
another seed than the draft's; draft alternatives, soft labels min(1, p/q), 15% target-token mixing). Loss: the
weighted soft BCE with reject weight w of SpecDec++'s official code, where y is the soft label and
P1 = softmax(logits)[1]:

    L = sum [ w (1 - y) (-log P0) + y (-log P1) ] / sum [ w (1 - y) + y ]

With w > 1 the minimiser is P1 = y / (y + w (1 - y)), deliberately below y: the head leans towards
"reject", and the threshold h is tuned on its outputs as they are. The held-out split is by prompt.
Metrics: the loss, the AUC against the soft labels (each row is a positive with weight y and a
negative with weight 1 - y), and the expected calibration error (10 equal bins) both of P1 and
of P1 mapped back through the weighting, y = w P1 / (1 - P1 + w P1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm import tqdm

from specviz.analysis.metrics import auc
from specviz.core.assets import DEFAULT_DRAFT, DEFAULT_EAGLE, cache_dir, head_cache
from specviz.core.config import DTYPES, ModelConfig
from specviz.core.prompts import encode_prompt
from specviz.core.sampling import make_rng
from specviz.methods.specdecpp.head import AcceptanceHead, file_digest, save_head
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.models.loading import load_pair
from specviz.train.config import HeadTrainConfig
from specviz.train.head_data import HeadData, build_head_data
from specviz.train.prompts import compose

PROMPT_SEED = 7919  # compose() seed offset: other prompts than the draft's own training set

# -- loss and metrics --------------------------------------------------------------------------


def soft_bce(logits: torch.Tensor, y: torch.Tensor, w: float) -> torch.Tensor:
    logp = F.log_softmax(logits.float(), -1)
    return (w * (1 - y) * -logp[:, 0] + y * -logp[:, 1]).sum() / (w * (1 - y) + y).sum()


def weighted_auc(score: torch.Tensor, y: torch.Tensor) -> float:
    """P(score of an accepted draw > score of a rejected one), ties counting one half; soft labels as weights
    (`specviz.analysis.metrics.auc`); nan without both classes."""
    out = auc(list(zip(score.double().tolist(), y.double().tolist())))
    return float("nan") if out is None else out


def calibration_error(prob: torch.Tensor, y: torch.Tensor, bins: int = 10) -> float:
    """Expected calibration error over `bins` equal-width bins of the predicted probability."""
    idx = torch.clamp((prob.double() * bins).long(), max=bins - 1)
    gap = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, y.double() - prob.double())
    return float(gap.abs().sum()) / len(prob)


def unweight(prob: torch.Tensor, w: float) -> torch.Tensor:
    """Undo the reject weighting: the y whose weighted-loss minimiser is `prob`."""
    return w * prob / (1 - prob + w * prob)


@torch.no_grad()
def evaluate(head: AcceptanceHead, data: HeadData, w: float) -> dict:
    logits = torch.cat([head(f, c) for f, c in zip(data.features.split(4096), data.columns.split(4096))])
    prob = torch.sigmoid(logits[:, 1] - logits[:, 0])
    y = data.label
    out = {
        "rows": len(y),
        "mean_label": float(y.mean()),
        "loss": float(soft_bce(logits, y, w)),
        "auc": weighted_auc(prob, y),
        "ece": calibration_error(prob, y),
        "ece_unweighted": calibration_error(unweight(prob, w), y),
        "auc_draft_q": weighted_auc(data.q_draft, y),
    }
    for name, flag in (("greedy", 1.0), ("sampled", 0.0)):
        m = data.greedy == flag
        if m.any():
            out[f"auc_{name}"] = weighted_auc(prob[m], y[m])
    return out


def train_head(
    train: HeadData, val: HeadData, cfg: HeadTrainConfig, rng: torch.Generator, show_progress: bool = True
) -> tuple[AcceptanceHead, list[dict]]:
    """AdamW, cosine schedule with 3% warm-up, up to cfg.epochs; metrics on `val` after every epoch, and
    the head of the epoch with the least `val` loss is returned (early stopping: the head over-fits the
    rows of one draft within a few epochs; `val` must be other prompts than the reported held-out set)."""
    head = AcceptanceHead(train.features.shape[1], cfg.num_layers, rng=rng, inputs=cfg.inputs, lag=cfg.lag)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=0.0)
    per_epoch = math.ceil(len(train.label) / cfg.batch)
    total, warm = per_epoch * cfg.epochs, max(1, int(0.03 * per_epoch * cfg.epochs))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    )
    history, best = [], (math.inf, None)
    bar = tqdm(total=total, desc="head", unit="step", disable=not show_progress)
    for epoch in range(cfg.epochs):
        head.train()
        for idx in torch.randperm(len(train.label), generator=rng).split(cfg.batch):
            loss = soft_bce(head(train.features[idx], train.columns[idx]), train.label[idx], cfg.reject_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            bar.update()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        head.eval()
        history.append({"epoch": epoch + 1, **evaluate(head, val, cfg.reject_weight)})
        bar.set_postfix(val_loss=f"{history[-1]['loss']:.4f}", auc=f"{history[-1]['auc']:.3f}")
        if history[-1]["loss"] < best[0]:
            best = (history[-1]["loss"], {k: v.clone() for k, v in head.state_dict().items()})
    bar.close()
    head.load_state_dict(best[1])
    return head.eval(), history


def split_by_prompt(data: HeadData, n_prompts: int, fraction: float, rng: torch.Generator) -> tuple[HeadData, HeadData]:
    held = torch.randperm(n_prompts, generator=rng)[: max(1, round(fraction * n_prompts))]
    is_held = torch.isin(data.prompt, held)
    return data.subset(~is_held), data.subset(is_held)


# -- command -----------------------------------------------------------------------------------


def _data_key(cfg: HeadTrainConfig, pair_id: str, context_vocab: bool = False) -> str:
    fields = {
        k: v
        for k, v in asdict(cfg).items()
        if k in ("prompts", "new_tokens", "gen_batch", "greedy_fraction", "mixing_ratio", "seed")
    }
    layout = [CATALOG, "features_before"] + (["context_vocab"] if context_vocab else [])  # a shard's other fields
    return hashlib.sha256(json.dumps([fields, pair_id, layout], sort_keys=True).encode()).hexdigest()[:12]


def main(argv=None) -> None:
    d = HeadTrainConfig()
    ap = argparse.ArgumentParser(
        prog="python -m specviz.train head", description="Train the SpecDec++ acceptance head."
    )
    ap.add_argument("--target", help="target model (default: the offline default)")
    ap.add_argument(
        "--draft",
        help="draft folder (default: models/smollm2-draft), the head written beside it; or a hub id, the head "
        "written to the user cache (specviz.core.assets.head_cache), where the dashboard finds it",
    )
    ap.add_argument("--device", default="cpu", help="where the data is generated and the head trained (cuda: a GPU)")
    ap.add_argument(
        "--eagle",
        nargs="?",
        const=DEFAULT_EAGLE,
        metavar="FOLDER",
        help="train the head for an EAGLE drafter instead (default folder: models/smollm2-eagle); "
        "the head is written beside it",
    )
    ap.add_argument(
        "--dtype",
        default="fp32",
        choices=DTYPES,
        help="for data generation; fp32 because batched bf16 matmuls have no fast path on AVX2 CPUs",
    )
    for name in ("prompts", "new_tokens", "gen_batch", "epochs", "batch", "num_layers", "seed"):
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    for name in ("greedy_fraction", "mixing_ratio", "reject_weight", "lr", "heldout_fraction"):
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(d, name))
    ap.add_argument(
        "--inputs",
        nargs="*",
        default=list(d.inputs),
        choices=CATALOG,
        metavar="NAME",
        help=f"scalar inputs beside the hidden state, from {', '.join(CATALOG)} "
        "(see specviz.methods.specdecpp.inputs; none: the paper's hidden-state-only head)",
    )
    ap.add_argument(
        "--lag",
        action=argparse.BooleanOptionalAction,
        default=d.lag,
        help="score each candidate at its own input position, one draft step late (the paper's); "
        "--no-lag: from the state that drafted it (AcceptanceHead)",
    )
    a = ap.parse_args(argv)
    a.inputs = tuple(a.inputs)
    cfg = replace(d, **{k: getattr(a, k) for k in asdict(d)})
    t0 = time.perf_counter()
    pair = load_pair(
        ModelConfig(target=a.target, draft=a.draft, dtype=a.dtype, device=a.device, eagle=a.eagle or "none")
    )
    if pair.draft is pair.target and not a.eagle:
        raise SystemExit("no draft model found: train the draft first (python -m specviz.train draft)")
    drafter = pair.eagle if a.eagle else pair.draft
    folder = a.eagle or a.draft or DEFAULT_DRAFT
    weights = Path(folder) / ("eagle.safetensors" if a.eagle else "draft.safetensors")
    if not Path(folder).is_dir():  # a hub draft: its head goes to the user cache, keyed by the hub id
        folder, weights = head_cache(folder), None
    digest = file_digest(weights) if weights is not None and weights.exists() else ""
    rng = make_rng(cfg.seed)
    prompts = [encode_prompt(pair.tokenizer, text) for _, text in compose(cfg.prompts, PROMPT_SEED + cfg.seed)]
    folder_data = (
        cache_dir()
        / "train"
        / f"head-data-{_data_key(cfg, pair.info['target'] + digest + a.dtype, drafter.context_vocab)}"
    )
    bar = tqdm(total=len(prompts) * cfg.new_tokens, desc="head data", unit="tok")
    pad = pair.tokenizer.pad_token_id if pair.tokenizer.pad_token_id is not None else 0
    data = build_head_data(pair.target, drafter, prompts, cfg, pair.eos_ids, pad, bar.update, folder_data)
    bar.close()
    data_s = time.perf_counter() - t0
    data = data.for_head(cfg.lag)
    train, heldout = split_by_prompt(data, len(prompts), cfg.heldout_fraction, rng)
    fit, val = split_by_prompt(train, len(prompts), cfg.heldout_fraction, rng)  # val: early stopping only
    print(
        f"head data: {len(fit.label)} train, {len(val.label)} validation, {len(heldout.label)} held-out rows "
        f"({data_s:.0f} s)"
    )
    head, history = train_head(fit, val, cfg, rng)
    best = min(history, key=lambda h: h["loss"])
    final = {"epoch": best["epoch"], **evaluate(head, heldout, cfg.reject_weight)}
    drafter_name = pair.drafter_name(pair.eagle if a.eagle else pair.draft)
    meta = {
        "target": pair.info["target"],
        "draft": drafter_name,
        "draft_sha256": digest,
        "context_vocab": drafter.context_vocab,
        "recipe": asdict(cfg),
        "heldout": final,
        "train_rows": len(fit.label),
        "val_rows": len(val.label),
        "val_history": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in h.items() if k in ("epoch", "loss", "auc")}
            for h in history
        ],
        "data_s": round(data_s, 1),
        "total_s": round(time.perf_counter() - t0, 1),
    }
    path = save_head(head, folder, meta)
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in final.items()}, indent=1))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB) in {meta['total_s']:.0f} s")
