"""The output rows of a reduced-vocabulary LM: the token ids outside which its q is zero, and the rows of its output
layer that compute the rest.

A frequency-ranked head (`head_ids`) comes first and never moves; with `context`, every token fed since the last
`reset` joins it (`grow`), its rows appended in place to buffers that double when full, beside the fp16 and int8
copies the few-row kernels read (specviz.kernels.linear)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specviz import kernels
from specviz.core.device import to_device

HEADROOM = 256  # rows a first widening makes room for beyond the head


class Support:
    """Rows `ids[:n]` of the output layer `head`: `weight[:n]`, and `half[:n]` / `int8` (weights, scales) where the
    head's few-row kernels read reduced copies."""

    def __init__(self, head: torch.nn.Module, head_ids: torch.Tensor, context: bool):
        self.head, self.context = head, context
        self.head_ids = head_ids
        weight = head.weight.index_select(0, head_ids).contiguous()  # (Vsub, H)
        self.head_rows = (
            weight,
            weight.detach().half() if kernels.halves(head) else None,
            kernels.quantize_rows(weight) if kernels.int8s(head) else None,
        )
        self.mask = torch.zeros(head.weight.shape[0], dtype=torch.bool, device=head_ids.device)
        self.mask[head_ids] = True  # the head's own ids
        self.ids, (self.weight, self.half, self.int8) = head_ids, self.head_rows  # grown on the first new id
        self.reset()

    def reset(self) -> None:
        """Back to the head's ids alone (grown buffers stay, the head's rows in front, for the next run)."""
        self.n = len(self.head_ids)
        self.fed = self.mask.cpu().clone() if self.context else None  # ids in the support, on the host

    def grow(self, ids: Sequence[int]) -> None:
        """Add the fed tokens `ids` that are not in the support yet (context supports only)."""
        idt = torch.as_tensor(list(ids), dtype=torch.long)
        new = idt[~self.fed[idt]].unique()
        if not len(new):
            return
        self.fed[new] = True
        n, m = self.n, self.n + len(new)
        if m > len(self.ids) or self.ids is self.head_ids:
            self._make_room(m)
        new = to_device(new, self.head_ids.device)
        self.ids[n:m] = new
        self.weight[n:m] = self.head.weight.index_select(0, new)
        if self.half is not None:
            self.half[n:m] = self.weight[n:m]
        if self.int8 is not None:
            self.int8[0][n:m], self.int8[1][n:m] = kernels.quantize_rows(self.weight[n:m])
        self.n = m

    def _make_room(self, m: int) -> None:
        """Buffers of capacity >= m, the support's rows in front (the head's own are never written)."""
        n, k = self.n, len(self.head_ids)
        cap = max(m, k + HEADROOM, 2 * len(self.ids) - k)

        def grown(buf: torch.Tensor) -> torch.Tensor:
            out = buf.new_empty(cap, *buf.shape[1:])
            out[:n] = buf[:n]
            return out

        self.ids, self.weight = grown(self.ids), grown(self.weight)
        self.half = None if self.half is None else grown(self.half)
        self.int8 = None if self.int8 is None else (grown(self.int8[0]), grown(self.int8[1]))
