"""Experiment (not wired into the engine): does the EAGLE drafter agree more with the target when it also reads
the target's low and middle layers (EAGLE-3's feature fusion, Li et al. 2025, arXiv 2503.01840)?

g_t = f_t + W [u_t / s_u ; m_t / s_m], with f_t the target's post-norm last hidden state (what the shipped drafter
reads), u_t and m_t the residual stream after layers LOW and MID, s_u and s_m their RMS over the training data,
W (H x 2H) zero at the start, so step 0 is the shipped drafter exactly. Later drafted tokens read the drafter's
own output, as in the shipped drafter. Both arms train without the feature-regression term (EAGLE-3 drops it;
`--feat-weight 0` is the matching run of `python -m specviz.train eagle` without fusion).

Metric: teacher-forced agreement on the 40 held-out Spec-Bench prompts (the target's bf16 greedy continuations the
model card evaluates on), labels = the fp32 target's argmax at each response position; first drafted token (exact
inputs) and second (the drafter's own features), for the shipped drafter, the fusion drafter, and any --compare
folder. Run from the repository root:

    PYTHONPATH=. python assets/experiments/eagle-fused-features/fuse.py --compare /tmp/eagle-f0
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from specviz.config import DraftTrainConfig, EagleTrainConfig, ModelConfig
from specviz.eagle import COPY_KEY, add_copy_input, build_eagle, eagle_inputs, previous_features
from specviz.loading import DEFAULT_DRAFT, DEFAULT_EAGLE, cache_dir, load_pair
from specviz.train.data import batches, merge
from specviz.train.draft import HEAD_KEY, batch_plan, distill_loss
from specviz.train.draft_eval import heldout_data
from specviz.train.draft_run import broad_data, distillation_data
from specviz.train.eagle import _lookups, init_from_draft, own_params
from specviz.train.loop import lr_at

LOW, MID = 3, 15          # of 30 layers: hidden_states[i] is the residual stream after layer i


@torch.inference_mode()
def layer_features(target, data, batch_tokens=4096):
    """(N, 3, H) bf16: (after LOW, after MID, post-norm last) at every token of `data`."""
    base = target.get_decoder()
    lens = (data.starts[1:] - data.starts[:-1]).tolist()
    out = torch.zeros(len(data.tokens), 3, target.config.hidden_size, dtype=torch.bfloat16)
    for g in tqdm(batches(lens, len(lens), batch_tokens), desc="target layer features"):
        L = max(lens[s] for s in g)
        x = torch.zeros(len(g), L, dtype=torch.long)
        for b, s in enumerate(g):
            x[b, :lens[s]] = data.sequence(s)[0]
        o = base(input_ids=x, output_hidden_states=True)
        h = torch.stack([o.hidden_states[LOW], o.hidden_states[MID], o.last_hidden_state], 2)   # (B, L, 3, H)
        for b, s in enumerate(g):
            out[data.starts[s]:data.starts[s + 1]] = h[b, :lens[s]].to(torch.bfloat16)
    return out


class Fusion(nn.Module):
    def __init__(self, H, s_u, s_m):
        super().__init__()
        self.w = nn.Linear(2 * H, H, bias=False)
        nn.init.zeros_(self.w.weight)
        self.register_buffer("scale", torch.tensor([1 / s_u, 1 / s_m]))

    def forward(self, f3):                                   # (..., 3, H) -> (..., H)
        lo = f3[..., 0, :] * self.scale[0]
        mi = f3[..., 1, :] * self.scale[1]
        return f3[..., 2, :] + self.w(torch.cat([lo, mi], -1))


def batch(data, feats, seqs):
    items = [data.sequence(s) for s in seqs]
    L, H = max(len(ids) for ids, _, _ in items), feats.shape[-1]
    x = torch.zeros(len(items), L, dtype=torch.long)
    f = torch.zeros(len(items), L, 3, H)
    valid = torch.zeros(len(items), L, dtype=torch.bool)
    rows, pos = [], []
    for b, (s, (ids, P, r)) in enumerate(zip(seqs, items)):
        n = len(ids)
        x[b, :n], valid[b, :n] = ids, True
        f[b, :n] = feats[data.starts[s]:data.starts[s + 1]].float()
        k = r.stop - r.start
        rows.append(torch.arange(r.start, r.stop))
        pos.append(torch.stack([torch.full((k,), b), torch.arange(P - 1, P - 1 + k)], 1))
    return x, f, valid, torch.cat(rows), torch.cat(pos)


def passes(model, fusion, x, f3, valid, noise=0.0, gen=None, scale=1.0):
    copy = _lookups(model, x, valid)
    g = fusion(f3) if fusion is not None else f3[..., 2, :]
    fin = previous_features(g)
    if noise > 0:
        fin = fin + torch.randn(fin.shape, generator=gen) * (noise * scale)
    h1 = model.model(inputs_embeds=eagle_inputs(model, x, fin, copy)).last_hidden_state
    h2 = model.model(inputs_embeds=eagle_inputs(model, x, previous_features(h1.detach()), copy)).last_hidden_state
    return h1, h2


def load_drafter(target, folder):
    model = build_eagle(target, init_layer=0, dtype=torch.float32)
    init_from_draft(model, Path(DEFAULT_DRAFT))
    state = load_file(str(Path(folder) / "eagle.safetensors"))
    ids_v = state.pop(HEAD_KEY)
    if COPY_KEY in state:
        add_copy_input(model, len(state[COPY_KEY]) - 1)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    return model, ids_v


@torch.no_grad()
def spec_agreement(model, fusion, ev, ev_feats, labels, head_w, slot):
    hit1 = hit2 = tot = 0
    for s in range(len(ev)):
        x, f3, valid, rows, pos = batch(ev, ev_feats, [s])
        h1, h2 = passes(model, fusion, x, f3, valid)
        want = slot[labels[rows]]
        hit1 += int(((h1[pos[:, 0], pos[:, 1]] @ head_w.T).argmax(-1) == want).sum())
        hit2 += int(((h2[pos[:, 0], pos[:, 1]] @ head_w.T).argmax(-1) == want).sum())
        tot += len(want)
    return round(hit1 / tot, 4), round(hit2 / tot, 4), tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--compare", nargs="*", default=[])
    ap.add_argument("--out", default="/tmp/eagle-fused")
    a = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    work = cache_dir() / "train"
    pair = load_pair(ModelConfig(dtype="fp32", device="cpu"))
    target = pair.target.model
    # the shipped stage 5's data and held-out split (python -m specviz.train eagle, same seed)
    data = distillation_data(pair, DraftTrainConfig(greedy_prompts=256, sampled_prompts=0, doc_prompts=128), work)
    data = merge([data, broad_data(pair, DraftTrainConfig(), 256, work)])
    order = list(range(len(data)))
    random.Random(0).shuffle(order)
    n_held = max(1, round(0.03 * len(data)))
    data = data.subset(sorted(order[n_held:]))
    cache = Path("/tmp/fuse-feats.safetensors")
    if cache.exists():
        feats = load_file(str(cache))["f"]
    else:
        feats = layer_features(target, data)
        save_file({"f": feats}, str(cache))
    ev_pair = load_pair(ModelConfig(dtype="bf16", device="cpu"))
    ev = heldout_data(ev_pair, 40, work / "eval-data", 128)
    del ev_pair
    ev_feats = layer_features(target, ev)
    with torch.inference_mode():                             # fp32 target argmax at every token = label rows
        labels = torch.cat([target(input_ids=ev.sequence(s)[0][None]).logits[0, ev.sequence(s)[1] - 1:-1].argmax(-1)
                            for s in range(len(ev))])
    t1 = time.perf_counter()

    s_u, s_m = (float(feats[:50_000, i].float().pow(2).mean().sqrt()) for i in (0, 1))
    scale = float(feats[:50_000, 2].float().std())
    results = {"layers": [LOW, MID], "rms": [s_u, s_m], "feature_min": round((t1 - t0) / 60, 1)}
    for name in a.compare:
        m, ids_v = load_drafter(target, name)
        head_w = m.get_input_embeddings().weight.detach()[ids_v]
        slot = torch.full((m.config.vocab_size,), -1, dtype=torch.long)
        slot[ids_v] = torch.arange(len(ids_v))
        results[name] = spec_agreement(m, None, ev, ev_feats, labels, head_w, slot)
        print(name, results[name], flush=True)
    model, ids_v = load_drafter(target, DEFAULT_EAGLE)
    head_w = model.get_input_embeddings().weight.detach()[ids_v]
    slot = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
    slot[ids_v] = torch.arange(len(ids_v))
    fusion = Fusion(model.config.hidden_size, s_u, s_m)
    results["shipped"] = spec_agreement(model, fusion, ev, ev_feats, labels, head_w, slot)
    print("shipped", results["shipped"], flush=True)

    cfg = EagleTrainConfig(steps=a.steps, lr=a.lr, warmup=10)
    params = {**own_params(model), **{"fusion." + n: p for n, p in fusion.named_parameters()}}
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.0)
    plan = batch_plan(data, cfg.batch_tokens, cfg.steps, cfg.seed)
    gen = torch.Generator().manual_seed(0)
    history = []
    for step in tqdm(range(cfg.steps), desc="fusion train"):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, cfg)
        x, f3, valid, rows, pos = batch(data, feats, plan[step])
        h1, h2 = passes(model, fusion, x, f3, valid, cfg.noise, gen, scale)
        loss = sum(distill_loss(h[pos[:, 0], pos[:, 1]], head_w, slot, data.top_ids[rows], data.top_lp[rows])
                   for h in (h1, h2))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        if (step + 1) % 50 == 0:
            history.append({"step": step + 1, "loss": round(float(loss), 4),
                            "specbench": spec_agreement(model, fusion, ev, ev_feats, labels, head_w, slot),
                            "fusion_norm": round(float(fusion.w.weight.norm()), 3)})
            print(json.dumps(history[-1]), flush=True)
    results.update(history=history, train_min=round((time.perf_counter() - t1) / 60, 1))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    save_file({n: p.detach().contiguous() for n, p in params.items()}, str(Path(a.out) / "fused.safetensors"))
    (Path(a.out) / "results.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
