"""Row statistics: the inspector's summaries (torch.topk's values and -sum p log p, from chosen rows read in place)
and the greedy verify's argmax (torch's index: the first of equal maxima, or the first NaN)."""

import math

import pytest
import torch

from specviz.engine import tops
from specviz.kernels import rowstats

pytestmark = pytest.mark.skipif(rowstats._kernel() is None, reason="numba is not installed")


def _probs(rows: int, V: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-1, 1.7, rows)[:, None]  # flat to peaked
    return torch.softmax(torch.randn(rows, V, generator=g) * scale, -1)


@pytest.mark.parametrize("V", [49152, 1000, 130, 7])
def test_summaries_match_torch_on_chosen_rows(V):
    p = _probs(6, V)
    p[2, : V // 2] = 0.0  # zeros count 0 in the entropy
    rows, k = [5, 0, 2, 2], 8
    vals, ids, h = rowstats.summarize(p, rows, k)
    want_v, want_i = torch.topk(p[rows], min(k, V))
    assert vals == want_v.tolist()
    assert all(p[r, i].item() == v for r, i_row, v_row in zip(rows, ids, vals) for i, v in zip(i_row, v_row))
    want_h = (-(p[rows].double() * torch.log(p[rows].double().clamp_min(1e-300))).sum(-1)).tolist()
    assert h == pytest.approx(want_h, rel=2e-5, abs=1e-6)


def test_edges_one_hot_uniform_ties_and_what_it_leaves_to_torch():
    V = 300
    p = torch.zeros(3, V)
    p[0, 17] = 1.0  # one hot: entropy 0, one positive entry
    p[1] = 1 / V  # uniform: entropy log V; ties keep the earlier index first
    p[2, [5, 250]] = 0.5
    vals, ids, h = rowstats.summarize(p, [0, 1, 2], 4)
    assert ids[0][0] == 17 and vals[0][1:] == [0.0] * 3 and h[0] == 0.0
    assert ids[1] == [0, 1, 2, 3] and h[1] == pytest.approx(math.log(V), rel=1e-6)
    assert ids[2][:2] == [5, 250] and h[2] == pytest.approx(math.log(2), rel=1e-6)
    assert rowstats.summarize(p, [2, 1], 4, entropy=False) == ([vals[2], vals[1]], [ids[2], ids[1]], [])
    assert rowstats.summarize(p.double(), [0], 4) is None and rowstats.summarize(p, [], 4) is None


def test_summaries_are_top_pairs_and_entropies_to_four_digits():
    p = _probs(5, 5000, seed=1)
    fast = tops.summaries(p, [0, 3, 4], 6)
    rows = p[[0, 3, 4]]
    slow = tops.top_pairs(rows, 6), tops.entropies(rows)
    assert [[i for i, _ in r] for r in fast[0]] == [[i for i, _ in r] for r in slow[0]]
    assert [[v for _, v in r] for r in fast[0]] == [[v for _, v in r] for r in slow[0]]
    assert fast[1] == pytest.approx(slow[1], rel=1e-3)


@pytest.mark.parametrize("V", [49152, 700, 129, 128, 1])
def test_argmax_is_torchs_index_on_ties_infinities_zeros_and_nans(V):
    g = torch.Generator().manual_seed(V)
    x = torch.randint(-3, 3, (400, V), generator=g).float()  # many ties
    r = torch.rand(400, V, generator=g)
    x[r < 0.002] = float("nan")
    x[(r > 0.01) & (r < 0.05)] = float("-inf")
    x[(r > 0.05) & (r < 0.07)] = float("inf")
    x[(r > 0.1) & (r < 0.3)] = -0.0
    x[::7] = float("-inf")  # rows of -inf only: index 0
    x[1::7] = torch.randn(V, generator=g) * 30  # real logits: one maximum
    assert rowstats.argmax(x) == x.argmax(-1).tolist()


def test_argmax_leaves_other_dtypes_and_empty_rows_to_torch():
    x = torch.randn(3, 50).double()
    assert rowstats.argmax(x) == x.argmax(-1).tolist()
    assert rowstats.argmax(x.float()[:, ::2]) == x.float()[:, ::2].argmax(-1).tolist()  # strided: a contiguous copy
    with pytest.raises((RuntimeError, IndexError)):
        rowstats.argmax(torch.empty(2, 0))
