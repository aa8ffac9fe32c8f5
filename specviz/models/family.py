"""What a model family does that exact verification must reproduce, read once from the model: how each layer
attends, how its output layer's logits are transformed, and why a model cannot be verified at all.

- **Attention layout** (`Layout`): each decoder layer attends to the whole context or to a sliding window of the
  last w positions, as Hugging Face's own cache reads it (`get_layer_types_and_kwargs`: Mistral's window on every
  layer, Gemma 2 / 3's alternating sliding and global layers). `LM` keeps every position of every layer in its
  cache (a tree's nodes and a rollback need them) and applies each window in the 4-D mask it builds
  (`windowed`); a model that takes one mask per kind of layer gets a mapping (`Layout.mapping`).
- **Output logits** (`logit_scale`, `softcap`): Cohere multiplies the output layer's logits by `logit_scale`,
  Granite divides them by `logits_scaling`, Gemma 2 / 3 soft-cap them. A scale moves no argmax, so greedy output
  stays equal without it while sampling draws from the wrong distribution: `LM.logits` applies them, and the
  loader's probe (`models.exact`) checks the result against the model's own forward.
- **Refusal** (`refusal`): a model whose layers keep a recurrent state (Mamba, RWKV, linear attention: Hugging
  Face's `_is_stateful`) cannot run a draft tree with a tree mask nor roll back a rejected token; an
  encoder-decoder model is not a causal LM; a layer kind other than full or sliding attention (chunked, indexed)
  is not one the mask here reproduces. Each is refused at load with a sentence.
"""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import dataclass

import torch
from transformers.cache_utils import get_layer_types_and_kwargs

FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class Layout:
    """kinds: each decoder layer's attention, FULL or SLIDING; windows: kind -> w (None: the whole context);
    mapping: the model takes a mask per kind (a dict keyed by kind) rather than one mask for every layer."""

    kinds: tuple[str, ...]
    windows: dict
    mapping: bool = False

    @property
    def slides(self) -> bool:
        return any(w is not None for w in self.windows.values())


def _kinds(config) -> tuple[list[str], list[dict]]:
    text = config.get_text_config(decoder=True)
    return get_layer_types_and_kwargs(text)


def _takes_mapping(base) -> bool:
    """Whether the decoder's forward reads a dict of masks keyed by layer kind (Gemma 2 / 3, Qwen2, SmolLM3...)."""
    return _module_takes_mapping(type(base).__module__)


@functools.cache
def _module_takes_mapping(module: str) -> bool:
    return "causal_mask_mapping := attention_mask" in inspect.getsource(sys.modules[module])


def layout(model) -> Layout:
    """The attention layout of `model` (a causal LM); ValueError with `refusal`'s sentence where it has none."""
    why = refusal(model)
    if why:
        raise ValueError(why)
    kinds, kwargs = _kinds(model.config)
    windows = {}
    for kind, kw in zip(kinds, kwargs):
        windows[kind] = kw.get("sliding_window") if kind == SLIDING else None
    mapping = SLIDING in windows and _takes_mapping(model.get_decoder())
    return Layout(tuple(kinds), windows, mapping)


def refusal(model) -> str | None:
    """Why `model` cannot be verified exactly, as one sentence naming the reason; None when it can."""
    cfg = model.config
    name = f"{type(model).__name__} ({cfg.model_type})"
    if getattr(cfg, "is_encoder_decoder", False):
        return f"{name} is an encoder-decoder model; speculative decoding here needs a decoder-only causal LM"
    if getattr(model, "_is_stateful", False):
        return (
            f"{name} keeps a recurrent state in its layers (state-space, linear attention or RWKV): a draft tree "
            "cannot be verified in one pass with a tree attention mask, nor a rejected token rolled back, so "
            "specviz cannot verify it exactly"
        )
    try:
        kinds, _ = _kinds(cfg)
    except (AttributeError, TypeError, ValueError) as e:
        return f"{name}: its layer layout could not be read ({e}), so specviz cannot verify it exactly"
    odd = sorted(set(kinds) - {FULL, SLIDING})
    if odd:
        return (
            f"{name} has {', '.join(odd)} layers; specviz reproduces full and sliding-window attention only, "
            "so it cannot verify this model exactly"
        )
    if len(set(kinds)) > 1 and not _takes_mapping(model.get_decoder()):
        return (
            f"{name} mixes {' and '.join(sorted(set(kinds)))} layers but its forward takes one attention mask, "
            "so a tree mask cannot give each layer its own window"
        )
    return None


def windowed(allow: torch.Tensor, w: int) -> torch.Tensor:
    """`allow` (rows, width) bool with each row restricted to the last w positions it sees.

    A row sees the cached prefix and its own ancestors, which sit in the cache in position order, so its k-th
    visible slot holds position k - 1 and its own slot the last: Hugging Face's sliding window (key position
    > query position - w) keeps the visible slots whose rank from the end is below w."""
    rank = allow.cumsum(-1)
    return allow & (rank > allow.sum(-1, keepdim=True) - w)


def logit_scale(config) -> tuple[float, float]:
    """(m, d): the model multiplies its output layer's logits by m (Cohere's `logit_scale`), then divides them by d
    (Granite's `logits_scaling`); (1.0, 1.0) for most families."""
    m, d = getattr(config, "logit_scale", None), getattr(config, "logits_scaling", None)
    return float(1.0 if m is None else m), float(1.0 if d is None else d)


def softcap(config) -> float | None:
    """Gemma 2 / 3's final soft cap: logits -> cap tanh(logits / cap)."""
    return getattr(config, "final_logit_softcapping", None) or None
