"""Row statistics of the target's output in one pass a row: a probability row's top k entries and entropy
(`summarize`), what the node inspector shows, and a logit row's argmax (`argmax`), what a greedy verify reads.

The node inspector keeps, every round, the top of the target's distribution at each parent in the tree and its
entropy. In torch that is a copy of the chosen rows and seven passes over each (a block top-k and five elementwise
steps of -sum p log p): about 0.9 ms a round of the default pair on a 2-core Xeon, 2-3 % of a round. The numba
kernel (`_rowstats_ir.summarize`) reads each chosen row in place, once, with the rows split over the threads.
Its top k are torch.topk's values (indices may differ among equal values); its entropy uses its own log (relative
error under 1e-7) and sums in vector lanes, so it agrees with torch's to float rounding, not bit for bit.

torch's argmax of a float32 row runs one element at a time (80 µs for the default target's 49,152 logits on a 2-core
Xeon, 650 µs for a 16-token verify); `argmax` finds the same index (the first of equal maxima, or the first NaN)
from sixteen-lane block maxima, 13 and 93 µs.
"""

from __future__ import annotations

import numpy as np
import torch

from specviz.kernels import switch

_state = {"kernel": None, "failed": False}  # kernel: the `_rowstats_ir` module, once imported


def _kernel():
    return switch.load(_state, "_rowstats_ir")


def summarize(
    probs: torch.Tensor, rows: list[int], k: int, entropy: bool = True
) -> tuple[list[list[float]], list[list[int]], list[float]] | None:
    """The k largest entries of each of `probs`' `rows` (values, ids: largest first) and, with `entropy`, each row's
    entropy in nats (else []), for a CPU fp32 `probs` (N, V); None where the kernel does not serve (numba missing,
    another device or dtype)."""
    kernel = _kernel()
    if kernel is None or probs.device.type != "cpu" or probs.dtype != torch.float32 or probs.ndim != 2 or not rows:
        return None
    p = probs.detach().contiguous().numpy()
    k = min(k, p.shape[1])
    m = len(rows)
    vals, ids, h = np.empty((m, k), np.float32), np.empty((m, k), np.int64), np.empty(m if entropy else 0, np.float32)
    kernel.summarize(p, np.asarray(rows, np.int64), vals, ids, h)
    return vals.tolist(), ids.tolist(), h.tolist()


def argmax(logits: torch.Tensor) -> list[int]:
    """`logits.argmax(-1).tolist()` of a 2-D `logits` (n, V): the kernel's where it serves (CPU fp32), else torch's."""
    kernel = _kernel()
    if kernel is None or logits.device.type != "cpu" or logits.dtype != torch.float32 or logits.shape[-1] == 0:
        return logits.argmax(-1).tolist()
    x = logits.detach().contiguous().numpy()
    out = np.empty(x.shape[0], np.int64)
    kernel.argmax(x, out)
    return out.tolist()
