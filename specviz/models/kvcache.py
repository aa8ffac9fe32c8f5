"""A key/value cache that appends in place: Hugging Face's `DynamicCache` with its full-attention layers growing
inside a buffer of doubling capacity instead of concatenating.

`DynamicLayer.update` concatenates the cached keys and values with the new ones on every forward, which copies the
whole cache each step. `GrowingLayer` writes the new states into spare capacity and hands attention a view of the
filled front, so a step copies only its own tokens (and, amortised, one doubling); the gain grows with the
context (measured: docs/design.md#kernels). The cached numbers are the same;
`keys` / `values` stay (batch, heads, length, head_dim) tensors, views into the buffer, so `LM.keep` and `crop`,
which write into and slice them, work unchanged; a layer whose tensors something else replaced adopts them on its
next update. The training data's batched generation (`specviz.train.data.continue_batch`) uses it too, with the
same tokens and log-probabilities bitwise.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 64  # spare slots past a fresh fill; later growths double the buffer


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


def new_cache(config) -> DynamicCache:
    """`DynamicCache(config=config)` whose plain full-attention layers are `GrowingLayer`s (others as they were)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
