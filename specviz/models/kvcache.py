"""The two key/value caches `LM` runs on, and the verbs on them (`length`, `reserve`, `keep`).

Both keep every position of every layer, a sliding-window layer's too: a draft tree's branches and a rollback need
positions a window would have dropped, and the window is applied in the mask `LM` builds (`models.family`).

**Growing** (the default): Hugging Face's `DynamicCache` with its attention layers growing inside a buffer of
doubling capacity instead of concatenating.

`DynamicLayer.update` concatenates the cached keys and values with the new ones on every forward, which copies the
whole cache each step. `GrowingLayer` writes the new states into spare capacity and hands attention a view of the
filled front, so a step copies only its own tokens (and, amortised, one doubling); the gain grows with the
context (measured: docs/design.md#kernels). The cached numbers are the same;
`keys` / `values` stay (batch, heads, length, head_dim) tensors, views into the buffer, so `LM.keep` and `crop`,
which write into and slice them, work unchanged; a layer whose tensors something else replaced adopts them on its
next update. The training data's batched generation (`specviz.train.data.continue_batch`) uses it too, with the
same tokens and log-probabilities bitwise.

**Fixed** (`FixedCache`): Hugging Face's `StaticCache`, buffers of a fixed capacity that attention always reads
whole, the unfilled and stale slots hidden by the 4-D mask `LM` passes. Every forward of n new tokens then has the
same tensor shapes and addresses whatever the context, which is what CUDA graphs need. Its length lives on the host
(`FixedCache.n`, no device sync); writes go through HF's device-side write position. When a forward would
overflow, `reserve` copies it into one of twice the capacity (new addresses: graphs captured on the old one are
dropped by their owner, `specviz.models.graphs`). Masked slots get exactly zero weight in a softmax; with the
batch-invariant `rows_attention`, which reads only the keys a query may see, a fixed cache gives the growing cache's
numbers to the bit (tested). Kernels that reduce over the whole width (sdpa, and eager attention's matmuls) may
round differently in the last bit.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer, StaticLayer, StaticSlidingWindowLayer

from specviz.core.config import KV_CACHES

MIN_CAPACITY = 64  # spare slots past a fresh fill; later growths double the buffer
FIXED_CAPACITY = 256  # a fixed cache's first capacity; it doubles when a forward would overflow it


def _front_of(view: torch.Tensor, buf: torch.Tensor | None) -> bool:
    """Whether `view` is buf[..., :n, :] for some n (same storage start and strides)."""
    return (
        buf is not None
        and view.dim() == 4
        and view.data_ptr() == buf.data_ptr()
        and view.stride() == buf.stride()
        and view.shape[:2] == buf.shape[:2]
        and view.shape[3] == buf.shape[3]
    )


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer that appends into spare capacity (module docstring)."""

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self.keys.shape[-2] if self.keys.numel() else 0
        m = n + key_states.shape[-2]
        held = (
            _front_of(self.keys, self._kbuf)
            and _front_of(self.values, self._vbuf)
            and self._kbuf.dtype == key_states.dtype
            and self._kbuf.shape[:2] == key_states.shape[:2]
        )
        if not (held and m <= self._kbuf.shape[-2]):  # first update, full, or the tensors were replaced
            cap = max(m + MIN_CAPACITY, 2 * self._kbuf.shape[-2] if held else 0)
            kb = key_states.new_empty(*key_states.shape[:2], cap, key_states.shape[3])
            vb = value_states.new_empty(*value_states.shape[:2], cap, value_states.shape[3])
            if n:
                kb[..., :n, :], vb[..., :n, :] = self.keys, self.values
            self._kbuf, self._vbuf = kb, vb
        self._kbuf[..., n:m, :] = key_states
        self._vbuf[..., n:m, :] = value_states
        self.keys, self.values = self._kbuf[..., :m, :], self._vbuf[..., :m, :]
        return self.keys, self.values

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        super().reset()


class FixedCache(StaticCache):
    """HF's `StaticCache` with its length on the host (module docstring)."""

    def __init__(self, config, capacity: int = FIXED_CAPACITY):
        super().__init__(config=config, max_cache_len=capacity)
        self.config, self.capacity, self.n = config, capacity, 0
        self.layers = [  # every position kept: a sliding layer's window lives in the mask (models.family)
            StaticLayer(max_cache_len=capacity) if type(layer) is StaticSlidingWindowLayer else layer
            for layer in self.layers
        ]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        if layer_idx == 0:
            if self.n + key_states.shape[-2] > self.capacity:
                raise ValueError(f"fixed cache full: {self.n} + {key_states.shape[-2]} > {self.capacity} (reserve)")
            self.n += key_states.shape[-2]
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def set_length(self, n: int) -> None:
        """Forget every position from n on (their slots stay, masked, until overwritten)."""
        self.n = n
        for layer in self.layers:
            if layer.is_initialized:
                layer.cumulative_length.fill_(n)


def new_cache(config, kind: str = "growing") -> DynamicCache | FixedCache:
    """An empty cache of this kind: "growing" or "fixed"."""
    if kind not in KV_CACHES:
        raise ValueError(f"kv cache must be one of {KV_CACHES}, got {kind!r}")
    if kind == "fixed":
        return FixedCache(config)
    cache = DynamicCache(config=config)
    cache.layers = [  # a sliding layer keeps every position too: its window lives in the mask (models.family)
        GrowingLayer() if type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) else layer for layer in cache.layers
    ]
    return cache


def emptied(cache, config, kind: str):
    """An empty cache of this kind: a fixed `cache` emptied in place (its buffers, and the graphs captured on them,
    stay), else a new one."""
    if kind == "fixed" and isinstance(cache, FixedCache):
        cache.set_length(0)
        return cache
    return new_cache(config, kind)


def length(cache) -> int:
    """Positions cached."""
    return cache.n if isinstance(cache, FixedCache) else cache.get_seq_length()


def capacity(cache) -> int | None:
    """The width attention reads for a fixed cache; None for a growing one (its filled front)."""
    return cache.capacity if isinstance(cache, FixedCache) else None


def reserve(cache, total: int):
    """`cache`, or for a fixed cache that cannot hold `total` positions, a copy with room (capacity doubled)."""
    if not isinstance(cache, FixedCache) or total <= cache.capacity:
        return cache
    cap = cache.capacity
    while cap < total:
        cap *= 2
    bigger = FixedCache(cache.config, cap)
    for old, new in zip(cache.layers, bigger.layers):
        if old.is_initialized:
            new.lazy_initialization(old.keys, old.values)
            new.keys[..., : cache.n, :] = old.keys[..., : cache.n, :]
            new.values[..., : cache.n, :] = old.values[..., : cache.n, :]
    bigger.set_length(cache.n)
    return bigger


def keep(cache, m: int, n: int, tail: torch.Tensor | None) -> None:
    """Keep n positions: the first m where they are, then the cached positions `tail` (n - m, ascending) moved
    into slots m .. n-1, in place."""
    for layer in cache.layers:
        if getattr(layer, "keys", None) is not None and layer.keys.numel():
            if tail is not None:  # index_select copies first, so the overlap is safe
                layer.keys[..., m:n, :] = layer.keys.index_select(-2, tail)
                layer.values[..., m:n, :] = layer.values.index_select(-2, tail)
            if not isinstance(cache, FixedCache):
                layer.keys = layer.keys[..., :n, :]
                layer.values = layer.values[..., :n, :]
    if isinstance(cache, FixedCache):
        cache.set_length(n)
