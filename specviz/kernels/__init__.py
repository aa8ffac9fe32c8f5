"""specviz's compute kernels: few-row linear products, batch-invariant attention and fused elementwise steps for CPU
decoding.

`linear` installs them on a model (skinny / half-row / int8 / prepacked bf16 products, the fused norm); `packed` holds
the bf16 products over weights packed once for oneDNN; `attention` holds the attention functions registered with
transformers; `rowkernel` and `_rowkernel_ir` are the numba row kernel, `_attention_ir` the invariant attention built
on it; `elementwise` and `_elementwise_ir` the fused rotary embedding and RMS norm; `rowstats` summarizes probability
rows (top k, entropy) for the node inspector; `switch` loads a numba kernel's code once and turns a kernel off for a
block (the benchmark's ablations); `kept` holds the forms of a module's weights made once.
"""

from specviz.kernels.attention import ROWS_MAX_QUERIES, rows_attention, sdpa_gqa
from specviz.kernels.linear import (
    ATTENTION,
    ROWS_ATTENTION,
    SKINNY_MAX_ROWS,
    few_rows,
    full_rows,
    half_copy,
    half_row_linear,
    halves,
    install,
    int8_copy,
    int8_linear,
    int8s,
    invariant_attention,
    one_row,
    padded_rows,
    quantize_rows,
    skinny_linear,
    stock,
    wanted,
)
from specviz.kernels.packed import bf16_linear_invariant, mkldnn_packs, packed_copy, packed_linear, packs

__all__ = [
    "ATTENTION",
    "ROWS_ATTENTION",
    "ROWS_MAX_QUERIES",
    "SKINNY_MAX_ROWS",
    "bf16_linear_invariant",
    "few_rows",
    "full_rows",
    "half_copy",
    "half_row_linear",
    "halves",
    "install",
    "int8_copy",
    "int8_linear",
    "int8s",
    "invariant_attention",
    "mkldnn_packs",
    "one_row",
    "packed_copy",
    "packed_linear",
    "packs",
    "padded_rows",
    "quantize_rows",
    "rows_attention",
    "sdpa_gqa",
    "skinny_linear",
    "stock",
    "wanted",
]
