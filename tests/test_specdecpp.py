"""SpecDec++: the stop rule, losslessness end to end, hindsight K and the choice of h (tiny models); the head itself
is tested in test_specdecpp_head.py."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from helpers import chain_round, with_hindsight
from lossless import greedy_equal
from scipy.stats import chisquare

from specviz.analysis import metrics
from specviz.analysis.costs import (
    StepCosts,
    first_rejection,
    hindsight_k,
    tokens_if,
)
from specviz.core.config import RunConfig, SamplingConfig, SpecDecPPConfig
from specviz.core.ngram import NgramIndex
from specviz.core.sampling import make_rng
from specviz.engine.loop import iter_rounds
from specviz.engine.record import generate
from specviz.methods.specdecpp import inputs as head_inputs
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import (
    AcceptanceHead,
)
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.methods.specdecpp.stop_rule import stop_rule
from specviz.models.lm import Forward
from specviz.models.pair import Pair

PROMPT = [5, 9, 17, 3, 33, 8]


def run_rule(head_probs, cfg, eos_at=None, budget=None):
    """Drive stop_rule the way the drafter does; head_probs[n-1] is what the head says at step n."""
    cum = 1.0
    for n, a in enumerate(head_probs, 1):
        cum, reason = stop_rule(n, a, cum, n == eos_at, cfg, budget)
        if reason:
            return n, reason, cum
    raise AssertionError("the rule never stopped")


# -- stop rule -----------------------------------------------------------------------------------


def test_bounds():
    cfg = SpecDecPPConfig(threshold=0.5, k_min=3, k_max=5)
    assert run_rule([0.0] * 10, cfg)[:2] == (3, "threshold")  # would stop at 2 without k_min
    assert run_rule([1.0] * 10, cfg)[:2] == (5, "k_max")
    assert run_rule([1.0] * 10, SpecDecPPConfig(0.5, 1, 1))[:2] == (1, "k_max")


def test_threshold_edge_is_strict():
    cfg = SpecDecPPConfig(threshold=0.5, k_min=1, k_max=10)
    assert run_rule([1.0, 0.5, 1.0, 1.0, 0.999], cfg)[:2] == (5, "threshold")  # 1 - 0.5 == h: not yet
    assert run_rule([1.0, 0.25], cfg)[:2] == (2, "threshold")
    n, _, cum = run_rule([1.0, 0.5, 0.5], cfg)
    assert n == 3 and cum == 0.25


def test_eos_stops_before_anything_else():
    cfg = SpecDecPPConfig(threshold=0.9, k_min=4, k_max=8)
    assert run_rule([1.0] * 8, cfg, eos_at=2)[:2] == (2, "eos")
    assert run_rule([1.0] * 8, cfg, eos_at=1)[:2] == (1, "eos")


def test_budget_caps_below_k_max():
    cfg = SpecDecPPConfig(threshold=0.9, k_min=1, k_max=8)
    assert run_rule([1.0] * 8, cfg, budget=3)[:2] == (3, "budget")
    assert run_rule([1.0] * 8, cfg, budget=8)[:2] == (8, "k_max")


def test_lag_first_factor_is_one():
    cfg = SpecDecPPConfig(threshold=0.1, k_min=1, k_max=8)
    # step 1's head output scores the already-verified last committed token: ignored, so no stop at 1
    cum, reason = stop_rule(1, 0.0, 1.0, False, cfg)
    assert (cum, reason) == (1.0, None)
    # step 2 scores Y_1; stopping there still submits Y_2 (n = 2 candidates)
    assert run_rule([0.0, 0.5], cfg)[:2] == (2, "threshold")
    # a head without the lag scores Y_1 at step 1: the rule can stop after one candidate
    assert stop_rule(1, 0.0, 1.0, False, cfg, lagged=False) == (0.0, "threshold")
    assert stop_rule(1, 0.95, 1.0, False, cfg, lagged=False) == (0.95, None)


def test_a_head_without_the_lag_stops_before_drafting_on(tiny_pair):
    """No lag: step 1's factor is the head on the state that drafted Y_1 (the root's) and Y_1's own inputs; a
    head sure of a rejection ends the round at one candidate with one draft forward, none over Y_1."""
    pair = tiny_pair("random")
    head = AcceptanceHead(pair.draft.config.hidden_size, 1, rng=make_rng(0), inputs=CATALOG, lag=False)
    with torch.no_grad():
        head.out.bias.copy_(torch.tensor([30.0, -30.0]))  # P(accept) ~ 0 whatever it reads
    d = SpecDecPPDrafter(pair.draft, SamplingConfig(), make_rng(0), head, SpecDecPPConfig(0.5, 1, 6), pair.eos_ids)
    d.begin(PROMPT)
    before = pair.draft.forwards
    prop = d.propose(PROMPT, 10)
    assert prop.draft_forwards == 1 and pair.draft.forwards - before == 1 and len(prop.tree.tokens) == 2
    assert prop.info["stop_reason"] == "threshold" and prop.info["accept_probs"][0] < 1e-6
    with torch.no_grad():
        head.out.bias.zero_()
    pair.draft.reset()
    z = pair.draft.forward(PROMPT)
    y1 = int(z.logits[-1].argmax())
    index = NgramIndex(8)
    index.extend(PROMPT)
    row = head_inputs.columns(
        head_inputs.distribution_columns(torch.softmax(z.logits[-1].float(), -1), torch.tensor(y1)),
        torch.tensor(1.0),
        torch.tensor(1),
        torch.tensor(head_inputs.copy_columns(index, [], y1)),
        torch.tensor(0.0),
    )
    d.begin(PROMPT)
    prop = d.propose(PROMPT, 10)
    assert prop.info["accept_probs"][0] == pytest.approx(float(head.accept_prob(z.hidden[-1], row)), rel=1e-4)


# -- lossless end to end ---------------------------------------------------------------------------


def drafter(pair, cfg, sampling=SamplingConfig(), seed=0, lag=True):
    head = AcceptanceHead(pair.draft.config.hidden_size, 2, rng=make_rng(seed), inputs=CATALOG, lag=lag)
    return SpecDecPPDrafter(pair.draft, sampling, make_rng(seed), head, cfg, pair.eos_ids)


@pytest.mark.parametrize("lag", [True, False])
@pytest.mark.parametrize("draft", ["same", "random"])
@pytest.mark.parametrize("cfg", [SpecDecPPConfig(0.3, 1, 5), SpecDecPPConfig(0.9, 2, 8), SpecDecPPConfig(0.5, 1, 1)])
def test_greedy_equals_autoregressive(tiny_pair, draft, cfg, lag):
    pair = tiny_pair(draft)
    run = RunConfig(method="specdecpp", max_new_tokens=40, specdecpp=cfg)
    sp = greedy_equal(pair, PROMPT, run, drafter=drafter(pair, cfg, lag=lag))
    for r in sp.rounds:
        assert len(r.accept_probs) == len(r.stop_probs) == r.n_drafted <= cfg.k_max
        assert r.stop_reason in ("threshold", "k_max", "eos", "budget") and r.threshold == cfg.threshold
        if r.n_drafted and lag:
            assert r.accept_probs[0] == 1.0 and r.stop_probs[0] == 0.0
        for n, rej in enumerate(r.stop_probs[:-1], 1):  # no earlier step met the rule
            assert n < cfg.k_min or rej <= cfg.threshold
        if r.stop_reason == "threshold":
            assert r.stop_probs[-1] > cfg.threshold and r.n_drafted >= cfg.k_min
    if draft == "same":
        assert all(r.n_accepted == r.n_drafted for r in sp.rounds)
    assert metrics.head_lag(sp) == lag  # no head card for this in-memory head: read off the factors
    assert sum(len(r.emitted) for r in sp.rounds) == 40


class TableLM:
    """A stand-in for `LM` (chains only): logits and hidden state are fixed random functions of the last two tokens."""

    wants_target_features = context_vocab = half_rows = False  # reads ids only, full vocabulary, no half rows

    def __init__(self, vocab, hidden, seed, scale=1.0):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab * vocab, vocab, generator=g) * scale
        self.feats = torch.randn(vocab * vocab, hidden, generator=g)
        self.vocab_size, self.device, self.dtype = vocab, torch.device("cpu"), torch.float32
        self.config = SimpleNamespace(hidden_size=hidden)
        self.model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[]))
        self.ctx = []

    length = property(lambda self: len(self.ctx))

    def reset(self):
        self.ctx = []

    def crop(self, n):
        self.ctx = self.ctx[:n]

    def keep(self, positions):
        self.ctx = [self.ctx[i] for i in positions]

    def key(self, a, b):
        return a * self.vocab_size + b

    def forward(self, ids, parents=None, rows=None, with_logits=True):
        assert parents is None or list(parents) == list(range(-1, len(ids) - 1))
        start = len(self.ctx)
        self.ctx += list(ids)
        keys = torch.tensor([self.key(self.ctx[max(i - 1, 0)], self.ctx[i]) for i in range(start, len(self.ctx))])
        keys = keys if rows is None else keys[rows]
        return Forward(self.feats[keys], self.table[keys] if with_logits else None)


@pytest.mark.parametrize("lag", [True, False])
def test_two_first_tokens_follow_the_target(lag):
    """Chi-square on the first two emitted tokens (36 cells) over many sampled runs, table-driven models."""
    V, prompt, n = 6, [5, 1, 3], 2500
    pair = Pair(TableLM(V, 16, seed=1), TableLM(V, 16, seed=2, scale=1.5), None, {})
    s = SamplingConfig(temperature=1.0)
    cfg = SpecDecPPConfig(0.6, 1, 4)
    run = RunConfig(method="specdecpp", max_new_tokens=6, sampling=s, specdecpp=cfg)
    rng = make_rng(7)
    d = SpecDecPPDrafter(pair.draft, s, rng, AcceptanceHead(16, 2, rng=make_rng(3), lag=lag), cfg)
    counts, lengths = torch.zeros(V, V), set()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny ops: threads only cost
    try:
        for _ in range(n):
            out = []
            for r in iter_rounds(pair, prompt, run, drafter=d, rng=rng):
                lengths.add(r.n_drafted)
                out += r.emitted
                if len(out) >= 2:
                    break
            counts[out[0], out[1]] += 1
    finally:
        torch.set_num_threads(threads)
    assert len(lengths) >= 3  # the stop rule really varied K
    t = pair.target.table
    expected = torch.softmax(t[pair.target.key(1, 3)], 0)[:, None] * torch.stack(
        [torch.softmax(t[pair.target.key(3, y)], 0) for y in range(V)]
    )
    stat = chisquare(counts.flatten().numpy(), (expected.flatten() * n).numpy())
    assert stat.pvalue > 1e-3, stat


# -- hindsight ---------------------------------------------------------------------------------


def test_hindsight_k(tiny_pair):
    costs = StepCosts(draft_ms=1.0, verify_ms=(10.0, 10.5, 11.0, 11.5, 12.0, 12.5))
    assert tokens_if(3, None) == 4 and tokens_if(3, 2) == 2 and tokens_if(1, 2) == 2
    assert costs.verify(8) == 13.5 and costs.round_ms(2) == 13.0
    acc, rej, unv = "accepted", "rejected", "unvisited"
    assert hindsight_k(chain_round([rej, unv, unv], 3), costs) == 0  # drafting did not pay
    assert hindsight_k(chain_round([acc, rej, unv], 3), costs) == 1  # (1 + 10.5) / 2 beats 10 / 1
    assert hindsight_k(chain_round([acc, acc, acc], 3), costs) == 3  # all accepted: the longest
    assert first_rejection(chain_round([acc, acc, rej], 3)) == 3
    tr = with_hindsight(generate(tiny_pair("random"), PROMPT, RunConfig(method="chain", max_new_tokens=12)))
    assert all(r.hindsight_k is not None and 0 <= r.hindsight_k <= r.n_drafted for r in tr.rounds)


# -- choosing h --------------------------------------------------------------------------------


def test_choose_threshold_prefers_the_head_when_it_knows():
    """Replay on synthetic calibration rounds: easy rounds (all 8 accepted, head confident) and hard ones
    (first candidate rejected, head says so at step 2). SpecDec++ beats every fixed K; the oracle beats both."""
    from specviz.tools.pick_h import choose_threshold

    acc, rej, unv = "accepted", "rejected", "unvisited"
    easy = replace(chain_round([acc] * 8, 8), accept_probs=(1.0,) + (0.97,) * 7)
    hard = replace(chain_round([rej] + [unv] * 7, 8), accept_probs=(1.0,) + (0.1,) * 7)
    costs = StepCosts(draft_ms=1.0, verify_ms=tuple(10.0 + 0.5 * m for m in range(9)))
    out = choose_threshold([easy, hard] * 5, costs, set(), [0.3, 0.5, 0.7], [4, 8], k_min=1)
    assert out["modelled_gain"] > 0 and out["k_max"] == 8
    best_spec = min(out["specdecpp_ms_per_token"].values())
    assert out["oracle_ms_per_token"] <= best_spec < out["fixed_ms_per_token"][out["best_k"]]


def test_choose_threshold_searches_k_min_and_sweep_names_it():
    """A head that doubts every first candidate (factor 0.1) on rounds whose first two are accepted: k_min = 1
    stops after one candidate at every h, k_min = 2 drafts the two that pay, and the grid finds it."""
    from specviz.tools.pick_h import choose_threshold
    from specviz.tools.sweep import settings

    acc, rej, unv = "accepted", "rejected", "unvisited"
    rnd = replace(chain_round([acc, acc, rej, unv], 4), accept_probs=(0.1, 0.9, 0.1, 0.1))
    costs = StepCosts(draft_ms=1.0, verify_ms=tuple(10.0 + 0.5 * m for m in range(5)))
    one = choose_threshold([rnd] * 4, costs, set(), [0.3, 0.5], [4], k_min=1)
    both = choose_threshold([rnd] * 4, costs, set(), [0.3, 0.5], [4], k_min=[1, 2])
    assert one["k_min"] == 1 and both["k_min"] == 2
    assert min(both["specdecpp_ms_per_token"].values()) < min(one["specdecpp_ms_per_token"].values())
    assert (
        "h=0.3,k_min=2,k_max=4" in both["specdecpp_ms_per_token"] and "h=0.3,k_max=4" in one["specdecpp_ms_per_token"]
    )
    names = [key for key, _ in settings([1], [0.5], SpecDecPPConfig(k_min=1), [1, 2])]
    assert names == ["ar", "K=1", "h=0.5", "h=0.5,k_min=2"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--hs", "1.5"],
        ["run", "--k-mins", "9"],
        ["run", "--ks", "0"],
        ["pick-h", "--k-mins", "0"],
        ["run", "--temperatures", "-1"],
        ["run", "--tokens", "0"],
        ["pick-h", "--hs", "0"],
    ],
)
def test_sweep_rejects_absurd_settings_before_loading(argv, capsys):
    from specviz.tools.sweep import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err


def test_sweep_summary_lists_settings_in_the_grid_order_whatever_a_family_started_with():
    """Settings rotate per prompt, so a family's first record may be any of them; its table keeps the grid's order."""
    from specviz.tools.sweep import summarize

    grid = ["ar", "K=1", "h=0.8"]
    rec = lambda fam, i, key: {
        "temperature": 0.0,
        "family": fam,
        "prompt": i,
        "setting": key,
        "tokens": 10,
        "ms": 100.0,
        "rounds": 5,
        "drafted": 4,
        "accepted": 3,
    }
    records = [rec("chat", 0, k) for k in grid] + [rec("math", 1, k) for k in grid[1:] + grid[:1]]
    summary = summarize(records, 0.8)
    assert list(summary["T=0/math"]["table"]) == grid == list(summary["T=0/union"]["table"])
