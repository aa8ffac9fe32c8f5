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
from argparse import SUPPRESS
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm import tqdm

from specviz.analysis.metrics import auc
from specviz.core.assets import DEFAULT_EAGLE, SPEC_BENCH, cache_dir
from specviz.core.config import DTYPES, ModelConfig
from specviz.core.prompts import MAX_PROMPT_TOKENS, encode_prompt, read_prompts, stratified
from specviz.core.sampling import make_rng
from specviz.methods.specdecpp.head import AcceptanceHead, head_folder, save_head, weights_digest
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.models.lm import LM
from specviz.models.loading import load_pair
from specviz.models.pair import Pair
from specviz.train.config import QUICK, HeadTrainConfig
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
    train: HeadData,
    val: HeadData,
    cfg: HeadTrainConfig,
    rng: torch.Generator,
    show_progress: bool = True,
    on_epoch: Callable[[int], None] = lambda epoch: None,
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
        on_epoch(epoch + 1)
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
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=SUPPRESS, help=f"default {getattr(d, name)}")
    for name in ("greedy_fraction", "mixing_ratio", "reject_weight", "lr", "heldout_fraction"):
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=SUPPRESS, help=f"default {getattr(d, name)}")
    ap.add_argument(
        "--inputs",
        nargs="*",
        default=SUPPRESS,
        choices=CATALOG,
        metavar="NAME",
        help=f"scalar inputs beside the hidden state, from {', '.join(CATALOG)} "
        "(see specviz.methods.specdecpp.inputs; none: the paper's hidden-state-only head)",
    )
    ap.add_argument(
        "--lag",
        action=argparse.BooleanOptionalAction,
        default=SUPPRESS,
        help="score each candidate at its own input position, one draft step late (the paper's); "
        "--no-lag: from the state that drafted it (AcceptanceHead)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the quick preset (QUICK: minutes on a 2-core CPU for a small pair), prompts from the shipped "
        "Spec-Bench sample; other flags given still apply",
    )
    a = ap.parse_args(argv)
    base = QUICK if a.quick else d
    given = {k: tuple(v) if k == "inputs" else v for k, v in vars(a).items() if k in asdict(d)}  # flags on the line
    cfg = replace(base, **given)
    t0 = time.perf_counter()
    pair = load_pair(
        ModelConfig(target=a.target, draft=a.draft, dtype=a.dtype, device=a.device, eagle=a.eagle or "none")
    )
    if pair.draft is pair.target and not a.eagle:
        raise SystemExit("no draft model found: train the draft first (python -m specviz.train draft)")
    bar = tqdm(total=100, desc="head", unit="%")

    def progress(done: float, what: str) -> None:
        bar.set_postfix_str(what)
        bar.update(round(done * 100) - bar.n)

    source = "spec-bench" if a.quick else "composed"
    path, meta = fit_for_pair(pair, pair.eagle if a.eagle else pair.draft, cfg, source, progress, t0=t0)
    bar.close()
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in meta["heldout"].items()}, indent=1))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB) in {meta['total_s']:.0f} s")


class Stopped(Exception):
    """Training was stopped before it finished (nothing is written)."""


def head_prompts(pair: Pair, cfg: HeadTrainConfig, source: str) -> tuple[list[list[int]], int]:
    """The prompts the head's data continues: "composed" chat prompts (`prompts.compose`, never Spec-Bench; the
    shipped heads'), or "spec-bench": a stratified sample of the shipped Spec-Bench questions (the quick preset's).
    A prompt whose tokens and answer would not fit the target's context (a small-vocabulary tokenizer makes long
    prompts) is left out; (the prompts, how many were left out)."""
    if source == "spec-bench":
        texts = [r["turns"][0] for r in stratified(read_prompts(SPEC_BENCH), cfg.prompts, PROMPT_SEED + cfg.seed)]
    else:
        texts = [text for _, text in compose(cfg.prompts, PROMPT_SEED + cfg.seed)]
    context = getattr(pair.target.model.config, "max_position_embeddings", None) or MAX_PROMPT_TOKENS
    room = min(MAX_PROMPT_TOKENS, context - cfg.new_tokens)
    kept = []
    for text in texts:
        try:
            ids = encode_prompt(pair.tokenizer, text)
        except ValueError:  # past the prompt limit
            continue
        if len(ids) <= room:
            kept.append(ids)
    if not kept:
        raise ValueError(
            f"no prompt fits the target's context of {context} tokens with a {cfg.new_tokens}-token answer"
        )
    return kept, len(texts) - len(kept)


def fit_for_pair(
    pair: Pair,
    drafter: LM,
    cfg: HeadTrainConfig,
    source: str = "composed",
    progress: Callable[[float, str], None] = lambda done, what: None,
    stop: Callable[[], bool] = lambda: False,
    t0: float | None = None,
) -> tuple[Path, dict]:
    """Train a head for `drafter` (the pair's draft or EAGLE drafter) on the loaded `pair` and write it where
    SpecDec++ looks for it (`head_folder`: beside a local drafter, the user cache for a hub one); (path, its card).
    `progress(fraction, what)` is told as the data and the epochs go; `stop()` true ends it with `Stopped`."""
    t0 = time.perf_counter() if t0 is None else t0
    folder = head_folder(pair, drafter)
    if folder is None:
        raise ValueError("this drafter has no folder or hub id to keep a head beside")
    digest = weights_digest(folder)  # the drafter's weights: a head and its data belong to them
    rng = make_rng(cfg.seed)
    prompts, left_out = head_prompts(pair, cfg, source)
    if left_out:
        progress(0.0, f"{left_out} of {left_out + len(prompts)} prompts left out: too long for the target's context")
    target = pair.info["target"] + weights_digest(pair.info["target"])  # a local target's weights, not its name alone
    key = _data_key(cfg, target + digest + pair.info["dtype"] + source, drafter.context_vocab)
    total, seen = len(prompts) * cfg.new_tokens, 0

    def on_tokens(n: int) -> None:
        nonlocal seen
        seen += n
        progress(0.8 * seen / total, f"the target's answers: {seen:,} of {total:,} tokens")
        if stop():
            raise Stopped("training stopped")

    pad = pair.tokenizer.pad_token_id if pair.tokenizer.pad_token_id is not None else 0
    folder_data = cache_dir() / "train" / f"head-data-{key}"
    data = build_head_data(pair.target, drafter, prompts, cfg, pair.eos_ids, pad, on_tokens, folder_data)
    data_s = time.perf_counter() - t0
    data = data.for_head(cfg.lag)
    train, heldout = split_by_prompt(data, len(prompts), cfg.heldout_fraction, rng)
    fit, val = split_by_prompt(train, len(prompts), cfg.heldout_fraction, rng)  # val: early stopping only

    def on_epoch(epoch: int) -> None:
        progress(0.8 + 0.2 * epoch / cfg.epochs, f"training: epoch {epoch} of {cfg.epochs}")
        if stop():
            raise Stopped("training stopped")

    head, history = train_head(fit, val, cfg, rng, show_progress=False, on_epoch=on_epoch)
    best = min(history, key=lambda h: h["loss"])
    final = {"epoch": best["epoch"], **evaluate(head, heldout, cfg.reject_weight)}
    meta = {
        "target": pair.info["target"],
        "draft": pair.drafter_name(drafter),
        "draft_sha256": digest,
        "context_vocab": drafter.context_vocab,
        "recipe": asdict(cfg),
        "prompts_from": source,
        "prompts_left_out": left_out,  # too long for the target's context
        "heldout": final,
        "rows": len(data.label),  # labelled draft tokens seen (train, validation and held-out)
        "train_rows": len(fit.label),
        "val_rows": len(val.label),
        "val_history": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in h.items() if k in ("epoch", "loss", "auc")}
            for h in history
        ],
        "data_s": round(data_s, 1),
        "total_s": round(time.perf_counter() - t0, 1),
        "trained": time.strftime("%Y-%m-%d %H:%M"),
    }
    path = save_head(head, folder, meta)
    progress(1.0, "done")
    return path, meta
