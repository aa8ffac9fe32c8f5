"""Few-row products at memory speed: y = x W^T for 1..MAX_ROWS rows of x, compiled with numba.

A decode step or a small verify multiplies every weight matrix by a handful of rows, so it should cost
what streaming the weights from memory costs. MKL's few-row kernels do not get there on this project's
2-core AVX2 machine: at these shapes they run near 5 GB/s, where the same machine streams 20-25 GB/s.
This kernel reads each weight row once, while it is in L1, and takes its dot product with every input row
(measured 2026-12-02, weights cold in memory, µs, this kernel / MKL's skinny gemm:
the 49152 x 576 output layer, 1 row 6,300 / 18,800, 4 rows 9,600 / 22,300; a 1536 x 576 MLP matrix,
1 row 290 / 800, 4 rows 370 / 870, 8 rows 520 / 1,075; at 16 rows MKL's blocked gemm catches up, so wider
inputs keep it). A whole SmolLM2-135M forward on a 300-token cache: 1 token 87 -> 70 ms, 4 tokens 109 -> 93 ms;
in the benchmark (assets/bench/README.md) a token of autoregressive decoding 101 -> 78 ms, a chain's four-token
verify 115 -> 104 ms.

Every output element is one dot product over the input dimension, summed in an order that does not
depend on how many rows come along (fastmath lets LLVM vectorise that sum, the same way for every
row): a token's products are bitwise the same whether it runs alone or inside a verify forward.

numba is a dependency (requirements.txt); where it cannot be imported or compiled, `serves` says no and
the caller keeps its torch kernels. `off()` turns the kernel off for a while (the benchmark's ablation).
"""
from __future__ import annotations

import contextlib
import threading

import torch

MAX_ROWS = 8                      # 9..16 rows: MKL's gemm is as fast (module docstring)
_state = {"enabled": True, "kernel": None, "failed": False}
_local = threading.local()        # numba's thread count is per calling thread (a Gradio handler is one)


def _build():
    """The numba kernel, compiled on first use (cached on disk by numba); None where numba is missing."""
    try:
        import numba
        import numpy as np
    except Exception:
        return None

    @numba.njit(parallel=True, fastmath=True, cache=True, boundscheck=False, nogil=True)
    def rows_times_weight(w, x, y):              # y[j, o] = sum_k w[o, k] x[j, k]
        n_out, n_in = w.shape
        block = 32
        for b in numba.prange((n_out + block - 1) // block):
            for o in range(b * block, min(n_out, b * block + block)):
                for j in range(x.shape[0]):
                    acc = np.float32(0.0)
                    for k in range(n_in):
                        acc += w[o, k] * x[j, k]
                    y[j, o] = acc

    return rows_times_weight


def _kernel():
    if _state["kernel"] is None and not _state["failed"]:
        _state["kernel"] = _build()
        _state["failed"] = _state["kernel"] is None
    return _state["kernel"]


def serves(x2: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernel takes this product: (rows, in) fp32 CPU input with 1..MAX_ROWS rows, outside autograd."""
    return (1 <= x2.shape[0] <= MAX_ROWS and x2.dtype == weight.dtype == torch.float32
            and x2.device.type == weight.device.type == "cpu" and not torch.is_grad_enabled() and enabled())


def linear(x2: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x2 @ weight^T for a (rows, in) input the kernel `serves` -> (rows, out)."""
    threads = torch.get_num_threads()                # numba follows torch's thread count
    if threads != getattr(_local, "threads", 0):
        import numba
        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        _local.threads = threads
    y = torch.empty(x2.shape[0], weight.shape[0], dtype=torch.float32)
    try:
        _kernel()(weight.detach().contiguous().numpy(), x2.detach().contiguous().numpy(), y.numpy())
    except Exception:                            # a numba that cannot compile here: torch's kernels from now on
        _state["failed"], _state["kernel"] = True, None
        return torch.nn.functional.linear(x2, weight)
    return y


def enabled() -> bool:
    """Whether the kernel is on (not inside `off()`) and compiles here."""
    return _state["enabled"] and _kernel() is not None


def version() -> str | None:
    """"numba X.Y.Z" where the kernel can run, else None."""
    if _kernel() is None:
        return None
    import numba
    return f"numba {numba.__version__}"


@contextlib.contextmanager
def off():
    """Run the block on torch's kernels only, then restore."""
    before = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = before
