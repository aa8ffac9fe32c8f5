"""An EAGLE drafter's folder: what `save_eagle` writes and `load_eagle` reads back, deeper drafters, and the errors a
wrong folder gets."""

import json

import pytest
import torch
from helpers import COPY, eagle_for
from safetensors.torch import load_file, save_file
from tiny import tiny_llama

from specviz.core.config import RunConfig
from specviz.engine.record import generate
from specviz.models.eagle import EagleLM, build_eagle
from specviz.models.lm import LM
from specviz.models.loading import load_eagle
from specviz.models.pair import Pair
from specviz.train.eagle import save_eagle

PROMPT = [5, 9, 3, 17, 4]


@COPY
def test_save_and_load_round_trip(tmp_path, copy):
    target = tiny_llama(vocab=64, seed=0)
    e = eagle_for(target, 5, copy=copy)
    e.model.eagle_feature_scale = 0.5  # folded into fc on save
    save_eagle(e.model, torch.arange(10, 40), tmp_path)
    loaded = load_eagle(tmp_path, target)
    assert loaded.head_ids.tolist() == list(range(10, 40))
    feats = torch.randn(4, 32)
    for lm, scale in ((e, 0.5), (loaded, 1.0)):
        lm.reset()
        lm.add_target_features(0, feats * scale)
    a = e.forward(PROMPT).logits[:, 10:40]
    b = loaded.forward(PROMPT).logits[:, 10:40]
    assert loaded.max_ngram == (3 if copy else 0)
    assert torch.allclose(a, b, atol=0.05 * a.abs().max())  # bf16 storage
    assert not (tmp_path / "model.safetensors").exists()
    assert (tmp_path / "eagle.safetensors").stat().st_size < 200_000  # embeddings not stored


def test_a_deeper_drafter_starts_as_the_one_layer_drafter_and_round_trips(tmp_path):
    """layers=2: the second layer starts as an identity (its output projections zeroed), so the drafter's logits
    are the one-layer drafter's; saved and loaded it keeps both layers, and the engine stays lossless with it."""
    target = tiny_llama(vocab=64, seed=0)
    one, two = build_eagle(target, init_layer=0), build_eagle(target, init_layer=0, layers=2)
    assert len(two.model.layers) == 2
    feats = torch.randn(len(PROMPT), 32)
    out = []
    for m in (one, two):
        lm = EagleLM(m)
        lm.add_target_features(0, feats)
        out.append(lm.forward(PROMPT).logits)
    assert torch.allclose(out[0], out[1], atol=1e-5)
    with torch.no_grad():  # now make the second layer do something
        two.model.layers[1].mlp.down_proj.weight.normal_(0, 0.2)
    save_eagle(two, torch.arange(64), tmp_path)
    loaded = load_eagle(tmp_path, target)
    assert len(loaded.model.model.layers) == 2
    pair = Pair(LM(target, name="target"), LM(tiny_llama(vocab=64, seed=7), name="draft"), None, {}, loaded)
    ar = generate(pair, PROMPT, RunConfig(method="ar", max_new_tokens=16)).output_ids
    got = generate(pair, PROMPT, RunConfig(method="dyspec", max_new_tokens=16, drafter="eagle"))
    assert got.output_ids == ar
    with pytest.raises(ValueError, match="1 to 8"):
        build_eagle(target, layers=9)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 9}))
    with pytest.raises(ValueError, match="1 to 8 decoder layers, got 9"):
        load_eagle(tmp_path, target)


def test_load_errors(tmp_path):
    target = tiny_llama(vocab=64, seed=0)
    with pytest.raises(FileNotFoundError, match="eagle.safetensors"):
        load_eagle(tmp_path, target)
    save_eagle(build_eagle(target), torch.arange(5), tmp_path)
    with pytest.raises(ValueError, match="hidden"):
        load_eagle(tmp_path, tiny_llama(vocab=64, hidden=48, seed=0))

    state = load_file(str(tmp_path / "eagle.safetensors"))
    save_file({**state, "eagle_copy_gain": torch.ones(4)}, str(tmp_path / "eagle.safetensors"))
    with pytest.raises(ValueError, match="does not match"):  # gains without the widened fc
        load_eagle(tmp_path, target)
    save_file({**state, "eagle_copy_gain": torch.ones(2, 2)}, str(tmp_path / "eagle.safetensors"))
    with pytest.raises(ValueError, match="vector"):
        load_eagle(tmp_path, target)
