"""The benchmark core on a tiny pair: shape of the records, the report, and a clean greedy audit in fp32."""

import json
from collections import Counter
from dataclasses import replace

import pytest

from specviz.core.assets import SPEC_BENCH
from specviz.core.prompts import read_prompts, stratified
from specviz.tools.bench import report as bench_report
from specviz.tools.bench.prompt import Prompt
from specviz.tools.bench.run import machine_info, run_suite
from specviz.tools.bench.specs import BenchConfig, parse_settings

METHODS = ["ar", "chain:2", "heuristic", "hf", "hf-assist", "hf-assist:2"]


def test_stratified_sample_is_balanced_and_fixed():
    rows = read_prompts(SPEC_BENCH)
    a, b = stratified(rows, 80, seed=0), stratified(rows, 80, seed=0)
    assert [r["question_id"] for r in a] == [r["question_id"] for r in b]
    assert len({r["question_id"] for r in a}) == 80
    tasks = Counter(
        "mt_bench"
        if r["category"] not in {"translation", "summarization", "qa", "math_reasoning", "rag"}
        else r["category"]
        for r in a
    )
    assert len(tasks) == 6 and max(tasks.values()) - min(tasks.values()) <= 1
    mt = Counter(
        r["category"]
        for r in a
        if r["category"] in {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
    )
    assert len(mt) == 8 and max(mt.values()) - min(mt.values()) <= 1


def test_settings_parse_and_always_include_the_reference():
    cfg = BenchConfig()
    keys = [s.key for s in parse_settings(None, cfg, ["ar", "chain", "heuristic", "dyspec"])]
    assert keys[:5] == ["ar", "chain:2", "chain:3", "chain:4", "heuristic"]
    assert "dyspec" in keys and "hf" in keys and "hf-assist" in keys and "hf-assist:8" in keys
    assert [s.key for s in parse_settings(["hf-assist:4"], cfg, ["ar"])] == ["ar", "hf-assist:4"]
    with pytest.raises(ValueError, match="unknown method"):
        parse_settings(["nope"], cfg, ["ar"])


def test_alpha_counts_only_offered_positions():
    # rounds: accepted 2 of 3, 0 of 3, 3 of 3 (chain K=3)
    assert bench_report.alpha([2, 0, 3], [3, 3, 3]) == [2 / 3, 1.0, 0.5]
    assert bench_report.alpha([1], [None]) is None


def test_smoke_suite_fp32(tiny_pair, tmp_path):
    pair = tiny_pair("near")
    pair.info["dtype"] = "fp32"
    cfg = BenchConfig(n_prompts=2, max_new_tokens=10, temperatures=(0.0, 1.0), warmup_tokens=2)
    settings = parse_settings(METHODS, cfg, ["ar", "chain", "heuristic"])
    prompts = [Prompt("1", "writing", (5, 9, 17, 3, 33, 8)), Prompt("2", "qa", (4, 11, 6, 40))]
    suite = run_suite(pair, prompts, settings, cfg, progress=False)
    assert suite["mismatches"] == [] and suite["skipped"] == {}
    assert len(suite["runs"]) == 2 * 2 * len(METHODS)
    cells = {(c["temperature"], c["setting"]): c for c in suite["summary"]}
    assert set(cells) == {(t, k) for t in (0.0, 1.0) for k in METHODS}
    for (t, k), c in cells.items():
        assert c["tokens_per_s"] > 0 and c["tau"] >= 1
        assert c["greedy_mismatches"] == (0 if t == 0 else None)
        assert c["best_hf"] in {"hf-assist", "hf-assist:2"}
        if k.startswith("hf"):
            assert "split_pct" not in c and c["loop_speedup_vs_ar"] is None
        else:
            assert abs(sum(c["split_pct"].values()) - 100) < 1e-6
            assert 0 <= c["outside_forwards_pct"] < 100
            assert c["loop_tokens_per_s"] > c["tokens_per_s"]  # the loop leaves out the prefill
    assert cells[(0.0, "ar")]["speedup_vs_ar"] == pytest.approx(1.0) and cells[(0.0, "ar")]["tau"] == 1.0
    assert cells[(0.0, "ar")]["loop_speedup_vs_ar"] == pytest.approx(1.0)
    assert cells[(0.0, "hf")]["tau"] == 1.0 and cells[(0.0, "hf")]["alpha"] is None
    assert len(cells[(0.0, "chain:2")]["alpha"]) == 2 and len(cells[(0.0, "hf-assist:2")]["alpha"]) == 2
    assert cells[(0.0, "hf-assist")]["alpha"] is None
    assert {(b["task"], b["setting"]) for b in suite["by_task"] if b["temperature"] == 0} == {
        (task, k) for task in ("mt_bench", "qa") for k in METHODS
    }

    result = {
        "machine": machine_info(),
        "config": {**cfg.__dict__, "prompts_file": "x.jsonl", "methods": METHODS, "dtypes": ["fp32"]},
        "suites": {"fp32": suite},
    }
    json.loads(json.dumps(result))
    md = bench_report.markdown(result)
    assert "| method | tokens/s | × our AR | × our AR, decode loop | × best HF assisted | τ |" in md
    assert "Greedy audit (fp32): 0 mismatch" in md and "Per task" in md
    sampled_only = {**suite, "summary": [c for c in suite["summary"] if c["temperature"] != 0]}
    assert "Greedy audit: none (no T = 0 runs" in "\n".join(bench_report.suite_markdown(sampled_only))
    html = bench_report.write_html(result, tmp_path)
    assert html[0].exists() and html[0].stat().st_size > 100_000


def test_audit_reports_position_and_margin(tiny_pair):
    from specviz.tools.bench.prompt import audit

    pair = tiny_pair("same")
    p = Prompt("1", "qa", (5, 9, 17))
    found = audit(pair, p, [7, 8, 9], {"x": [7, 8, 10], "y": [7, 8, 9]})
    assert len(found) == 1 and found[0]["position"] == 2 and found[0]["setting"] == "x"
    assert found[0]["margin"] >= 0 and found[0]["ref_token"] == 9 and found[0]["got_token"] == 10


def test_parametrised_method_specs_set_one_knob():
    from specviz.methods.registry import BUILDERS
    from specviz.tools.bench.specs import method_knobs

    got = {
        s.key: method_knobs(s)
        for s in parse_settings(
            ["specdecpp:0.8", "dyspec:24", "dyspec-heap", "sequoia:8", "kary:3", "chain:2"],
            BenchConfig(),
            list(BUILDERS),
        )
    }
    assert got["specdecpp:0.8"]["specdecpp"].threshold == 0.8
    assert got["dyspec:24"]["dyspec"].budget == 24 and got["dyspec-heap"]["dyspec"].level_threshold == 0.0
    assert got["sequoia:8"]["tree"].budget == 8 and got["kary:3"]["tree"].width == 3
    assert got["chain:2"]["chain"].k == 2 and got["ar"] == {}
    for bad, needle in (("chain:x", "number"), ("heuristic:3", "no ':' parameter")):
        with pytest.raises(ValueError, match=needle):
            parse_settings([bad], BenchConfig(), list(BUILDERS))


def test_kernel_suffix_tags_a_setting():
    from specviz.tools.bench.specs import method_knobs

    got = {
        s.key: s
        for s in parse_settings(
            ["chain:2@stock", "hf-assist@skinny", "dyspec:8@stock"], BenchConfig(), ["ar", "chain", "dyspec"]
        )
    }
    assert got["chain:2@stock"].kernels == "stock" and got["chain:2@stock"].k == 2
    assert got["hf-assist@skinny"].kernels == "skinny" and got["hf-assist@skinny"].hf_assisted
    assert method_knobs(got["dyspec:8@stock"])["dyspec"].budget == 8 and got["ar"].kernels == ""
    with pytest.raises(ValueError, match="after '@'"):
        parse_settings(["chain:2@fast"], BenchConfig(), ["ar", "chain"])


def test_fp32draft_suffix_runs_the_draft_steps_in_fp32_for_that_run_only(monkeypatch):
    """chain:2@fp32draft: the draft's half rows are off while the setting runs and back on after it."""
    from tiny import tiny_llama

    from specviz import kernels
    from specviz.models.lm import LM
    from specviz.models.pair import Pair
    from specviz.tools.bench import prompt as bench

    s = {x.key: x for x in parse_settings(["chain:2@fp32draft"], BenchConfig(), ["ar", "chain"])}["chain:2@fp32draft"]
    assert s.kernels == "fp32draft" and "draft steps over the draft's own weights" in s.label
    pair = Pair(LM(tiny_llama(vocab=64, seed=0)), LM(tiny_llama(vocab=64, seed=1), half_rows=True), None, {}, None)
    head = pair.draft.model.get_output_embeddings()
    seen = []
    monkeypatch.setattr(bench, "_run_one", lambda *a: seen.append(kernels.halves(head)) or {})
    bench.run_one(pair, None, s, 0.0, 8, 0)
    bench.run_one(pair, None, replace(s, kernels=""), 0.0, 8, 0)
    assert seen == [False, True] and kernels.halves(head)
    from specviz.core.config import ChainConfig, RunConfig
    from specviz.engine.record import generate

    run = RunConfig(method="chain", chain=ChainConfig(2), max_new_tokens=4)
    assert generate(pair, [3, 5, 7], run).models["draft_half_rows"]  # the trace says which
    with kernels.full_rows(pair.draft.model):
        assert not generate(pair, [3, 5, 7], run).models["draft_half_rows"]


def test_static_suffix_runs_a_reduced_head_without_its_context_vocabulary():
    import torch
    from tiny import tiny_llama

    from specviz.core.config import ChainConfig, RunConfig
    from specviz.engine.record import generate
    from specviz.models.lm import LM
    from specviz.models.pair import Pair
    from specviz.tools.bench.prompt import head_only

    got = {
        s.key: s
        for s in parse_settings(["chain:2+static", "dyspec:4+copy+static"], BenchConfig(), ["ar", "chain", "dyspec"])
    }
    assert got["chain:2+static"].static and got["dyspec:4+copy+static"].copy and got["dyspec:4+copy+static"].static
    assert not got["ar"].static
    for bad in ("hf-assist+static", "ar+static"):
        with pytest.raises(ValueError, match="static"):
            parse_settings([bad], BenchConfig(), ["ar", "chain"])
    target = tiny_llama(vocab=64, seed=0)
    pair = Pair(
        LM(target),
        LM(tiny_llama(vocab=64, seed=1), head_ids=torch.arange(0, 64, 2), context_vocab=True),
        None,
        {},
        None,
    )
    run = RunConfig(method="chain", chain=ChainConfig(2), max_new_tokens=8)
    assert generate(pair, [3, 5, 7], run).models["context_vocab"]
    with head_only(pair.lms):
        trace = generate(pair, [3, 5, 7], run)
        assert not trace.models["context_vocab"] and all(t % 2 == 0 for r in trace.rounds for t in r.tree.tokens[1:])
    assert pair.draft.context_vocab
