"""Few-row products at memory speed: y = x W^T for 1..MAX_ROWS rows of x, compiled with numba.

A decode step or a small verify multiplies every weight matrix by a handful of rows, so it should cost
what streaming the weights from memory costs. MKL's few-row kernels do not get there: on a 2-core AVX2 EPYC
they run near 5 GB/s at these shapes, where the same machine streams 20-25 GB/s. This kernel reads each weight
row once, while it is in L1, and takes its dot product with every input row, up to four at a time (several
products in one pass over the weight row make the multi-row cases cheaper). From 17 rows on MKL's blocked gemm
is as fast, so `MAX_ROWS` is 16 (measured: docs/benchmarks.md#why-the-defaults).

Every output element is one dot product over the input dimension, summed in one fixed order: IC = 2
accumulators of VF = 8 lanes, accumulator u taking elements 16c + 8u + l by fma in increasing c; the
accumulators added, then the lanes added pairwise by halves (l and l + 4, then l and l + 2, then l and l + 1);
then the elements past the last whole block of 16, summed in order, added last. The kernel is written in LLVM
IR without fast-math flags, so the compiler cannot reassociate it: a token's products are bitwise the same
whether it runs alone or inside a verify forward, at any row count.

bf16 weights (`dots`; the bf16 target's attention reads its cache through it, `attention.rows_attention`) are
widened to fp32 exactly as they are loaded, so a bf16 product is the same sequence of roundings as over the fp32
copy. The linear layers of a bf16 model keep oneDNN's kernel (over packed weights, `packed.packed_linear`): on a
CPU with AMX oneDNN's bf16 gemm is nearly flat in rows, where this kernel's cost grows with them, and, measured
there, batch-invariant for 1-32 rows at every shape of the default target (`packed.bf16_linear_invariant` checks
the loaded model).

numba is a dependency (requirements.txt); where it cannot be imported or compiled, `serves` says no and
the caller keeps its torch kernels. `off()` turns the kernel off for a while (the benchmark's ablation).
"""

from __future__ import annotations

import threading

import torch

from specviz.kernels import switch

MAX_ROWS = 16  # 17+ rows: MKL's blocked gemm (module docstring)
WEIGHT_DTYPES = (torch.float32, torch.bfloat16)  # what `dots` reads; `linear` serves fp32 (module docstring)
_state = {"enabled": True, "kernel": None, "failed": False}  # kernel: the `_rowkernel_ir` module, once imported
_local = threading.local()  # numba's thread count is per calling thread (a Gradio handler is one)


def _kernel():
    """The numba kernel (`_rowkernel_ir`), compiled on first use and cached on disk; None where numba is missing."""
    code = switch.load(_state, "_rowkernel_ir")
    return None if code is None else code.rows_times_weight


def serves(x2: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernel takes this linear layer's product: (rows, in) fp32 CPU input with 1..MAX_ROWS rows, outside
    autograd."""
    return (
        1 <= x2.shape[0] <= MAX_ROWS
        and x2.dtype == weight.dtype == torch.float32
        and x2.device.type == weight.device.type == "cpu"
        and not torch.is_grad_enabled()
        and enabled()
    )


def linear(x2: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x2 @ weight^T for a (rows, in) input the kernel `serves` -> (rows, out)."""
    try:
        return dots(x2, weight)
    except Exception:  # a numba that cannot compile here: torch's kernels from now on
        _state["failed"], _state["kernel"] = True, None
        return torch.nn.functional.linear(x2, weight)


def dots(x2: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(rows, in) x (out, in) -> (rows, out) fp32: every dot product in the declared order, any row count (the
    caller checks `enabled`); x2 is read in fp32, weight in fp32 or bf16 (CPU tensors outside autograd)."""
    threads = torch.get_num_threads()  # numba follows torch's thread count
    if threads != getattr(_local, "threads", 0):
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        _local.threads = threads
    w = weight.detach().contiguous()
    w = w.view(torch.int16) if w.dtype == torch.bfloat16 else w  # bf16 bits: the kernel widens them on load
    y = torch.empty(x2.shape[0], weight.shape[0], dtype=torch.float32)
    _kernel()(w.numpy(), x2.detach().float().contiguous().numpy(), y.numpy())
    return y


def enabled() -> bool:
    """Whether the kernel is on (not inside `off()`) and compiles here."""
    return _state["enabled"] and _kernel() is not None


def version() -> str | None:
    """ "numba X.Y.Z" where the kernel can run, else None."""
    if _kernel() is None:
        return None
    import numba

    return f"numba {numba.__version__}"


def off():
    """Run the block on torch's kernels only, then restore."""
    return switch.off(_state)
