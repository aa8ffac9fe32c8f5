"""bf16 products on oneDNN's gemm over weights packed once: `packed_linear` (one layer), `stacked_linear` (a layer's
q / k / v or gate / up as one product) and `bf16_linear_invariant` (whether they keep a row's bits at any row count).

F.linear hands oneDNN the plain (out, in) weight, which it reorders into its blocked layout on every call; on the
default target that reorder was about 40 % of every product, one row or seventeen. `packed_copy` reorders it once
and keeps it on the module (`kept`): the same kernel, the same bits. Where oneDNN sums a lone row in another order
than the same row among others (a Zen 5 EPYC's down projection), a one-row product runs beside a zero row
(`_pads_lone_row`), so a token's products are the same bits alone and inside a verify forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specviz.core.device import dispatched, weight_of
from specviz.kernels import kept

PACKED_MAX_ROWS = 32  # wider bf16 products (prefills) keep F.linear: past 32 rows oneDNN's blocking may round otherwise
_packed = {"failed": False}


def mkldnn_packs() -> bool:
    """Whether this torch can run bf16 products over a prepacked weight (oneDNN built in, bf16 on this CPU)."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def packed_copy(mod: torch.nn.Linear) -> torch.Tensor:
    """`mod`'s bf16 weight reordered once into oneDNN's own blocked layout (`torch.ops.mkldnn`), kept on it and made
    again whenever the weight changed (in place or swapped)."""
    w, box = mod._parameters["weight"], kept.box(mod, "_packed")  # every product asks: the cheapest look-ups
    key = box.key
    if key is None or key[0] is not w or key[1] != kept.version(w) or key[2] != w.data_ptr():
        box.value, box.key = torch.ops.mkldnn._reorder_linear_weight(w.detach()), (w, kept.version(w), w.data_ptr())
    return box.value


def packs(mod: torch.nn.Module) -> bool:
    """Whether `mod` (an installed nn.Linear) runs its products outside autograd over a prepacked bf16 weight now."""
    return bool(mod.__dict__.get("packed_rows")) and not _packed["failed"] and not torch.is_grad_enabled()


def packed_linear(x: torch.Tensor, mod: torch.nn.Linear) -> torch.Tensor:
    """F.linear(x, mod.weight, mod.bias) for 1..PACKED_MAX_ROWS bf16 rows, on oneDNN's gemm over `packed_copy(mod)`:
    the same kernel and the same bits as F.linear (which hands oneDNN the plain weight and has it reordered on every
    call), faster on the few-row products of decoding (measured in docs/design.md#kernels), but for a lone row where
    oneDNN would give it other bits than among others (`_pads_lone_row`); F.linear from then on where this torch
    cannot. A prefill's wider products keep F.linear, whose bits a packed weight need not give there."""
    try:
        return _product(x, packed_copy(mod), mod.bias, mod._parameters["weight"].shape)
    except Exception:
        y = F.linear(x, mod.weight, mod.bias)  # a wrong input raises here, as it would without packing
        _packed["failed"] = True
        return y


def _onednn(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def _product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_in) -> torch.Tensor:
    """oneDNN's product of bf16 rows `x` and the packed (out, in) weight `packed`; a lone row runs beside a zero row
    where that is what gives it the bits it gets among others (`_pads_lone_row`)."""
    if x.numel() != x.shape[-1] or not _pads_lone_row(packed, out_in):
        return _onednn(x, packed, bias)
    row = x.reshape(1, x.shape[-1])
    y = _onednn(torch.cat([row, torch.zeros_like(row)]), packed, bias)[:1]
    return y.view(*x.shape[:-1], y.shape[-1])


_lone: dict[tuple[int, int], bool] = {}  # (out, in) of a packed weight -> whether a lone row runs beside a zero row


def _pads_lone_row(packed: torch.Tensor, out_in) -> bool:
    """Whether a one-row product over the packed (out, in) weight `packed` must run as two rows, the row and a zero
    row, to get the bits the row gets among others: measured once per shape, 32 random rows alone and together. oneDNN
    may serve a lone row on another path that sums in another order: on a Zen 5 EPYC (AVX-512 BF16, no AMX) it does
    where the input dimension is 1,536 (SmolLM2's down projection, a last bit in a few outputs of a row in ten), and
    from two rows on gives a row the same bits at every count measured (2-63); on a Xeon with AMX one row too."""
    key = (int(out_in[0]), int(out_in[1]))
    pads = _lone.get(key)
    if pads is None:
        x = torch.randn(PACKED_MAX_ROWS, key[1], generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
        together = _onednn(x, packed, None)
        pads = not all(torch.equal(_onednn(x[i : i + 1], packed, None), together[i : i + 1]) for i in range(len(x)))
        _lone[key] = pads
    return pads


def _stacked(mods: tuple[torch.nn.Linear, ...], owner: torch.nn.Module) -> tuple[torch.Tensor, bool, tuple[int, int]]:
    """(the bf16 weights of `mods` stacked (sum of their outputs, in) and reordered once into oneDNN's layout, whether
    a product over them gives each module's own bits, the stack's shape), kept on `owner` (the module that holds
    them: a layer's attention or MLP) and made again when any of the weights changed."""
    ws = [m._parameters["weight"] for m in mods]
    key = tuple((w, kept.version(w), w.data_ptr()) for w in ws)
    box = kept.box(owner, "_stacked")
    if box.key is None or any(a[0] is not b[0] or a[1:] != b[1:] for a, b in zip(box.key, key)):
        stacked = _stack(ws)
        box.value, box.key = (stacked, _stacks_exactly(mods, stacked), _stack_shape(mods)), key
    return box.value


def _stack(ws: list[torch.Tensor]) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(torch.cat([w.detach() for w in ws]))


def _stack_shape(mods: tuple[torch.nn.Linear, ...]) -> tuple[int, int]:
    return sum(m.out_features for m in mods), mods[0].in_features


_stacks: dict[tuple, bool] = {}  # the weights' shapes -> whether their stacked product gives each one's bits


def _stacks_exactly(mods: tuple[torch.nn.Linear, ...], stacked: torch.Tensor | None = None) -> bool:
    """Whether a product over the stacked weights of `mods` (`stacked`, made here if not given) gives every module's
    own `packed_linear` bits, at 1 .. PACKED_MAX_ROWS rows: measured once for each set of shapes (oneDNN blocks the
    outputs by their count; on a Xeon with AMX the default target's q / k / v and gate / up products are the same
    bits stacked or apart)."""
    shapes = tuple(tuple(m.weight.shape) for m in mods)
    exact = _stacks.get(shapes)
    if exact is None:
        stacked = _stack([m.weight for m in mods]) if stacked is None else stacked
        g = torch.Generator().manual_seed(0)
        exact = True
        for n in (1, 2, 3, 5, 9, 17, PACKED_MAX_ROWS):
            x = torch.randn(n, shapes[0][1], generator=g).to(torch.bfloat16)
            y = _product(x, stacked, None, _stack_shape(mods))
            exact = exact and torch.equal(y, torch.cat([packed_linear(x, m) for m in mods], -1))
        _stacks[shapes] = exact
    return exact


def stacked_linear(x: torch.Tensor, mods: tuple[torch.nn.Linear, ...], owner: torch.nn.Module):
    """[mod(x) for mod in mods] as one product over their stacked packed weight (`_stacked`: one oneDNN call instead
    of one each) where that gives each product's own bits (`_stacks_exactly`), for bf16 rows that `packed_linear`
    serves; the outputs are views into the one result. None where it does not serve (the caller runs the modules one
    by one)."""
    if x.dtype != torch.bfloat16 or x.numel() > PACKED_MAX_ROWS * x.shape[-1]:
        return None
    if not all(packs(m) and m.bias is None for m in mods):
        return None
    try:
        weight, exact, out_in = _stacked(mods, owner)
        y = _product(x, weight, None, out_in) if exact else None
    except Exception:
        _packed["failed"] = True
        return None
    if y is None:
        return None
    outs, start = [], 0
    for m in mods:
        outs.append(y[..., start : start + m.out_features])
        start += m.out_features
    return outs


def bf16_linear_invariant(model: torch.nn.Module, rows: int = 17) -> bool:
    """Whether the bf16 products decoding runs (`packed_linear` where this torch packs weights, else F.linear) give a
    row the same bits alone and among 2..`rows` rows (a tree of 16 and its root), on a sample of `model`'s own linear
    layers (the first decoder layer's and the output layer). With `rows_attention` this is what keeps a bf16 target's
    verify forward equal to its decode step. Measured true on a Xeon with AMX (oneDNN, 1-32 rows, every shape of the
    default target) and, with a lone row padded where oneDNN needs it (`_pads_lone_row`), on a Zen 5 EPYC; nothing
    promises it elsewhere, so `specviz.models.loading.load_pair` asks before it trusts bf16. About 0.1 s for the
    default target; the packed copies it makes are the ones decoding then uses."""
    lins = [m for m in model.modules() if type(m) is torch.nn.Linear]
    head = model.get_output_embeddings()
    g = torch.Generator().manual_seed(0)
    packed = mkldnn_packs() and not dispatched(model)  # a dispatched model's products stay stock (kernels.install)
    with torch.no_grad():
        for mod in {id(m): m for m in lins[:7] + [head]}.values():
            w = weight_of(mod)
            x = torch.randn(rows, mod.in_features, generator=g).to(w.dtype)
            product = (lambda x, m=mod: packed_linear(x, m)) if packed else (lambda x, w=w: F.linear(x, w))
            alone = torch.cat([product(x[i : i + 1]) for i in range(rows)])
            if not all(torch.equal(product(x[:n]), alone[:n]) for n in (2, 3, 4, 5, 8, 9, rows)):
                return False
    return True
