"""The page's work on the loaded pair besides decoding: training its SpecDec++ head (then SpecDec++ runs with no
reload; Stop ends it and writes nothing; a public page refuses) and measuring its hardware curves here."""

import threading

import pytest

from specviz.app import held, pairjobs, pairwork, policy, runs
from specviz.core.config import ModelConfig, RunConfig
from specviz.core.curves import load_curves, local_record
from specviz.core.pairs import DEFAULT_PAIR
from specviz.models.loading import load_pair
from specviz.tools.families import save_pair
from specviz.train.config import HeadTrainConfig
from specviz.train.head import Stopped, head_prompts
from specviz.viz.budget import budget_note

TINY = HeadTrainConfig(prompts=12, new_tokens=12, gen_batch=4, epochs=2)


@pytest.fixture
def own_pair(tmp_path, monkeypatch):
    """A tiny local pair with no head, as typed into the page; the quick preset made tinier."""
    monkeypatch.setattr(pairjobs, "QUICK", TINY)
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    target, draft = save_pair("llama", tmp_path)
    return policy.model_config(DEFAULT_PAIR, "fp32", str(target), str(draft)), draft  # no EAGLE with it


def test_a_head_trained_from_the_page_serves_specdecpp_with_no_reload(own_pair):
    cfg, draft = own_pair
    with pytest.raises(ValueError, match="needs an acceptance head"):
        runs.run_to_end("Hello there", RunConfig(method="specdecpp", max_new_tokens=4), cfg)
    assert pairjobs.head_card_of(cfg) == {}
    pair = held.loaded(cfg)
    assert pair.eagle is None
    note = pairwork.estimate(DEFAULT_PAIR, "fp32", cfg.target, cfg.draft, "", "")
    assert "none for this pair yet" in note and "Estimated here: about" in note  # timed on the loaded pair
    seen = []
    card = pairjobs.train_head(cfg, lambda f, what: seen.append((f, what)), threading.Event())
    assert seen[-1][0] == 1.0 and any("answers" in w for _, w in seen) and any("epoch" in w for _, w in seen)
    assert (draft / "acceptance_head.safetensors").exists() and card["rows"] > 0 and card["total_s"] > 0
    assert held.loaded(cfg) is pair  # no reload
    trace = runs.run_to_end("Hello there", RunConfig(method="specdecpp", max_new_tokens=4), cfg)
    assert len(trace.output_ids) == 4 and trace.models["acceptance_head"]["heldout_auc"] == card["heldout"]["auc"]
    note = pairwork.head_note(pairjobs.head_card_of(cfg))
    assert "held-out AUC" in note and "draft tokens seen" in note


def test_stop_ends_training_and_writes_nothing(own_pair):
    cfg, draft = own_pair
    stop = threading.Event()

    def progress(done, what):
        if done > 0:
            stop.set()  # Stop pressed once the answers began

    with pytest.raises(Stopped):
        pairjobs.train_head(cfg, progress, stop)
    assert not (draft / "acceptance_head.safetensors").exists()


def test_the_shipped_drafters_heads_are_not_overwritten(monkeypatch, tiny_pair):
    shipped = tiny_pair("random")
    shipped.info["draft"] = "specviz default draft"  # as the default pair names its draft
    monkeypatch.setattr(held, "loaded", lambda cfg: shipped)
    with pytest.raises(ValueError, match="for your own pair"):
        pairjobs.train_head(policy.model_config(DEFAULT_PAIR, "fp32"), lambda f, w: None, threading.Event())


def test_a_public_page_neither_trains_nor_measures(own_pair, monkeypatch):
    cfg, _ = own_pair
    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")
    with pytest.raises(ValueError, match="never trains"):
        pairjobs.train_head(cfg, lambda f, w: None, threading.Event())
    with pytest.raises(ValueError, match="shares its machine"):
        pairjobs.measure_hardware(cfg, lambda f, w: None)
    assert pairwork.head_note({}) == pairwork.PUBLIC_NOTE


def test_measuring_the_loaded_pair_keeps_this_machines_record(own_pair, monkeypatch):
    cfg, _ = own_pair
    monkeypatch.setattr(pairjobs, "HARDWARE_PROMPTS", 2)
    record = pairjobs.measure_hardware(cfg, lambda f, w: None)
    pair = held.loaded(cfg)
    assert local_record(pair.info)["target"] == record["target"]
    assert set(record["picks"]) == {"T=0", "T=1"}
    assert pairwork.estimate_s(10.0) > 0


def test_the_hardware_tab_draws_this_machines_measurement(own_pair, monkeypatch):
    cfg, _ = own_pair
    monkeypatch.setattr(pairjobs, "HARDWARE_PROMPTS", 2)
    fig, note = pairwork.measure_hardware(
        DEFAULT_PAIR, "fp32", cfg.target, cfg.draft, "", "", progress=lambda *a, **k: None
    )
    assert note.startswith("Measured on this machine") and "best tree budgets" in note
    assert any(t.name == "target forward" for t in fig.data)
    shipped = budget_note(load_curves().get("bf16"), here=False)
    assert "the shipped curve of the default pair" in shipped and "*Measure*" in shipped


def test_the_quick_preset_leaves_out_prompts_too_long_for_the_targets_context(tmp_path):
    """A target whose context is shorter than some Spec-Bench prompts (a tiny 512-position model; a small-vocabulary
    tokenizer meets the same): those prompts are left out and counted, the rest train."""
    target, draft = save_pair("llama", tmp_path)
    pair = load_pair(ModelConfig(target=str(target), draft=str(draft), dtype="fp32"), progress=lambda m: None)
    cfg = HeadTrainConfig(prompts=48, new_tokens=64)
    prompts, left_out = head_prompts(pair, cfg, "spec-bench")
    context = pair.target.model.config.max_position_embeddings
    assert left_out > 0 and len(prompts) + left_out == 48
    assert all(len(p) + cfg.new_tokens <= context for p in prompts)
