"""SpecDec++: the stop rule, the head, losslessness end to end, hindsight K, and one training step (tiny models)."""
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare

from specviz.config import HeadTrainConfig, RunConfig, SamplingConfig, SpecDecPPConfig
from specviz.costs import StepCosts, first_rejection, hindsight_k, tokens_if, with_hindsight
from specviz.decode import generate, iter_rounds
from specviz.lm import Forward
from specviz.loading import Pair
from specviz.sampling import make_rng
from specviz.trace import DraftTree, RoundTrace
from specviz.specdecpp import AcceptanceHead, SpecDecPPDrafter, head_for_pair, load_head, save_head, stop_rule
from specviz.train.head import evaluate, soft_bce, split_by_prompt, train_head, weighted_auc
from specviz.train.head_data import build_head_data

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
    assert run_rule([0.0] * 10, cfg)[:2] == (3, "threshold")          # would stop at 2 without k_min
    assert run_rule([1.0] * 10, cfg)[:2] == (5, "k_max")
    assert run_rule([1.0] * 10, SpecDecPPConfig(0.5, 1, 1))[:2] == (1, "k_max")


def test_threshold_edge_is_strict():
    cfg = SpecDecPPConfig(threshold=0.5, k_min=1, k_max=10)
    assert run_rule([1.0, 0.5, 1.0, 1.0, 0.999], cfg)[:2] == (5, "threshold")   # 1 - 0.5 == h: not yet
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


# -- head --------------------------------------------------------------------------------------

def test_head_shapes_and_independent_blocks(tmp_path):
    head = AcceptanceHead(32, num_layers=3, rng=make_rng(0))
    x = torch.randn(5, 7, 32, dtype=torch.bfloat16)
    assert head(x).shape == (5, 7, 2) and head(x).dtype == torch.float32
    p = head.accept_prob(x[0])
    assert p.shape == (7,) and torch.all((p > 0) & (p < 1))
    ws = [b.weight for b in head.blocks]
    assert len({w.data_ptr() for w in ws}) == 3 and not torch.equal(ws[0], ws[1])
    assert sum(t.numel() for t in head.parameters()) == 3 * (32 * 32 + 32) + 32 * 2 + 2
    save_head(head, tmp_path, {"target": "tiny"})
    again, cfg = load_head(tmp_path)
    assert cfg["num_layers"] == 3 and torch.equal(again.accept_prob(x[0]), p)


def test_q_feature_head_needs_q_and_round_trips(tmp_path):
    head = AcceptanceHead(32, num_layers=2, rng=make_rng(1), q_feature=True)
    x, q = torch.randn(7, 32), torch.rand(7)
    with pytest.raises(ValueError, match="q"):
        head(x)
    p = head.accept_prob(x, q)
    assert p.shape == (7,) and not torch.equal(p, head.accept_prob(x, q / 2))      # q is really read
    assert float(head.accept_prob(x[0], 0.0)) == float(head.accept_prob(x[0], 1e-6))  # log q clamped
    save_head(head, tmp_path, {"target": "tiny"})
    again, cfg = load_head(tmp_path)
    assert cfg["q_feature"] is True and torch.equal(again.accept_prob(x, q), p)


def test_regime_head_reads_the_decoding_regime(tmp_path, tiny_pair):
    with pytest.raises(ValueError, match="q_feature"):
        AcceptanceHead(32, regime_feature=True)
    head = AcceptanceHead(32, num_layers=1, rng=make_rng(2), q_feature=True, regime_feature=True)
    x, q = torch.randn(5, 32), torch.rand(5)
    with pytest.raises(ValueError, match="greedy"):
        head(x, q)
    p = head.accept_prob(x, q, True)
    assert not torch.equal(p, head.accept_prob(x, q, False))
    assert torch.equal(p, head.accept_prob(x, q, torch.ones(5)))
    save_head(head, tmp_path, {"target": "tiny"})
    again, cfg = load_head(tmp_path)
    assert cfg["regime_feature"] is True and torch.equal(again.accept_prob(x, q, True), p)
    # the drafter passes its own regime: at T = 0 the factor of step 2 is the greedy one
    pair = tiny_pair("random")
    head = AcceptanceHead(pair.draft.config.hidden_size, 1, rng=make_rng(0), q_feature=True, regime_feature=True)
    prop = SpecDecPPDrafter(pair.draft, SamplingConfig(), make_rng(0), head, SpecDecPPConfig(0.5, 3, 3),
                            pair.eos_ids).propose(PROMPT, 10)
    pair.draft.reset()
    z = pair.draft.forward(PROMPT).logits[-1]
    y1 = int(z.argmax())
    h1 = pair.draft.forward([y1]).hidden[-1]
    q1 = float(torch.softmax(z.float(), -1)[y1])
    assert prop.info["accept_probs"][1] == pytest.approx(float(head.accept_prob(h1, q1, True)), rel=1e-4)


def test_missing_head_is_a_clear_error(tiny_pair):
    with pytest.raises(ValueError, match="acceptance head"):
        head_for_pair(tiny_pair("near"))


# -- lossless end to end ---------------------------------------------------------------------------

def drafter(pair, cfg, sampling=SamplingConfig(), seed=0):
    head = AcceptanceHead(pair.draft.config.hidden_size, 2, rng=make_rng(seed), q_feature=True)
    return SpecDecPPDrafter(pair.draft, sampling, make_rng(seed), head, cfg, pair.eos_ids)


@pytest.mark.parametrize("draft", ["same", "random"])
@pytest.mark.parametrize("cfg", [SpecDecPPConfig(0.3, 1, 5), SpecDecPPConfig(0.9, 2, 8), SpecDecPPConfig(0.5, 1, 1)])
def test_greedy_equals_autoregressive(tiny_pair, draft, cfg):
    pair = tiny_pair(draft)
    ar = generate(pair, PROMPT, RunConfig(method="ar", max_new_tokens=40))
    sp = generate(pair, PROMPT, RunConfig(method="specdecpp", max_new_tokens=40, specdecpp=cfg), drafter=drafter(pair, cfg))
    assert sp.output_ids == ar.output_ids
    for r in sp.rounds:
        assert len(r.accept_probs) == len(r.stop_probs) == r.n_drafted <= cfg.k_max
        assert r.stop_reason in ("threshold", "k_max", "eos", "budget") and r.threshold == cfg.threshold
        if r.n_drafted:
            assert r.accept_probs[0] == 1.0 and r.stop_probs[0] == 0.0
        for n, rej in enumerate(r.stop_probs[:-1], 1):               # no earlier step met the rule
            assert n < cfg.k_min or rej <= cfg.threshold
        if r.stop_reason == "threshold":
            assert r.stop_probs[-1] > cfg.threshold and r.n_drafted >= cfg.k_min
    if draft == "same":
        assert all(r.n_accepted == r.n_drafted for r in sp.rounds)
    assert sum(len(r.emitted) for r in sp.rounds) == 40


class TableLM:
    """A stand-in for `LM` (chains only): logits and hidden state are fixed random functions of the last two tokens."""

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

    def forward(self, ids, parents=None, rows=None):
        assert parents is None or list(parents) == list(range(-1, len(ids) - 1))
        start = len(self.ctx)
        self.ctx += list(ids)
        keys = torch.tensor([self.key(self.ctx[max(i - 1, 0)], self.ctx[i]) for i in range(start, len(self.ctx))])
        out = Forward(self.feats[keys], self.table[keys])
        return out if rows is None else Forward(out.hidden[rows], out.logits[rows])


def test_two_first_tokens_follow_the_target():
    """Chi-square on the first two emitted tokens (36 cells) over many sampled runs, table-driven models."""
    V, prompt, n = 6, [5, 1, 3], 2500
    pair = Pair(TableLM(V, 16, seed=1), TableLM(V, 16, seed=2, scale=1.5), None, {})
    s = SamplingConfig(temperature=1.0)
    cfg = SpecDecPPConfig(0.6, 1, 4)
    run = RunConfig(method="specdecpp", max_new_tokens=6, sampling=s, specdecpp=cfg)
    rng = make_rng(7)
    d = SpecDecPPDrafter(pair.draft, s, rng, AcceptanceHead(16, 2, rng=make_rng(3)), cfg)
    counts, lengths = torch.zeros(V, V), set()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                                         # thousands of tiny ops: threads only cost
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
    assert len(lengths) >= 3                                         # the stop rule really varied K
    t = pair.target.table
    expected = torch.softmax(t[pair.target.key(1, 3)], 0)[:, None] * torch.stack(
        [torch.softmax(t[pair.target.key(3, y)], 0) for y in range(V)])
    stat = chisquare(counts.flatten().numpy(), (expected.flatten() * n).numpy())
    assert stat.pvalue > 1e-3, stat


# -- hindsight ---------------------------------------------------------------------------------

def chain_round(statuses, k):
    tree = DraftTree(tuple(range(k + 1)), tuple(range(-1, k)), (1.0,) * (k + 1))
    return RoundTrace(index=0, context_len=5, tree=tree, status=("root", *statuses), p=(None,) * (k + 1),
                      accepted_path=(), emitted=(), correction="resample", draft_ms=0.0, verify_ms=1.0)


def test_hindsight_k(tiny_pair):
    costs = StepCosts(draft_ms=1.0, verify_ms=(10.0, 10.5, 11.0, 11.5, 12.0, 12.5))
    assert tokens_if(3, None) == 4 and tokens_if(3, 2) == 2 and tokens_if(1, 2) == 2
    assert costs.verify(8) == 13.5 and costs.round_ms(2) == 13.0
    acc, rej, unv = "accepted", "rejected", "unvisited"
    assert hindsight_k(chain_round([rej, unv, unv], 3), costs) == 0          # drafting did not pay
    assert hindsight_k(chain_round([acc, rej, unv], 3), costs) == 1          # (1 + 10.5) / 2 beats 10 / 1
    assert hindsight_k(chain_round([acc, acc, acc], 3), costs) == 3          # all accepted: the longest
    assert first_rejection(chain_round([acc, acc, rej], 3)) == 3
    tr = with_hindsight(generate(tiny_pair("random"), PROMPT, RunConfig(method="chain", max_new_tokens=12)))
    assert all(r.hindsight_k is not None and 0 <= r.hindsight_k <= r.n_drafted for r in tr.rounds)


# -- training ----------------------------------------------------------------------------------

def test_metrics():
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert weighted_auc(torch.tensor([0.9, 0.1, 0.8, 0.2]), y) == 1.0
    assert weighted_auc(torch.tensor([0.5, 0.5, 0.5, 0.5]), y) == 0.5
    assert weighted_auc(torch.tensor([0.1, 0.9, 0.2, 0.8]), y) == 0.0
    logits = torch.tensor([[0.0, 5.0], [5.0, 0.0]])
    assert soft_bce(logits, torch.tensor([1.0, 0.0]), 6.0) < 0.01


def test_training_lowers_the_loss(tiny_pair):
    pair = tiny_pair("near")
    cfg = HeadTrainConfig(prompts=8, new_tokens=12, gen_batch=4, epochs=6, batch=16, lr=3e-3, num_layers=2)
    prompts = [[5 + i, 9, 17 + i, 3] for i in range(cfg.prompts)]
    data = build_head_data(pair.target, pair.draft, prompts, cfg, pair.eos_ids)
    assert data.features.shape[1] == 32 and len(data.label) > 50
    assert torch.all((data.label >= 0) & (data.label <= 1)) and set(data.greedy.tolist()) <= {0.0, 1.0}
    train, held = split_by_prompt(data, cfg.prompts, 0.25, make_rng(1))
    assert not set(train.prompt.tolist()) & set(held.prompt.tolist())
    before = evaluate(AcceptanceHead(32, 2, rng=make_rng(0), q_feature=cfg.q_feature), train, cfg.reject_weight)["loss"]
    head, history = train_head(train, train, cfg, make_rng(0), show_progress=False)
    after = evaluate(head, train, cfg.reject_weight)["loss"]
    assert len(history) == cfg.epochs and after < before
    # early stopping: the head returned is the epoch with the least validation loss
    head, history = train_head(train, held, cfg, make_rng(0), show_progress=False)
    assert evaluate(head, held, cfg.reject_weight)["loss"] == pytest.approx(min(h["loss"] for h in history), rel=1e-5)


def test_choose_threshold_prefers_the_head_when_it_knows():
    """Replay on synthetic calibration rounds: easy rounds (all 8 accepted, head confident) and hard ones
    (first candidate rejected, head says so at step 2). SpecDec++ beats every fixed K; the oracle beats both."""
    from specviz.sweep import choose_threshold
    acc, rej, unv = "accepted", "rejected", "unvisited"
    easy = replace(chain_round([acc] * 8, 8), accept_probs=(1.0,) + (0.97,) * 7)
    hard = replace(chain_round([rej] + [unv] * 7, 8), accept_probs=(1.0,) + (0.1,) * 7)
    costs = StepCosts(draft_ms=1.0, verify_ms=tuple(10.0 + 0.5 * m for m in range(9)))
    out = choose_threshold([easy, hard] * 5, costs, set(), [0.3, 0.5, 0.7], [4, 8], k_min=1)
    assert out["modelled_gain"] > 0 and out["k_max"] == 8
    best_spec = min(out["specdecpp_ms_per_token"].values())
    assert out["oracle_ms_per_token"] <= best_spec < out["fixed_ms_per_token"][out["best_k"]]
