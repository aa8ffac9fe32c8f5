"""Hugging Face assisted generation seen as specviz traces, through the library's public hooks only: the rounds
join to generate()'s own output, greedy candidates are judged by the target's argmax, and the trace loads."""

from __future__ import annotations

import pytest
import torch
from tiny import tiny_llama_cpu

from specviz.analysis.promptset import disagreements as ps_disagreements
from specviz.analysis.promptset import pooled
from specviz.analysis.runset import PromptRun, RunSet
from specviz.app import files
from specviz.core.trace import ACCEPTED, REJECTED, GenerationTrace
from specviz.engine.hf_assisted import SOURCE, AssistedRecorder
from specviz.viz.inspect import node_panel


def pair():
    target = tiny_llama_cpu(seed=0)
    draft = tiny_llama_cpu(seed=0)
    with torch.no_grad():  # a perturbed copy, so that some candidates are accepted and some are not
        g = torch.Generator().manual_seed(1)
        for p in draft.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    for m in (target, draft):
        m.generation_config.eos_token_id = None
    draft.generation_config.num_assistant_tokens = 4
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    return target, draft


@pytest.mark.parametrize("sample", [False, True])
def test_rounds_join_to_generate_output(sample):
    target, draft = pair()
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    rec = AssistedRecorder(draft)
    torch.manual_seed(3)
    out = target.generate(ids, max_new_tokens=24, **rec.hooks(do_sample=sample, temperature=1.0, top_k=0))
    trace = rec.trace(ids[0].tolist())
    assert list(trace.output_ids) == out[0, ids.shape[1] :].tolist()
    assert len(trace.rounds) >= 3
    drafted = [r for r in trace.rounds if r.n_drafted]
    assert drafted and any(r.n_accepted for r in drafted) and any(REJECTED in r.status for r in drafted)
    for r in drafted:
        assert all(0 < x <= 1 for x in r.tree.q[1:])
        assert r.q_top[1] and r.p_top[1] and r.p_entropy[1] is not None
        if not sample:  # greedy: accepted candidates are the target's argmax, and so is the extra token
            for c in range(1, len(r.tree)):
                if r.status[c] in (ACCEPTED, REJECTED):
                    assert (r.p_top[c][0][0] == r.tree.tokens[c]) == (r.status[c] == ACCEPTED)
        elif REJECTED in r.status:
            assert r.residual_top is not None
    again = GenerationTrace.from_json(trace.to_json())  # the trace file validates against the schema
    assert again.output_ids == trace.output_ids


def test_the_users_streamer_and_processors_still_run():
    target, draft = pair()
    ids = torch.tensor([[1, 4, 8]])
    seen = []

    class Collect:
        def put(self, value):
            seen.append(value.reshape(-1).tolist())

        def end(self):
            seen.append("end")

    rec = AssistedRecorder(draft)
    out = target.generate(ids, max_new_tokens=10, **rec.hooks(streamer=Collect()))
    assert seen[0] == ids[0].tolist() and seen[-1] == "end"
    assert [t for chunk in seen[1:-1] for t in chunk] == out[0, 3:].tolist()


def test_batches_are_refused():
    target, draft = pair()
    rec = AssistedRecorder(draft)
    with pytest.raises(ValueError, match="batch"):
        target.generate(torch.tensor([[1, 4, 8], [1, 5, 9]]), max_new_tokens=4, **rec.hooks())


def test_a_recorded_hf_run_opens_in_the_dashboard():
    """The trace replays like any other: the session loads it, every node's inspector panel renders, the report's
    numbers read it."""
    target, draft = pair()
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    rec = AssistedRecorder(draft)
    torch.manual_seed(0)
    target.generate(ids, max_new_tokens=16, **rec.hooks(do_sample=True, temperature=1.0, top_k=0))
    trace = rec.trace(ids[0].tolist())
    loaded, base = files.load(trace.to_json())
    assert base is None and loaded.output_ids == trace.output_ids and loaded.models["source"] == SOURCE
    for r in loaded.rounds:
        for node in range(1, len(r.tree)):
            assert "node" in node_panel(loaded, r.index, node)
    rs = RunSet("hf", (PromptRun("1", "qa", loaded),))
    assert pooled(rs)["tokens"] == 16 and ps_disagreements(rs) is not None
