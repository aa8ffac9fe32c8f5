"""SpecDec++'s acceptance head: its blocks and scalar inputs, saving and loading, the rows the drafter feeds it, and
training it (tiny models)."""

import json

import pytest
import torch
from safetensors.torch import save_file

from specviz.core.config import SamplingConfig, SpecDecPPConfig
from specviz.core.ngram import NgramIndex
from specviz.core.sampling import make_rng
from specviz.methods.specdecpp import inputs as head_inputs
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import (
    AcceptanceHead,
    file_digest,
    head_for_pair,
    load_head,
    save_head,
    weights_digest,
)
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.train.config import HeadTrainConfig
from specviz.train.head import evaluate, soft_bce, split_by_prompt, train_head, weighted_auc
from specviz.train.head_data import build_head_data

PROMPT = [5, 9, 17, 3, 33, 8]


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


def catalog_rows(n, seed=0):
    return torch.rand(n, len(CATALOG), generator=torch.Generator().manual_seed(seed))


def test_scalar_inputs_are_read_by_name_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="inputs"):
        AcceptanceHead(32, inputs=("log_q", "nonsense"))
    head = AcceptanceHead(32, num_layers=2, rng=make_rng(1), inputs=("log_q", "copy_y"))
    x, cols = torch.randn(7, 32), catalog_rows(7)
    with pytest.raises(ValueError, match="columns"):
        head(x)
    p = head.accept_prob(x, cols)
    other = cols.clone()
    other[:, CATALOG.index("entropy")] += 1  # a column it does not read
    assert torch.equal(p, head.accept_prob(x, other))
    other[:, CATALOG.index("copy_y")] += 1  # one it does
    assert not torch.equal(p, head.accept_prob(x, other))
    save_head(head, tmp_path, {"target": "tiny"})
    again, cfg = load_head(tmp_path)
    assert cfg["inputs"] == ["log_q", "copy_y"] and torch.equal(again.accept_prob(x, cols), p)


def test_heads_saved_with_the_old_flags_still_load(tmp_path):
    """Heads saved before the input catalog (q_feature / regime_feature, weights under q_in) load unchanged."""
    import json

    from safetensors.torch import save_file

    head = AcceptanceHead(32, num_layers=1, rng=make_rng(2), inputs=("log_q", "greedy"))
    save_head(head, tmp_path, {"target": "tiny"})
    cfg = json.loads((tmp_path / "acceptance_head.json").read_text())
    del cfg["inputs"]
    (tmp_path / "acceptance_head.json").write_text(json.dumps({**cfg, "q_feature": True, "regime_feature": True}))
    save_file(
        {k.replace("scalar_in.", "q_in."): v.contiguous() for k, v in head.state_dict().items()},
        tmp_path / "acceptance_head.safetensors",
    )
    again, _ = load_head(tmp_path)
    x, cols = torch.randn(5, 32), catalog_rows(5)
    assert again.inputs == ("log_q", "greedy") and torch.equal(again.accept_prob(x, cols), head.accept_prob(x, cols))


def test_distribution_columns_over_the_support_equal_the_full_ones():
    """The drafter computes q's columns over its reduced vocabulary; the training rows over the full one."""
    logits = torch.full((3, 50), float("-inf"))
    support = torch.tensor([2, 7, 11, 30, 41])
    logits[:, support] = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    q, y = torch.softmax(logits, -1), torch.tensor([7, 30, 2])
    torch.testing.assert_close(head_inputs.distribution_columns(q, y, support), head_inputs.distribution_columns(q, y))


def test_copy_columns_of_the_training_rows():
    """copy_n / copy_y of D_i read the context prompt + X_<i, as the drafter reads committed + drafted text."""
    from specviz.train.head_data import _copy_columns

    out = _copy_columns([[1, 2, 3, 1, 2]], torch.tensor([[3, 9, 5]]), torch.tensor([[3, 4, 7]]))
    # i = 0: "1 2" occurred before, followed by 3 = D_0; i = 1: "1 2 3" followed by 1 != 4; i = 2: "9" never did
    assert out[0].tolist() == [[2 / 8, 1.0], [3 / 8, 0.0], [0.0, 0.0]]


def test_the_drafter_feeds_the_head_what_it_was_trained_on(tiny_pair):
    """At T = 0 the factor of step 2 is the head on Y_1's hidden state and Y_1's catalog row: log q(Y_1) from
    the plain softmax, greedy, depth 1, and the copy columns of the prompt."""
    pair = tiny_pair("random")
    head = AcceptanceHead(pair.draft.config.hidden_size, 1, rng=make_rng(0), inputs=CATALOG)
    prop = SpecDecPPDrafter(
        pair.draft, SamplingConfig(), make_rng(0), head, SpecDecPPConfig(0.5, 3, 3), pair.eos_ids
    ).propose(PROMPT, 10)
    pair.draft.reset()
    z = pair.draft.forward(PROMPT).logits[-1]
    y1 = int(z.argmax())
    h1 = pair.draft.forward([y1]).hidden[-1]
    index = NgramIndex(8)
    index.extend(PROMPT)
    row = head_inputs.columns(
        head_inputs.distribution_columns(torch.softmax(z.float(), -1), torch.tensor(y1)),
        torch.tensor(1.0),
        torch.tensor(1),
        torch.tensor(head_inputs.copy_columns(index, [], y1)),
        torch.tensor(0.0),
    )  # a token-level draft holds no target state
    assert prop.info["accept_probs"][1] == pytest.approx(float(head.accept_prob(h1, row)), rel=1e-4)
    sampled = SpecDecPPDrafter(
        pair.draft, SamplingConfig(temperature=1.0), make_rng(0), head, SpecDecPPConfig(0.5, 3, 3), pair.eos_ids
    )
    assert sampled.columns(torch.softmax(z.float(), -1), y1, 1, [])[CATALOG.index("greedy")] == 0.0


def test_missing_head_is_a_clear_error(tiny_pair):
    with pytest.raises(ValueError, match="acceptance head"):
        head_for_pair(tiny_pair("near"))


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
    before = evaluate(AcceptanceHead(32, 2, rng=make_rng(0), inputs=cfg.inputs), train, cfg.reject_weight)["loss"]
    head, history = train_head(train, train, cfg, make_rng(0), show_progress=False)
    after = evaluate(head, train, cfg.reject_weight)["loss"]
    assert len(history) == cfg.epochs and after < before
    # early stopping: the head returned is the epoch with the least validation loss
    head, history = train_head(train, held, cfg, make_rng(0), show_progress=False)
    assert evaluate(head, held, cfg.reject_weight)["loss"] == pytest.approx(min(h["loss"] for h in history), rel=1e-5)


def test_a_card_with_an_undefined_figure_is_strict_json(tmp_path):
    """An AUC over one class is undefined: the card says null, which any JSON reader parses (NaN is not JSON)."""
    head = AcceptanceHead(8, 1, rng=torch.Generator().manual_seed(0))
    save_head(head, tmp_path, {"heldout": {"auc_greedy": float("nan"), "auc": 0.7}, "history": [{"auc": float("nan")}]})
    card = json.loads((tmp_path / "acceptance_head.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert card["heldout"] == {"auc_greedy": None, "auc": 0.7} and card["history"] == [{"auc": None}]
    load_head(tmp_path)


def test_a_folders_weights_digest_follows_its_weights_and_not_its_head(tmp_path):
    """What keys a head's data and card: the drafter's (or a local target's) weights, whatever the file is called."""
    save_file({"w": torch.zeros(3)}, tmp_path / "model.safetensors")
    first = weights_digest(tmp_path)
    assert first == file_digest(tmp_path / "model.safetensors")  # one file: its own digest, as shipped cards hold
    save_head(AcceptanceHead(8, 1, rng=torch.Generator().manual_seed(0)), tmp_path, {})
    assert weights_digest(tmp_path) == first
    save_file({"w": torch.ones(3)}, tmp_path / "model.safetensors")
    assert weights_digest(tmp_path) != first and weights_digest("org/a-hub-id") == ""
