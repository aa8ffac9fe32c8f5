"""Tiny random models built from a config (no downloads).

SPECVIZ_TEST_DEVICE=cuda runs the tiny-model tests on a GPU: every tiny model is built on the CPU (the same
weights as there) and then moved. Tests that are about the CPU itself (the skinny kernels) stay CPU-only.
"""

from __future__ import annotations

import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

TEST_DEVICE = os.environ.get("SPECVIZ_TEST_DEVICE", "cpu")


def tiny_config(cls=LlamaConfig, vocab: int = 64, layers: int = 2, hidden: int = 32, **extra):
    """A tiny config of a Llama-shaped family (`cls`): 4 query heads sharing 2 key/value heads."""
    return cls(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        **extra,
    )


def tiny_llama_cpu(vocab: int = 64, layers: int = 2, hidden: int = 32, seed: int = 0, dtype=torch.float32):
    """A random tiny Llama on the CPU."""
    torch.manual_seed(seed)
    m = LlamaForCausalLM(tiny_config(LlamaConfig, vocab, layers, hidden)).to(dtype).eval()
    m.generation_config.eos_token_id = 2
    return m


def tiny_llama(*args, **kwargs):
    """A random tiny Llama on the test device."""
    return tiny_llama_cpu(*args, **kwargs).to(TEST_DEVICE)
