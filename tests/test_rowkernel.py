"""The numba row kernel: F.linear's numbers, batch-invariant, used for 1-16 rows outside autograd, switchable."""

import pytest
import torch
import torch.nn.functional as F

from specviz import kernels
from specviz.kernels import rowkernel


def test_row_kernel_matches_f_linear_and_skinny_linear_takes_it():
    assert rowkernel.enabled(), "numba is a requirement: the kernel must compile here"
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(300, 70, generator=g), torch.randn(300, generator=g)
    with torch.no_grad():
        for rows in range(1, rowkernel.MAX_ROWS + 1):
            x = torch.randn(rows, 70, generator=g)
            assert rowkernel.serves(x, w)
            torch.testing.assert_close(rowkernel.linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)
            got = kernels.skinny_linear(x[None], w, b)  # (1, rows, 300), the bias added
            assert torch.equal(got[0], rowkernel.linear(x, w) + b)
        assert not rowkernel.serves(torch.randn(rowkernel.MAX_ROWS + 1, 70), w)
        assert not rowkernel.serves(torch.randn(2, 70, dtype=torch.float64), w.double())
    assert not rowkernel.serves(torch.randn(2, 70), w)  # autograd on: torch's kernels


def test_row_kernel_is_batch_invariant():
    """A row's product is bitwise the same alone and among others (what keeps verify and decode steps equal)."""
    g = torch.Generator().manual_seed(1)
    m = rowkernel.MAX_ROWS
    for n_in in (576, 1536 + 7):  # a tail past the last block of 16
        w, x = torch.randn(257, n_in, generator=g), torch.randn(m, n_in, generator=g)
        with torch.no_grad():
            alone = torch.cat([rowkernel.linear(x[i : i + 1], w) for i in range(m)])
            torch.testing.assert_close(alone, F.linear(x, w), rtol=1e-5, atol=1e-4)
            for n in range(2, m + 1):
                assert torch.equal(rowkernel.linear(x[:n], w), alone[:n])
            assert torch.equal(rowkernel.linear(x[2:9], w), alone[2:9])


def test_bf16_weights_are_widened_exactly():
    """`dots` over bf16 weights: the product of their exact fp32 values in the declared order (the same bits as over
    the widened fp32 array), batch-invariant; linear layers in bf16 keep torch's kernels."""
    g = torch.Generator().manual_seed(2)
    w, x = torch.randn(130, 1536 + 5, generator=g).bfloat16(), torch.randn(5, 1536 + 5, generator=g)
    with torch.no_grad():
        got = rowkernel.dots(x, w)
        assert got.dtype == torch.float32 and torch.equal(got, rowkernel.dots(x, w.float()))
        assert torch.equal(got[2:4], rowkernel.dots(x[2:4], w))
        torch.testing.assert_close(got, x @ w.float().T, rtol=1e-5, atol=1e-4)
        xb = x.bfloat16()
        assert not rowkernel.serves(xb, w) and torch.equal(kernels.skinny_linear(xb, w), F.linear(xb, w))


def test_off_restores_and_a_missing_numba_falls_back(monkeypatch):
    w, x = torch.randn(40, 16), torch.randn(3, 16)
    with torch.no_grad():
        with rowkernel.off():
            assert not rowkernel.serves(x, w) and not rowkernel.enabled()
            torch.testing.assert_close(kernels.skinny_linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)
        assert rowkernel.serves(x, w)
        monkeypatch.setitem(rowkernel._state, "kernel", None)
        monkeypatch.setitem(rowkernel._state, "failed", True)  # as where numba cannot be imported
        assert not rowkernel.serves(x, w) and rowkernel.version() is None
        torch.testing.assert_close(kernels.skinny_linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_row_kernel_follows_torch_threads(threads):
    import numba

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            rowkernel.linear(torch.randn(2, 16), torch.randn(40, 16))
        assert numba.get_num_threads() == min(threads, numba.config.NUMBA_NUM_THREADS)
    finally:
        torch.set_num_threads(before)
