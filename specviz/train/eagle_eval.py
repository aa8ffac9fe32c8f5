"""Held-out evaluation and model card of the EAGLE-style drafter (`python -m specviz.train eagle`).

Evaluation: Spec-Bench prompts, the target's greedy path, bf16; agreement at the first drafted token (exact
features) and an exact greedy chain simulation (later tokens read the drafter's own features f^), i.e. what
the engine does; tau(K) and alpha per position as in `draft_eval`. The card (README.md + training.json)
records the recipe, every earlier stage of a warm-started run, and these figures.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.config import ModelConfig
from specviz.core.prompts import encode_prompt
from specviz.models.loading import load_eagle, load_pair
from specviz.train import card, draft_eval, sharegpt
from specviz.train.config import DraftTrainConfig, EagleTrainConfig, precision
from specviz.train.data import Distill
from specviz.train.draft_eval import KS, busy_text, step_costs

COST_PROMPT = "Explain how a rainbow forms, step by step."


@torch.inference_mode()
def evaluate(pair, eagle, data: Distill, max_k: int = max(KS)) -> dict:
    """Spec-Bench held-out figures of an `EagleLM` along the target's greedy path (see module docstring)."""
    first, runs, by_cat = [], [], {}
    for s in tqdm(range(len(data)), desc="eagle eval (prompts)"):
        ids, P, _ = data.sequence(s)
        ids = ids.tolist()
        pair.target.reset()
        f = pair.target.forward(ids, with_logits=False).features
        eagle.reset()
        m = []
        for i in range(len(ids) - P):  # a round whose root is position P - 1 + i
            root = P - 1 + i
            eagle.add_target_features(0, f[:root])  # what the engine knows: committed[:-1]
            eagle.crop(root)
            if eagle.length < root:
                eagle.forward(ids[eagle.length : root], with_logits=False)
            logits = eagle.forward([ids[root]]).logits[-1]
            run, K = 0, min(max_k, len(ids) - 1 - root)
            for k in range(K):
                if int(logits.argmax()) != ids[root + 1 + k]:
                    break
                run += 1
                if k + 1 < K:
                    logits = eagle.forward([ids[root + 1 + k]]).logits[-1]
            m.append(run)
        runs.append(torch.tensor(m))
        first.append(torch.tensor(m) > 0)
        by_cat.setdefault(data.meta[s]["category"], []).append(torch.tensor(m) > 0)
    allr = torch.cat(runs)
    res = {
        "positions": len(allr),
        "prompts": len(data),
        "agreement": float(torch.cat(first).float().mean()),
        "agreement_by_category": {c: float(torch.cat(v).float().mean()) for c, v in sorted(by_cat.items())},
    }
    for K in KS:
        a = allr.clamp(max=K)
        at_least = [float((a >= j).float().mean()) for j in range(K + 1)]
        res[f"K{K}"] = {
            "E_accepted": float(a.float().mean()),
            "tau": 1 + float(a.float().mean()),
            "alpha": [at_least[j] / max(at_least[j - 1], 1e-9) for j in range(1, K + 1)],
        }
    return res


def run_eval(out: Path, work: Path, cfg: EagleTrainConfig) -> dict:
    pair = load_pair(ModelConfig(dtype="bf16", device="cpu"))
    data = draft_eval.heldout_data(pair, cfg.eval_prompts, work / "eval-data", 128)
    eagle = load_eagle(out, pair.target.model)
    pair.target.tap(eagle.taps)
    res = {
        **evaluate(pair, eagle, data),
        "context_vocab": eagle.context_vocab,
        "coverage": draft_eval.coverage(data, eagle.head_ids),
    }
    res["cost"] = step_costs(replace(pair, draft=eagle), encode_prompt(pair.tokenizer, COST_PROMPT))
    c = res["cost"]
    res["predicted_speedup"] = {f"K{K}": res[f"K{K}"]["tau"] / (K * c["c"] + c["verify"][K + 1]) for K in KS}
    print(table(res))
    return res


def table(res: dict) -> str:
    c = res["cost"]
    lines = (
        [
            f"Held-out: {res['prompts']} Spec-Bench prompts, {res['positions']} target greedy positions (bf16), "
            f"{'the head ids and the context' if res.get('context_vocab') else 'the head ids alone'} as the drafter's "
            "vocabulary."
        ]
        + (
            [
                f"The target's greedy token is one of the {res['coverage']['size']} head ids "
                f"at {res['coverage']['head']:.1%} of these positions, a head id or a token of the context "
                f"before it at {res['coverage']['head_and_context']:.1%}."
            ]
            if res.get("coverage")
            else []
        )
        + [
            "",
            f"- greedy agreement at the first drafted token: **{res['agreement']:.3f}**",
            f"- step time (bf16, one token, warm cache): target {c['target_ms']:.1f} ms, "
            f"drafter {c['draft_ms']:.2f} ms, "
            f"**c = {c['c']:.3f}**{busy_text(c)}",
            "",
            "| K | E[accepted] | tau | alpha per draft position | predicted speedup |",
            "|---|---|---|---|---|",
        ]
    )
    for K in KS:
        r = res[f"K{K}"]
        lines.append(
            f"| {K} | {r['E_accepted']:.2f} | {r['tau']:.2f} | {' '.join(f'{x:.2f}' for x in r['alpha'])} | "
            f"{res['predicted_speedup'][f'K{K}']:.2f}x |"
        )
    lines += [
        "",
        "Agreement by category: " + ", ".join(f"{k} {v:.2f}" for k, v in res["agreement_by_category"].items()),
    ]
    return "\n".join(lines)


def _previous(prev: dict | None) -> str:
    """Card lines for the earlier stages of a warm-started run (oldest first)."""
    stages = []
    while prev:
        stages.append(prev)
        prev = prev.get("previous")
    lines = []
    for i, p in enumerate(reversed(stages), 1):
        c, h = p["config"], p["history"][-1]
        lines.append(
            f"- stage {i} of {len(stages) + 1} (each later stage continues with `--warm-start`): {c['steps']} "
            f"steps, lr {c['lr']}, {c.get('doc_prompts', 64)} long-context prompts, "
            f"{c.get('broad_prompts', 0)} prompts over real text, {c.get('self_prompts', 0)} target-written "
            f"prompts{_real(c)}{_counts(c)}{_copy_stage(c)}"
            f"{', loss over the context vocabulary' if c.get('context_vocab') else ''}, feature loss weight "
            f"{c['feat_weight']}, {p['train_min']:.1f} min; validation agreement {h['heldout_agreement']:.3f} / "
            f"{h['heldout_agreement_own_features']:.3f} (own features)"
            + (f"; Spec-Bench agreement {p['agreement']:.3f}" if p.get("agreement") else "")
        )
    if lines:
        lines.append(
            "- validation figures are only comparable within a stage: a stage with other data draws another "
            "validation split, which can hold sequences earlier stages trained on (so it starts high)"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def _real(c: dict) -> str:
    """', N ShareGPT first turns' for a stage that used them."""
    return f", {c['real_prompts']} ShareGPT first turns" if c.get("real_prompts") else ""


def _counts(c: dict) -> str:
    """', N greedy / M sampled composed prompts' where a stage used other counts than the draft's recipe."""
    base = DraftTrainConfig()
    g, s = c.get("greedy_prompts", base.greedy_prompts), c.get("sampled_prompts", base.sampled_prompts)
    return (
        "" if (g, s) == (base.greedy_prompts, base.sampled_prompts) else f", {g} greedy / {s} sampled composed prompts"
    )


def _ctx_loss(cfg: EagleTrainConfig) -> str:
    return (
        (" and each position's context up to it (`--context-vocab`: q as the engine's context vocabulary forms it)")
        if cfg.context_vocab
        else ""
    )


def _copy_stage(c: dict) -> str:
    """', adds the prompt-lookup input (gain starting at G)' for the stage that widened fc."""
    return (
        f", adds the prompt-lookup input (`--copy-input`, gains starting at {c['copy_gain']:g})"
        if c.get("copy_input")
        else ""
    )


def _copy_init(cfg: EagleTrainConfig) -> str:
    return (
        ""
        if not cfg.copy_input
        else f"; this stage widens fc with a zero block for a_n e(y_t), gains a_n starting "
        f"at {cfg.copy_gain:g} (so its step 0 is the drafter it continues)"
    )


def _docs(cfg: EagleTrainConfig) -> str:
    base = DraftTrainConfig().doc_prompts
    docs = _counts(asdict(cfg)) + (
        ""
        if cfg.doc_prompts == base
        else (
            f", with {cfg.doc_prompts} long-context prompts (summarize / answer / extract over texts the target wrote)"
            f" where the draft's recipe has {base}"
        )
    )
    return (
        docs
        + (
            ""
            if not cfg.broad_prompts
            else f", and the target's greedy answers to {cfg.broad_prompts} prompts over real text (`train/corpus.py`: "
            "topics from its vocabulary's words, German manual-page sentences to translate, standard-library "
            "functions to explain, test or port)"
        )
        + (
            ""
            if not cfg.self_prompts
            else f", and its greedy answers to {cfg.self_prompts} user turns it wrote itself (`train/selfprompts.py`: "
            "sampled at T = 1 from its chat template's open user turn, kept when it closed the turn)"
        )
        + (
            ""
            if not cfg.real_prompts
            else f", and its greedy answers to {cfg.real_prompts} first turns real users wrote (`train/sharegpt.py`: "
            f"{sharegpt.SOURCE})"
        )
    )


def _has_copy(cfg: EagleTrainConfig, facts: dict) -> bool:
    """Does the drafter read the prompt-lookup input (added in this stage or an earlier one)?"""
    prev = facts.get("previous")
    while not cfg.copy_input and prev:
        if prev["config"].get("copy_input"):
            return True
        prev = prev.get("previous")
    return cfg.copy_input


def _g(cfg, facts) -> str:
    blocks = ["e(x_t)", "f_(t-1)"] + (["a_n e(y_t)"] if _has_copy(cfg, facts) else [])
    blocks += [f"u^{k}_(t-1)" for k in cfg.taps]  # the target's normed layer-k outputs (models.eagle)
    return f"fc([{', '.join(blocks)}])"


def _copy_text(cfg, facts) -> str:
    return (
        ""
        if not _has_copy(cfg, facts)
        else "\ny_t is what prompt lookup proposes after x_<=t (the most recent "
        "earlier occurrence of the longest matching n-gram, n <= 8; in the engine over the n-grams of the tokens "
        "the target has run and the newest tokens of the token's own path), a_n a learned gain per match length "
        "(0 without a match): one attention layer cannot form the induction head that copying needs."
    )


def _taps_text(cfg) -> str:
    return (
        f"\nu^k is the target's final norm over the output of its first k layers (k = {', '.join(map(str, cfg.taps))}; "
        "zeros after a drafted parent)."
        if cfg.taps
        else ""
    )


def _copy_key(cfg, facts) -> str:
    return " and the gains a_n (`eagle_copy_gain`)" if _has_copy(cfg, facts) else ""


def command(cfg: EagleTrainConfig, facts: dict) -> str:
    """The command that trains this stage again: every setting that differs from the defaults, and the warm start
    for a stage that continued an earlier one (flags left out fall back to the defaults: the recipe of a run without
    `--warm-start`)."""
    default = asdict(EagleTrainConfig())
    flags = [
        f"--{k.replace('_', '-')}"
        + ("" if isinstance(v, bool) else f" {' '.join(map(str, v))}" if isinstance(v, tuple) else f" {v}")
        for k, v in asdict(cfg).items()
        if v != default[k] and k != "seed"
    ]
    warm = ["--warm-start models/smollm2-eagle"] if facts.get("previous") else []
    return " ".join(["python -m specviz.train eagle", *warm, *flags])


def _layers(cfg: EagleTrainConfig) -> str:
    return "one Llama decoder layer" if cfg.layers == 1 else f"{cfg.layers} Llama decoder layers"


def write_card(out: Path, cfg: EagleTrainConfig, facts: dict, res: dict | None) -> None:
    mb = (out / "eagle.safetensors").stat().st_size / 1e6
    h = facts["history"]
    text = f"""# specviz EAGLE-style drafter for SmolLM2-135M-Instruct

A feature-level drafter (`specviz.models.eagle`): g_t = {_g(cfg, facts)}, {_layers(cfg)} over its own
KV cache, the target's final norm shape, and the target's tied output layer restricted to the
{facts["head_size"]} token ids of the standalone draft (`specviz.head_ids`) and, in the engine
(`ModelConfig.context_vocab`, on by default), every token of its context. f is the target's post-norm last
hidden state; drafted tokens whose parent the target has not run read the drafter's own
prediction.{_copy_text(cfg, facts)}{_taps_text(cfg)}
`eagle.safetensors` ({mb:.1f} MB, bf16) holds fc, the layer and the norm{_copy_key(cfg, facts)}; embeddings are the
target's.
Hugging Face assisted generation cannot drive a feature drafter: the standalone draft in
`models/smollm2-draft` is the pair it (and any hub pair) uses.

## Recipe (seed {cfg.seed})
This stage: `{command(cfg, facts)}`
- init: the standalone draft's layer and norm, fc = [I | 0] (so step 0 is that draft exactly){_copy_init(cfg)}.
- data: the standalone draft's distillation sequences{_docs(cfg)} ({facts["train_seqs"]} sequences,
  {facts["train_tokens"]:,} tokens, {facts["train_resp"]:,} response positions;
  `python -m specviz.train draft` builds the draft's part) plus the
  target's features at every token (one teacher-forced pass, cached under --work; data and features took
  {facts["feature_min"]:.1f} min in this run, cached shards and features reused); {facts["held_seqs"]}
  greedy sequences held out for validation.
- loss: two passes per batch (exact input features with {cfg.noise} x scale Gaussian noise, then the drafter's own
  detached features); each: cross-entropy to the target's top-32 over the reduced
  vocabulary{_ctx_loss(cfg)} + {cfg.feat_weight} x
  smooth-L1 of the standardised feature error.
- optimisation: AdamW (0.9 / 0.98), lr {cfg.lr}, {cfg.warmup} warm-up steps, cosine to 10 %, {cfg.steps} steps of <=
  {cfg.batch_tokens} tokens, grad clip 1.0,
  {precision(cfg)} on CPU ({facts["threads"]} threads): {facts["train_min"]:.1f} min.
  Validation (teacher-forced): agreement {h[-1]["heldout_agreement"]:.3f} with exact features,
  {h[-1]["heldout_agreement_own_features"]:.3f} reading its own (step 0: {h[0]["heldout_agreement"]:.3f} /
  {h[0]["heldout_agreement_own_features"]:.3f}).

{_previous(facts.get("previous"))}
## Held-out metrics (`python -m specviz.train eagle --eval-only`)
{table(res) if res else "(not evaluated)"}

The predicted speedup uses the training machine's bf16 step costs; bf16 is emulated on an AVX2 CPU, where a
target forward over n tokens grows almost linearly with n, so the engine runs fp32 here (dtype auto).
Measured speedups: `specviz bench` (README).
"""
    card.write_card(out / "README.md", text)
    (out / "training.json").write_text(json.dumps({"config": asdict(cfg), **facts, "eval": res}, indent=1))
