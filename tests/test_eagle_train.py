"""The EAGLE drafter's trainer on tiny models: loss falls and resumes, bf16 follows fp32, the copy input and taps
train, the recipe reaches the data and the card, and a run cut short resumes to the same bits."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers import distill_data
from tiny import tiny_llama

from specviz.core.assets import DEFAULT_DRAFT
from specviz.models.eagle import add_copy_input, add_feature_taps, build_eagle
from specviz.train import eagle as eagle_train
from specviz.train.config import DraftTrainConfig, EagleTrainConfig
from specviz.train.draft import head_ids
from specviz.train.eagle import parse
from specviz.train.eagle_eval import _counts, _g, _previous, command
from specviz.train.eagle_features import target_features
from specviz.train.loop import adamw, resume

SHIPPED = Path(DEFAULT_DRAFT)


@pytest.mark.parametrize("ctx", [False, True], ids=["head-ids", "context-vocab"])
def test_eagle_training_lowers_loss_and_resumes(tmp_path, ctx):
    """The EAGLE trainer runs the shared loop (train/loop.py): loss falls, a finished checkpoint resumes to the
    same weights and history; with the context vocabulary too (loss and validation over each row's context)."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m)
    feats = target_features(m, data, tmp_path / "f.safetensors")
    ids_v = head_ids(data.responses(), 32, {2})
    cfg = EagleTrainConfig(steps=24, batch_tokens=100, checkpoint_every=12, lr=3e-3, warmup=3, context_vocab=ctx)
    model = build_eagle(m)
    hist = eagle_train.train(model, data, feats, data, feats, ids_v, cfg, tmp_path / "e.ckpt")
    assert [h["step"] for h in hist] == [0, 12, 24] and hist[-1]["loss"] < hist[1]["loss"]
    again = build_eagle(m)
    assert eagle_train.train(again, data, feats, data, feats, ids_v, cfg, tmp_path / "e.ckpt") == hist
    for (n, p), (_, q) in zip(model.named_parameters(), again.named_parameters()):
        assert torch.equal(p, q), n


def test_bf16_training_follows_fp32_and_keeps_fp32_weights(tmp_path):
    """`bf16`: the forward and backward run under bf16 autocast (the matmuls take the CPU's bf16 path), the
    weights and Adam's moments stay fp32, and the losses track an fp32 run of the same schedule."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m)
    feats = target_features(m, data, tmp_path / "f.safetensors")
    ids_v = head_ids(data.responses(), 32, {2})
    runs = {}
    for bf16 in (False, True):
        cfg = EagleTrainConfig(steps=24, batch_tokens=100, checkpoint_every=12, lr=3e-3, warmup=3, bf16=bf16)
        model = build_eagle(m)
        runs[bf16] = eagle_train.train(model, data, feats, data, feats, ids_v, cfg, tmp_path / f"{bf16}.ckpt")
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert runs[True][-1]["loss"] < runs[True][1]["loss"]
    for a, b in zip(runs[False][1:], runs[True][1:]):
        assert b["loss"] == pytest.approx(a["loss"], rel=0.05)


def test_eagle_training_with_the_copy_input(tmp_path):
    """--copy-input widens a drafter with a zero block (step 0 = the drafter it continues); training then moves
    the block and the gains, and the card says which stage added the input."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m)
    feats = target_features(m, data, tmp_path / "f.safetensors")
    ids_v = head_ids(data.responses(), 32, {2})
    cfg = EagleTrainConfig(steps=12, batch_tokens=100, checkpoint_every=12, lr=3e-3, warmup=3)
    plain, model = build_eagle(m), build_eagle(m)
    add_copy_input(model, 3, 30.0)
    h0 = eagle_train.train(plain, data, feats, data, feats, ids_v, replace(cfg, steps=1), tmp_path / "p.ckpt")
    hist = eagle_train.train(model, data, feats, data, feats, ids_v, cfg, tmp_path / "c.ckpt")
    assert hist[0] == h0[0]  # the zero block changes nothing at first
    assert model.eagle_fc.weight[:, 64:].abs().sum() > 0 and not torch.equal(
        model.eagle_copy_gain, torch.full((4,), 30.0)
    )
    _, cfg = parse(["--copy-input", "--copy-gain", "10"])
    assert cfg.copy_input and cfg.copy_gain == 10
    with pytest.raises(ValueError, match="copy gain"):
        EagleTrainConfig(copy_gain=0)
    stage = {
        "config": {"steps": 5, "lr": 1e-3, "feat_weight": 0.1, "copy_input": True, "copy_gain": 30.0},
        "train_min": 1.0,
        "history": [{"heldout_agreement": 0.5, "heldout_agreement_own_features": 0.4}],
    }
    assert "adds the prompt-lookup input" in _previous(stage)
    assert "a_n e(y_t)" in _g(EagleTrainConfig(), {"previous": stage}) and "a_n" not in _g(EagleTrainConfig(), {})


def test_eagle_training_with_taps(tmp_path):
    """--taps: the features carry the tapped layers, zero blocks start the drafter where it was, training moves
    them, and the flags reach the config, the command and the card's g_t."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m)
    feats = target_features(m, data, tmp_path / "f.safetensors", taps=(1,))
    assert feats.shape[1] == 64
    ids_v = head_ids(data.responses(), 32, {2})
    cfg = EagleTrainConfig(steps=12, batch_tokens=100, checkpoint_every=12, lr=3e-3, warmup=3)
    plain, model = build_eagle(m), build_eagle(m)
    add_feature_taps(model, (1,))
    h0 = eagle_train.train(plain, data, feats, data, feats, ids_v, replace(cfg, steps=1), tmp_path / "p.ckpt")
    hist = eagle_train.train(model, data, feats, data, feats, ids_v, cfg, tmp_path / "t.ckpt")
    assert hist[0] == h0[0] and model.eagle_fc.weight[:, 64:].abs().sum() > 0
    _, cfg = parse(["--taps", "8", "16"])
    assert cfg.taps == (8, 16) and "--taps 8 16" in command(cfg, {}) and "u^16_(t-1)" in _g(cfg, {})
    assert EagleTrainConfig(taps=[3, 5]).taps == (3, 5)  # as a card's JSON holds them
    for bad in ((2, 1), (0,), (4, 4)):
        with pytest.raises(ValueError, match="taps"):
            EagleTrainConfig(taps=bad)


def test_eagle_recipe_counts_reach_the_data_and_the_card():
    """--greedy-prompts / --sampled-prompts are checked, and a stage that used other counts says so on the card."""
    _, cfg = parse(["--greedy-prompts", "256", "--sampled-prompts", "0"])
    assert (cfg.greedy_prompts, cfg.sampled_prompts) == (256, 0)
    base = DraftTrainConfig()
    assert (EagleTrainConfig().greedy_prompts, EagleTrainConfig().sampled_prompts) == (
        base.greedy_prompts,
        base.sampled_prompts,
    )
    for bad in ({"greedy_prompts": 0}, {"sampled_prompts": -1}):
        with pytest.raises(ValueError, match="prompts"):
            EagleTrainConfig(**bad)
    assert (
        _counts({}) == ""
        and _counts({"greedy_prompts": 256, "sampled_prompts": 0}) == ", 256 greedy / 0 sampled composed prompts"
    )
    stage = {
        "config": {"steps": 5, "lr": 1e-3, "feat_weight": 0.1, "greedy_prompts": 256, "sampled_prompts": 0},
        "train_min": 1.0,
        "history": [{"heldout_agreement": 0.5, "heldout_agreement_own_features": 0.4}],
    }
    assert "256 greedy / 0 sampled composed prompts" in _previous(stage)

    later = EagleTrainConfig(**{**cfg.__dict__, "copy_input": True, "steps": 250})
    assert command(later, {"previous": stage}) == (
        "python -m specviz.train eagle --warm-start models/smollm2-eagle "
        "--steps 250 --greedy-prompts 256 --sampled-prompts 0 --copy-input"
    )
    assert parse(command(later, {"previous": stage}).split()[4:])[1] == later  # the card's command parses back


@pytest.mark.parametrize(
    ("minutes", "bf16"),
    [(1e-9, False), (60.0, False), (60.0, True)],
    ids=["timed-checkpoints", "step-checkpoints", "bf16-autocast"],
)
def test_an_eagle_run_cut_short_resumes_to_the_same_bits(tmp_path, monkeypatch, minutes, bf16):
    """A run stopped mid-way (after a checkpoint by wall time, or by step count) and started again ends with the
    same weights, Adam moments and history as one that never stopped: the noise generator, the smoothed loss and
    the step travel in the checkpoint, the data order is the seed's. Under bf16 autocast too."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m)
    feats = target_features(m, data, tmp_path / "f.safetensors")
    ids_v = head_ids(data.responses(), 32, {2})
    cfg = EagleTrainConfig(
        steps=20, batch_tokens=100, checkpoint_every=8, checkpoint_minutes=minutes, lr=3e-3, warmup=3, bf16=bf16
    )
    whole = build_eagle(m)
    hist = eagle_train.train(whole, data, feats, data, feats, ids_v, cfg, tmp_path / "whole.ckpt")

    real_step, calls = eagle_train.step_loss, {"n": 0}

    def dies_at_step_13(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 14:
            raise KeyboardInterrupt  # the machine goes away mid-run
        return real_step(*args, **kwargs)

    monkeypatch.setattr(eagle_train, "step_loss", dies_at_step_13)
    cut = build_eagle(m)
    with pytest.raises(KeyboardInterrupt):
        eagle_train.train(cut, data, feats, data, feats, ids_v, cfg, tmp_path / "cut.ckpt")
    monkeypatch.setattr(eagle_train, "step_loss", real_step)
    params = {n: p for n, p in build_eagle(m).named_parameters() if p.requires_grad}
    assert resume(tmp_path / "cut.ckpt", params, adamw(params, cfg)).step == (13 if minutes < 1 else 8)
    torch.manual_seed(12345)  # a fresh process: torch's global generator elsewhere; the checkpoint restores it
    again = build_eagle(m)
    hist2 = eagle_train.train(again, data, feats, data, feats, ids_v, cfg, tmp_path / "cut.ckpt")
    no_time = lambda h: [{k: v for k, v in x.items() if k != "seconds"} for x in h]  # noqa: E731
    assert no_time(hist2) == no_time(hist)
    for (n, p), (_, q) in zip(whole.named_parameters(), again.named_parameters()):
        assert torch.equal(p, q), n


def test_the_held_out_split_keeps_each_sequences_features_and_holds_out_greedy_ones():
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m, n=20)
    feats = torch.arange(len(data.tokens), dtype=torch.float32)[:, None]  # a row's feature: its index
    cfg = EagleTrainConfig(heldout_fraction=0.25)
    (train_d, train_f), (held, held_f) = eagle_train.held_out_split(data, feats, cfg)
    assert len(train_d) + len(held) == len(data) and len(held) >= 1 and all(held.greedy)
    for sub, f in ((train_d, train_f), (held, held_f)):
        assert len(f) == len(sub.tokens)
        assert torch.equal(data.tokens[f[:, 0].long()], sub.tokens)  # each row's features came along with it
    assert eagle_train.run_key(cfg, None) != eagle_train.run_key(replace(cfg, seed=1), None)
