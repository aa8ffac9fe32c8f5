"""head_ceiling: labels of judged candidates, the recorded head's AUC, the head sharpened to a chosen AUC, and
the replayed gain it buys (no model: synthetic calibration rounds)."""

import math
from dataclasses import replace

import pytest
import torch
from helpers import chain_round

from specviz.analysis.costs import StepCosts, hindsight_k, replay
from specviz.analysis.head_ceiling import (
    ceiling,
    depth_rates,
    evidence_for,
    head_auc,
    sharpened_rounds,
)
from specviz.analysis.metrics import judged_labels
from specviz.tools.pick_h import choose_threshold

ACC, REJ, UNV = "accepted", "rejected", "unvisited"


def calibration_set(n: int = 400, k: int = 6, seed: int = 0) -> list:
    """Rounds drafted to k whose first rejection falls at a random depth (acceptance 0.6 a candidate), with a
    recorded head that knows a little: its factor is 0.65 for an accepted candidate and 0.55 for a rejected one,
    give or take uniform noise of 0.2."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        run = 0
        while run < k and torch.rand((), generator=g) < 0.6:
            run += 1
        statuses = [ACC] * run + ([REJ] + [UNV] * (k - run - 1) if run < k else [])
        factors = [(0.65 if s == ACC else 0.55) + 0.2 * (float(torch.rand((), generator=g)) - 0.5) for s in statuses]
        out.append(replace(chain_round(statuses, k), accept_probs=tuple(factors)))
    return out


def test_judged_labels_and_depth_rates():
    assert judged_labels(chain_round([ACC, ACC, REJ, UNV], 4)) == [1, 1, 0]
    assert judged_labels(chain_round([ACC, ACC], 2)) == [1, 1]
    rounds = [chain_round([ACC, REJ], 2), chain_round([REJ, UNV], 2), chain_round([ACC, ACC], 2)]
    assert depth_rates(rounds) == pytest.approx([2 / 3, 1 / 2])


def test_head_auc_reads_the_recorded_factors_with_and_without_the_lag():
    good = replace(chain_round([ACC, ACC, REJ, UNV], 4), accept_probs=(0.9, 0.8, 0.1, 0.5))
    bad = replace(chain_round([ACC, ACC, REJ, UNV], 4), accept_probs=(0.1, 0.2, 0.9, 0.5))
    assert head_auc([good]) == 1.0 and head_auc([bad]) == 0.0
    lagged = replace(chain_round([ACC, ACC, REJ, UNV], 4), accept_probs=(1.0, 0.9, 0.8, 0.1))  # factor i+1 scores i
    assert head_auc([lagged], lagged=True) == 1.0


def test_sharpening_reaches_the_asked_auc_and_keeps_the_head_at_zero():
    rounds = calibration_set()
    own = head_auc(rounds)
    assert 0.6 < own < 0.9
    assert evidence_for(rounds, own) == pytest.approx(0.0, abs=1e-3)  # the head as it is
    for auc in (0.5, 0.9, 0.99):
        beta = evidence_for(rounds, auc)
        assert head_auc(rounds, beta=beta) == pytest.approx(auc, abs=1e-3)
        assert (beta < 0) == (auc < own)
    assert evidence_for(rounds, 1.0) == math.inf
    perfect = sharpened_rounds(rounds, math.inf, torch.Generator().manual_seed(1))
    assert all(f == y for r in perfect for f, y in zip(r.accept_probs, judged_labels(r)))
    same = sharpened_rounds(rounds, 0.0, torch.Generator())
    assert all(s.accept_probs == pytest.approx(r.accept_probs) for s, r in zip(same, rounds))
    with pytest.raises(ValueError, match="AUC"):
        evidence_for(rounds, 0.4)


def test_ceiling_grows_with_auc_and_the_perfect_head_nears_the_oracle():
    rounds = calibration_set()
    costs = StepCosts(draft_ms=2.0, verify_ms=tuple(30.0 + 1.5 * m for m in range(7)))
    choose = lambda rs: choose_threshold(rs, costs, set(), [round(0.05 * i, 2) for i in range(1, 20)], [6], k_min=1)
    out = ceiling(rounds, choose, [0.5, 0.9, 1.0], torch.Generator().manual_seed(0), draws=2)
    assert out["head_auc"] == pytest.approx(head_auc(rounds)) and out["beta"]["1"] == "inf"
    gain = out["gain"]
    assert gain["0.5"] <= gain["0.9"] < gain["1"] and gain["1"] > 0.05
    # the perfect head stops on a round's first rejected candidate, the hindsight oracle just before it: the
    # same tokens, at most one draft step and one verify token (1.5 ms here) more a round
    oracle_ms, tokens = replay(rounds, lambda r: hindsight_k(r, costs), costs)
    perfect = sharpened_rounds(rounds, math.inf, torch.Generator())
    best = min(choose(perfect)["specdecpp_ms_per_token"].values())
    assert oracle_ms / tokens <= best <= (oracle_ms + len(rounds) * (costs.draft_ms + 1.5)) / tokens


def test_pick_h_rejects_an_absurd_what_if_auc_before_loading(capsys):
    from specviz.tools.sweep import main

    with pytest.raises(SystemExit) as e:
        main(["pick-h", "--what-if-auc", "1.5"])
    assert e.value.code == 2 and "what-if-auc" in capsys.readouterr().err
