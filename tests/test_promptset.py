"""A prompt set's numbers from known traces: hand-made rounds in, known counts out; the A/B's pairing, bootstrap
and first differences; files refused with a sentence; the report's HTML; a bench's kept traces read back."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from specviz.analysis import compare as ab
from specviz.analysis import promptset as ps
from specviz.analysis.runset import PromptRun, RunSet, read_runset, runs_from_lines
from specviz.app import promptset as app_promptset
from specviz.app import runs
from specviz.core.config import RunConfig
from specviz.core.trace import BONUS, RESAMPLE, DraftTree, GenerationTrace, RoundTrace
from specviz.engine.record import generate
from specviz.engine.tops import entropies
from specviz.tools import report
from specviz.viz.promptset import ab_figure, disagreement_html, set_figures


def rnd(index, tokens, parents, q, status, path, emitted, correction, p_top=None, p_entropy=None):
    n = len(tokens)
    return RoundTrace(
        index=index,
        context_len=5 + index,
        tree=DraftTree(tuple(tokens), tuple(parents), tuple(q)),
        status=("root", *status),
        p=(None,) + (0.5,) * (n - 1),
        accepted_path=tuple(path),
        emitted=tuple(emitted),
        correction=correction,
        draft_ms=2.0,
        verify_ms=10.0,
        overhead_ms=1.0,
        p_top=p_top,
        p_entropy=p_entropy,
    )


TEXT = {i: f"t{i}" for i in range(64)}


def trace(method, rounds, total_ms=100.0, prompt=(1, 2, 3)):
    out = tuple(t for r in rounds for t in r.emitted)
    return GenerationTrace(method, {}, prompt, out, tuple(rounds), dict(TEXT), total_ms, "a prompt", {"vocab_size": 64})


A_ROUNDS = [  # a chain: 11 12 accepted, 13 rejected (the target put 20); then 13 rejected at once (21)
    rnd(
        0,
        [10, 11, 12, 13],
        [-1, 0, 1, 2],
        [1, 0.9, 0.5, 0.2],
        ["accepted", "accepted", "rejected"],
        [1, 2],
        [11, 12, 20],
        RESAMPLE,
        p_top=(None, [[11, 0.8], [5, 0.1]], [[12, 0.6], [7, 0.3]], [[20, 0.5], [13, 0.4]]),
        p_entropy=(None, 0.5, 1.0, 1.5),
    ),
    rnd(1, [20, 13, 14], [-1, 0, 1], [1, 0.4, 0.3], ["rejected", "unvisited"], [], [21], RESAMPLE),
]
B_ROUNDS = [  # a tree: the root's first child 31 rejected, its second 32 accepted, and the bonus 40
    rnd(
        0,
        [30, 31, 32, 33],
        [-1, 0, 0, 1],
        [1, 0.6, 0.3, 0.7],
        ["rejected", "accepted", "unvisited"],
        [2],
        [32, 40],
        BONUS,
    )
]


def runset(label="s"):
    return RunSet(
        label,
        (
            PromptRun("1", "math", trace("chain", A_ROUNDS)),
            PromptRun("2", "code", trace("chain", B_ROUNDS, prompt=(4, 5))),
        ),
    )


def test_acceptance_per_position_and_by_task():
    pa = ps.position_acceptance(runset())
    assert pa["all"] == [(1, 3, 2), (2, 3, 1), (3, 1, 0)]
    # per task: Spec-Bench's MT-bench categories (math here) count as one task, other categories stand alone
    assert pa["mt_bench"] == [(1, 2, 1), (2, 2, 1), (3, 1, 0)] and pa["code"] == [(1, 1, 1), (2, 1, 0)]


def test_sibling_ranks_q_margins_and_entropy():
    rs = runset()
    assert ps.sibling_rank_acceptance(rs) == [(1, 5, 2), (2, 1, 1)]
    assert sorted(ps.q_pairs(rs)) == sorted([(0.9, 1), (0.5, 1), (0.2, 0), (0.4, 0), (0.6, 0), (0.3, 1)])
    assert ps.margin_pairs(rs) == [(pytest.approx(0.7), 1), (pytest.approx(0.3), 1), (pytest.approx(0.1), 0)]
    assert ps.entropy_pairs(rs) == [(0.5, 1), (1.0, 1), (1.5, 0)]
    rel = ps.q_reliability(rs)
    assert rel["n"] == 6 and sum(n for _, _, n, _, _ in rel["bins"]) == 6
    assert ps.binned([(0.05, 1), (0.15, 0), (1.0, 1)], (0, 0.1, 0.2, 1.0)) == [
        (0, 0.1, 1, 0.05, 1.0),
        (0.1, 0.2, 1, 0.15, 0.0),
        (0.2, 1.0, 1, 1.0, 1.0),
    ]


def test_disagreements_name_the_drafts_best_guess_and_the_targets_token():
    rs = runset()
    assert ps.disagreement_sites(rs.runs[0].trace) == [(13, 20, 0, 2), (13, 21, 1, 3)]
    assert ps.disagreement_sites(rs.runs[1].trace) == []  # the bonus after an accepted leaf is no disagreement
    d = ps.disagreements(rs)
    assert {(x.drafted, x.target, x.count) for x in d} == {(13, 20, 1), (13, 21, 1)}
    assert ps.context_snippet(rs.runs[0].trace, 2) == "t11t12"


def test_pooled_numbers_and_worst_prompts():
    rs = runset()
    head = ps.pooled(rs)
    assert head["prompts"] == 2 and head["tokens"] == 6 and head["rounds"] == 3 and head["tau"] == 2.0
    assert head["tokens_per_s"] == pytest.approx(6 / 0.2)
    rows = ps.prompt_rows(rs)
    assert [r.tau for r in rows] == [2.0, 2.0] and rows[0].acceptance == pytest.approx(2 / 5)
    split = ps.set_time_split(rs)
    assert split["draft"] == 6.0 and split["verify"] == 30.0 and split["overhead"] == 3.0 and split["other"] == 161.0
    assert ps.worst_prompts(rows, 1) == [1]  # equal τ: the one with fewer tokens/s (20 against 40) first


def test_the_paired_bootstrap_is_seeded_and_finds_a_real_shift():
    rng = np.random.default_rng(0)
    flat = ab.paired_bootstrap([0.0] * 10, rng)
    assert (flat.mean, flat.lo, flat.hi) == (0.0, 0.0, 0.0) and not flat.excludes_zero
    diffs = [0.5 + 0.1 * np.sin(i) for i in range(30)]
    a = ab.paired_bootstrap(diffs, np.random.default_rng(1))
    b = ab.paired_bootstrap(diffs, np.random.default_rng(1))
    assert a == b and a.excludes_zero and a.lo < a.mean < a.hi
    assert ab.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert ab.first_difference([1, 2, 3], [1, 5, 3]) == 1 and ab.first_difference([1, 2], [1, 2, 3]) == 2


def test_an_ab_pairs_prompts_by_id_and_ranks_the_differences():
    a = runset("A")
    faster = trace("chain", A_ROUNDS, total_ms=50.0)
    b = RunSet("B", (PromptRun("1", "math", faster), PromptRun("9", "other", trace("chain", B_ROUNDS, prompt=(7,)))))
    cmp = ab.compare(a, b)
    assert [p.qid for p in cmp.pairs] == ["1"] and cmp.unpaired == 1
    assert cmp.tau.mean == 0.0 and cmp.tokens_per_s.mean == pytest.approx(40.0)
    assert cmp.output_differences == []
    with pytest.raises(ValueError, match="share no prompt"):
        ab.compare(a, RunSet("C", (PromptRun("9", "x", trace("chain", B_ROUNDS, prompt=(7,))),)))


def lines(*traces, **extra):
    return [json.dumps({**t.to_dict(), "question_id": i, "category": "qa", **extra}) for i, t in enumerate(traces)]


def test_files_are_refused_with_a_sentence(tmp_path):
    good = lines(trace("chain", A_ROUNDS), trace("chain", B_ROUNDS))
    assert len(runs_from_lines(good, "f").runs) == 2
    with pytest.raises(ValueError, match="mixes methods: chain \\(1\\), dyspec \\(1\\)"):
        runs_from_lines(lines(trace("chain", A_ROUNDS), trace("dyspec", B_ROUNDS)), "f")
    with pytest.raises(ValueError, match="line 2, is not JSON"):
        runs_from_lines([good[0], "{oops"], "f")
    with pytest.raises(ValueError, match="not a specviz trace"):
        runs_from_lines(['{"turns": ["a prompt"]}'], "f")
    with pytest.raises(ValueError, match="holds no traces"):
        runs_from_lines(["", "  "], "f")
    other = trace("chain", B_ROUNDS)
    other = GenerationTrace(**{**other.__dict__, "token_text": {**TEXT, 13: "else"}})
    with pytest.raises(ValueError, match="two tokenizers: token 13"):
        runs_from_lines(lines(trace("chain", A_ROUNDS), other), "f")
    with pytest.raises(ValueError, match="is not a file"):
        read_runset(str(tmp_path / "missing.jsonl"))
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"suites": {}, "config": {}}))
    with pytest.raises(ValueError, match="summaries, not its traces: rerun `specviz bench` with --traces"):
        read_runset(str(bench))
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "fp32-T0-chain-3.jsonl").write_text("\n".join(good) + "\n")
    bench.write_text(json.dumps({"suites": {}, "traces": {"fp32-T0-chain:3": "t/fp32-T0-chain-3.jsonl"}}))
    with pytest.raises(ValueError, match="name one as bench.json#LABEL, with LABEL one of fp32-T0-chain:3"):
        read_runset(str(bench))
    assert len(read_runset(f"{bench}#fp32-T0-chain:3").runs) == 2


def test_the_report_writes_one_offline_html_file(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    a.write_text("\n".join(lines(trace("chain", A_ROUNDS), trace("chain", B_ROUNDS))) + "\n")
    out = tmp_path / "r.html"
    assert report.main([str(a), "--out", str(out)]) == 0
    page = out.read_text()
    assert "<script src=" not in page and page.count("Plotly.newPlot") >= 5  # plotly inlined, nothing fetched
    for needle in ("Acceptance per draft position", "Where the draft and the target part", "data:application/json"):
        assert needle in page
    ab_out = tmp_path / "ab.html"
    assert report.main([str(a), "--compare", str(a), "--out", str(ab_out)]) == 0
    assert "A/B" in ab_out.read_text() and "2 of 2 prompts identical" in ab_out.read_text()
    assert report.main([str(tmp_path / "nope.jsonl"), "--out", str(out)]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_recorded_entropy_is_the_distributions_own(tiny_pair):

    assert entropies(torch.full((1, 50), 1 / 50)) == [round(math.log(50), 3)]
    assert (
        entropies(torch.tensor([[1.0, 0.0, 0.0]])) == [0.0] and str(entropies(torch.tensor([[1.0, 0.0]]))[0]) == "0.0"
    )
    trace = generate(tiny_pair("near"), [1, 5, 9], RunConfig(method="chain", max_new_tokens=12))
    for r in trace.rounds:
        for c in range(1, len(r.tree)):
            top = r.p_top[c]
            assert r.p_entropy[c] > 0 and (r.p_entropy[c] >= -sum(p * math.log(p) for _, p in top) - 1e-3)


def test_every_figure_draws_the_numbers_it_was_given():
    rs = runset()
    figs = set_figures(rs)
    assert list(figs) == ["positions", "tau", "time", "q", "target", "ranks"]
    overall = figs["positions"].data[0]
    assert list(overall.y) == [2 / 3, 1 / 3, 0.0] and list(overall.x) == [1, 2, 3]
    assert sorted(figs["tau"].data[0].x) == [2.0, 2.0]
    assert [b.x[0] for b in figs["time"].data] == [0.006, 0.03, 0.003, 0.161]  # seconds: draft, verify, overhead, other
    q = figs["q"].data[1]
    assert sum(c[2] for c in q.customdata) == 6
    assert list(figs["ranks"].data[0].y) == [0.4, 1.0] and list(figs["ranks"].data[0].text) == ["2/5", "1/1"]
    html = disagreement_html(rs)
    assert html.count("<tr>") == 3 and "t13" in html and "t20" in html and "t21" in html
    cmp = ab.compare(rs, rs)
    assert list(ab_figure(cmp).data[1].x) == list(ab_figure(cmp).data[1].y)


def test_a_tiny_pairs_set_runs_end_to_end(tiny_pair, tmp_path):
    """Traces of three prompts from a tiny pair, written as `generate --prompts` writes them, read back and reported;
    a greedy A/B of two lossless methods finds every output identical."""
    pair = tiny_pair("near")
    files = {}
    for method in ("chain", "dyspec"):
        path = tmp_path / f"{method}.jsonl"
        with open(path, "w") as f:
            for i, ids in enumerate(([1, 5, 9], [1, 7, 3, 2], [4, 4, 8])):
                t = generate(pair, ids, RunConfig(method=method, max_new_tokens=16))
                f.write(json.dumps({**t.to_dict(), "question_id": i, "category": "qa"}) + "\n")
        files[method] = path
    a, b = read_runset(str(files["chain"])), read_runset(str(files["dyspec"]))
    assert a.method == "chain" and len(b.runs) == 3
    cmp = ab.compare(a, b)
    assert len(cmp.pairs) == 3 and cmp.output_differences == []
    total = sum(n for _, n, _ in ps.position_acceptance(b)["all"][:1])
    assert total == sum(1 for r in b.rounds if r.n_drafted)
    out = tmp_path / "ab.html"
    assert report.main([str(files["chain"]), "--compare", str(files["dyspec"]), "--out", str(out)]) == 0
    assert "3 of 3 prompts identical" in out.read_text()


def test_the_page_refuses_bad_sets_with_a_sentence(tmp_path):
    for n, needle in ((0, "1 to 20"), (21, "1 to 20"), ("6", "1 to 20"), (True, "1 to 20")):
        with pytest.raises(ValueError, match=needle):
            runs.set_prompts(n)
    assert len(runs.set_prompts(3)) == 3
    binary = tmp_path / "x.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="not UTF-8 text"):
        runs.set_prompts(2, str(binary))
    with pytest.raises(ValueError, match="could not read that traces file: .* not a specviz trace"):
        app_promptset.load(str(_prompts_file(tmp_path)))
    assert app_promptset.views(None)[1] == [] and app_promptset.pick(None, 0) is None


def _prompts_file(tmp_path):
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"turns": ["hello"]}\n')
    return p
