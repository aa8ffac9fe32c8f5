"""A target placed by accelerate's device map is verified exactly: the same hooks that move a 70B-class target's
layers between GPUs load offloaded weights here, on a CPU, with part of the target's layers on disk.

- Greedy: chain, SpecDec++, DySpec and Sequoia on the offloaded target equal autoregressive decoding of the same
  target undispatched, in fp32 and bf16.
- Sampled: the p a trace records at each node is the unmodified, undispatched model's own softmax, and the first
  sampled token follows it (chi-square).
- The fast paths step aside for a dispatched model and the trace says so; bad maps get a sentence.
"""

import copy
import json
from dataclasses import replace

import pytest
import torch
from helpers import FAMILY_PROMPT as PROMPT
from helpers import FAMILY_SHORT as SHORT
from helpers import FAMILY_V as V
from helpers import chi_square_p, hf_distribution, near_draft, run_config
from lossless import autoregressive, greedy_equal
from transformers import AutoModelForCausalLM

from specviz.core.config import ModelConfig, RunConfig, SamplingConfig, max_memory
from specviz.engine.record import generate
from specviz.methods.specdecpp.head import AcceptanceHead, save_head
from specviz.models.lm import LM
from specviz.models.loading import load_pair
from specviz.models.pair import Pair
from specviz.models.placement import placement
from specviz.tools.families import save_pair
from specviz.tools.zoo import tiny_model

FAMILIES = ("llama", "qwen2", "gemma3")  # the direct Llama loop, Hugging Face's forward, sliding windows


def offloaded(model, folder) -> torch.nn.Module:
    """`model` saved and loaded again by accelerate with half its bytes allowed in memory: the rest goes to disk."""
    model.save_pretrained(folder / "target")
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    cfg = ModelConfig(target=str(folder / "target"), device_map="auto", max_memory=f"cpu={size // 2}")
    placed = placement(cfg, "tiny") | {"offload_folder": str(folder / "offload")}
    out = AutoModelForCausalLM.from_pretrained(folder / "target", dtype=model.dtype, **placed)
    out.generation_config.eos_token_id = None
    assert "disk" in out.hf_device_map.values(), out.hf_device_map
    return out


def pairs(name, folder, dtype=torch.float32, **sizes):
    """(the plain pair, the same pair with its target offloaded): one target, one perturbed draft, a random head."""
    target = tiny_model(name, layers=2, seed=1, **sizes).to(dtype)
    target.generation_config.eos_token_id = None
    draft = near_draft(target, seed=2)
    save_head(AcceptanceHead(draft.config.hidden_size, 1, rng=torch.Generator().manual_seed(0)), folder, {})
    info = {"target": "tiny", "draft": str(folder)}
    plain = Pair(LM(copy.deepcopy(target), name="target"), LM(draft, name="draft", half_rows=True), None, info)
    spread = Pair(LM(offloaded(target, folder), name="target"), plain.draft, None, info)
    return plain, spread


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", FAMILIES)
def test_an_offloaded_target_is_greedy_equal_to_the_undispatched_one(name, dtype, tmp_path):
    plain, spread = pairs(name, tmp_path, dtype)
    assert spread.target.dispatched and not spread.target.direct  # the hooks run: no module call is bypassed
    assert autoregressive(spread, PROMPT, 24) == autoregressive(plain, PROMPT, 24)
    drafted = accepted = 0
    for method in ("chain", "specdecpp", "dyspec", "sequoia"):
        tr = greedy_equal(spread, PROMPT, run_config(method, n=24), baseline=plain)
        drafted += sum(r.n_drafted for r in tr.rounds)
        accepted += sum(r.n_accepted for r in tr.rounds)
    assert 0 < accepted < drafted  # both verdicts ran


def test_an_offloaded_target_records_the_models_own_distribution(tmp_path):
    plain, spread = pairs("qwen2", tmp_path)
    s = SamplingConfig(temperature=0.8, top_k=64, top_p=0.95, seed=3)
    tr = generate(spread, PROMPT, run_config("dyspec", n=12, sampling=s))
    committed, checked = list(PROMPT), 0
    with torch.inference_mode():
        for r in tr.rounds:
            for node in range(1, len(r.tree)):
                if r.status[node] == "unvisited":
                    continue
                path, j = [], r.tree.parents[node]
                while j > 0:
                    path.append(r.tree.tokens[j])
                    j = r.tree.parents[j]
                p = hf_distribution(plain.target.model, committed + path[::-1], s)  # the undispatched model's own
                assert abs(r.p[node] - float(p[r.tree.tokens[node]])) < 1e-5, (r.index, node)
                checked += 1
            committed += list(r.emitted)
    assert checked >= 4


def test_an_offloaded_targets_samples_follow_its_distribution(tmp_path, one_thread):
    plain, spread = pairs("llama", tmp_path, vocab_size=V, hidden=32)
    with torch.no_grad():
        spread.draft.model.get_output_embeddings().weight.mul_(8.0)  # a draft often wrong: both verdicts
    with torch.inference_mode():
        p = torch.softmax(plain.target.model(torch.tensor([SHORT])).logits[0, -1].float(), -1)
    counts = torch.zeros(V)
    for seed in range(300):
        run = run_config("dyspec", n=1, sampling=SamplingConfig(temperature=1.0, seed=seed))
        counts[generate(spread, SHORT, run).output_ids[0]] += 1
    assert chi_square_p(counts, p) > 1e-3


def test_a_device_map_file_and_bad_maps(tmp_path):
    good = tmp_path / "map.json"
    good.write_text(json.dumps({"model.embed_tokens": "cpu", "model.layers": "disk", "lm_head": 0}))
    placed = placement(ModelConfig(device_map=str(good), max_memory="0=20GiB,cpu=64GB"), "a/b")
    assert placed["device_map"]["model.layers"] == "disk" and placed["max_memory"] == {0: "20GiB", "cpu": "64GB"}
    assert placed["offload_folder"].endswith("a-b")
    bad = tmp_path / "bad.json"
    for text in ("[1, 2]", '{"model": "tpu"}', "{not json"):
        bad.write_text(text)
        with pytest.raises(ValueError, match="device map"):
            placement(ModelConfig(device_map=str(bad)), "x")
    with pytest.raises(ValueError, match="device map must be one of"):
        ModelConfig(device_map="everywhere")
    with pytest.raises(ValueError, match="needs a device map"):
        ModelConfig(max_memory="cpu=1GB")
    with pytest.raises(ValueError, match="DEVICE=SIZE"):
        ModelConfig(device_map="auto", max_memory="cpu=lots")
    assert max_memory("cpu=1000B, 1=1.5gib") == {"cpu": 1000, 1: "1.5GiB"}


def test_the_loader_places_the_target_and_the_trace_says_how(tmp_path):
    """Through `load_pair`, as `specviz generate --device-map ... --max-memory ...` loads it."""
    target, draft = save_pair("llama", tmp_path)
    cfg = ModelConfig(target=str(target), draft=str(draft), eagle="none", dtype="fp32")
    plain = load_pair(cfg, progress=lambda m: None)
    spread = load_pair(replace(cfg, device_map="auto", max_memory="cpu=40000"), progress=lambda m: None)
    assert spread.info["device_map"].get("disk") and "accelerate" in spread.info["forward"]
    assert spread.info["exactness"] < 1e-4  # the load-time probe ran through the hooks
    for pair in (plain, spread):
        pair.target.model.generation_config.eos_token_id = None
    ids = [5, 9, 17, 3, 33]
    trace = greedy_equal(spread, ids, RunConfig(method="dyspec", max_new_tokens=16), baseline=plain)
    assert trace.models["device_map"] == spread.info["device_map"]
