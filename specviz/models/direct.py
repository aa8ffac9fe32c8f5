"""A Llama decoder's inference forward, layer by layer, without Hugging Face's per-call machinery.

`LlamaModel.forward` wraps every decoder layer, attention and MLP in `nn.Module.__call__` (hooks, the gradient
checkpointing layer's own `__call__`), keyword-argument decorators and output capturing. For SmolLM2-135M's 30
layers that costs, on a 2-core AMX Xeon in bf16, 1.7 ms of a 37.7 ms one-token step and 2.2 ms of a nine-token
verify (measured: docs/design.md#kernels). `forward` runs the same functions on the same tensors in the same
order: the model's own embedding, rotary embedding, norms and projections (with whatever `specviz.kernels` installed
on them; a layer's q / k / v and gate / up products as one product over their stacked weights, `stacked_linear`,
where that gives each its own bits), `apply_rotary_pos_emb` (or the same bits from
`specviz.kernels.elementwise.rotary`, one pass instead of seven ops), the cache's `update`, the registered attention
function with Hugging Face's arguments, and `create_causal_mask`.
Its hidden states are therefore bitwise Hugging Face's (tested on chains, trees and both caches, fp32 and bf16).

It serves the plain Llama stack (`serves`: the Llama model class, every layer full attention, the stock decoder
layer, attention and MLP); any other model keeps Hugging Face's forward.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import create_causal_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama import modeling_llama as llama

from specviz.kernels import elementwise
from specviz.kernels.packed import stacked_linear


def serves(base) -> bool:
    """Whether `base` (a decoder, `model.get_decoder()`) is a plain Llama stack this forward reproduces exactly. `LM`
    also keeps Hugging Face's forward while the model is in training mode."""
    layer_types = getattr(base.config, "layer_types", None) or ["full_attention"]
    return (
        type(base) is llama.LlamaModel
        and all(map(_plain, base.layers))
        and all(t == "full_attention" for t in layer_types)
    )


def _plain(layer) -> bool:
    """The stock decoder layer, attention and MLP (an activation module: `_run` calls its forward)."""
    return (
        type(layer) is llama.LlamaDecoderLayer
        and type(layer.self_attn) is llama.LlamaAttention
        and type(layer.mlp) is llama.LlamaMLP
        and isinstance(layer.mlp.act_fn, torch.nn.Module)
    )


def _run(mod, x: torch.Tensor) -> torch.Tensor:
    """`mod(x)` without `nn.Module.__call__`: its own forward (a norm's, an installed kernel's, nn.Linear's)."""
    return mod.forward(x)


def forward(
    base, position_ids: torch.Tensor, attention_mask, cache, input_ids=None, inputs_embeds=None, taps=()
) -> torch.Tensor:
    """`base(input_ids or inputs_embeds, position_ids=..., attention_mask=..., cache=..., use_cache=True)`'s
    last_hidden_state (1, n, H), computed as Hugging Face's Llama computes it (module docstring); with `taps`,
    (1, n, H (1 + m)): beside it the final norm over the output of the first k layers for each k in `taps`."""
    h = base.embed_tokens.forward(input_ids) if inputs_embeds is None else inputs_embeds
    mask = create_causal_mask(
        config=base.config, inputs_embeds=h, attention_mask=attention_mask, cache=cache, position_ids=position_ids
    )
    cos, sin = base.rotary_emb.forward(h, position_ids=position_ids)
    rope = elementwise.rotary(cos, sin, h.dtype)  # torch's rotary embedding, fused (None: torch's own ops)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(base.config._attn_implementation, llama.eager_attention_forward)
    shape = h.shape[:-1]
    kw = {"position_ids": position_ids, "use_cache": True}
    tapped = []
    for i, layer in enumerate(base.layers[: base.config.num_hidden_layers]):
        if i in taps:  # the output of the first i layers
            tapped.append(_run(base.norm, h))
        a = layer.self_attn
        x = _run(layer.input_layernorm, h)
        hs = (*shape, -1, a.head_dim)
        qkv = stacked_linear(x, (a.q_proj, a.k_proj, a.v_proj), a)  # one product where that gives the same bits
        q, k, v = qkv or (_run(a.q_proj, x), _run(a.k_proj, x), _run(a.v_proj, x))
        v = v.view(hs).transpose(1, 2)
        if rope is not None and q.dtype == k.dtype == h.dtype:
            q, k = rope(q, k)
        else:
            q, k = llama.apply_rotary_pos_emb(q.view(hs).transpose(1, 2), k.view(hs).transpose(1, 2), cos, sin)
        k, v = cache.update(k, v, a.layer_idx, kwargs=kw)
        o, _ = attend(a, q, k, v, mask, dropout=0.0, scaling=a.scaling, **kw)
        h = h + _run(a.o_proj, o.reshape(*shape, -1).contiguous())
        x = _run(layer.post_attention_layernorm, h)
        m = layer.mlp
        gate, up = stacked_linear(x, (m.gate_proj, m.up_proj), m) or (_run(m.gate_proj, x), _run(m.up_proj, x))
        h = h + _run(m.down_proj, _run(m.act_fn, gate) * up)
    h = _run(base.norm, h)
    return torch.cat([h, *tapped], -1) if tapped else h


def with_taps(base, out, taps=()) -> torch.Tensor:
    """`forward`'s result from Hugging Face's output `out` (run with `output_hidden_states=bool(taps)`)."""
    if not taps:
        return out.last_hidden_state
    return torch.cat([out.last_hidden_state, *(_run(base.norm, out.hidden_states[k]) for k in taps)], -1)
