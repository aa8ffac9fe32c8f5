"""Figures and spans from hand-written traces (no model), colours match statuses, and the import boundary."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import plotly.graph_objects as go
import pytest

from specviz.analysis import metrics
from specviz.core.trace import (
    ACCEPTED,
    REJECTED,
    ROOT,
    UNVISITED,
    DraftTree,
    GenerationTrace,
    RoundTrace,
)
from specviz.viz.run import (
    calibration_figure,
    histogram_figure,
    position_figure,
    race_figure,
    round_spans,
    speedup_figure,
)
from specviz.viz.sentences import round_sentence
from specviz.viz.stop import stop_figure
from specviz.viz.style import (
    LABELS,
    PALETTE,
    SPAN_COLORS,
    placeholder,
    show_token,
    span_rounds,
    summary_cards,
    token_spans,
)
from specviz.viz.tree import CORRECTION, showcase_round, tree_figure
from specviz.viz.treegraph import tree_graph, tree_layout

ROOT_DIR = Path(__file__).resolve().parent.parent
TEXT = {1: "<s>", 10: " The", 11: " cat", 12: " sat", 13: " dog", 14: " on", 15: " mat", 16: "\n", 17: "<b>x</b>"}


def _round(index, tokens, parents, status, emitted, correction, **kw):
    n = len(tokens)
    path = tuple(i for i in range(1, n) if status[i] == ACCEPTED)
    return RoundTrace(
        index=index,
        context_len=5 + index,
        tree=DraftTree(tuple(tokens), tuple(parents), (1.0,) + (0.5,) * (n - 1)),
        status=tuple(status),
        p=(None,) + (0.4,) * (n - 1),
        accepted_path=path,
        emitted=tuple(emitted),
        correction=correction,
        draft_ms=10.0,
        verify_ms=20.0,
        overhead_ms=1.0,
        draft_forwards=n - 1,
        **kw,
    )


def make_trace():
    """Round 0: chain, 2 accepted then a resample. Round 1: a tree, full path accepted + bonus.
    Round 2: autoregressive (root only). Round 3: SpecDec++ fields present."""
    r0 = _round(0, [1, 10, 11, 12], [-1, 0, 1, 2], [ROOT, ACCEPTED, ACCEPTED, REJECTED], [10, 11, 13], "resample")
    r1 = _round(
        1,
        [13, 14, 15, 12, 16],
        [-1, 0, 0, 1, 3],
        [ROOT, ACCEPTED, UNVISITED, ACCEPTED, ACCEPTED],
        [14, 12, 16, 17],
        "bonus",
    )
    r2 = _round(2, [17], [-1], [ROOT], [10], "bonus")
    r3 = _round(
        3,
        [10, 11, 12, 13],
        [-1, 0, 1, 2],
        [ROOT, ACCEPTED, REJECTED, UNVISITED],
        [11, 15],
        "resample",
        accept_probs=(0.9, 0.6, 0.5),
        stop_probs=(0.1, 0.46, 0.73),
        threshold=0.5,
        stop_reason="threshold",
        hindsight_k=1,
    )
    rounds = (r0, r1, r2, r3)
    out = tuple(t for r in rounds for t in r.emitted)
    return GenerationTrace(
        method="chain",
        config={"sampling": {"temperature": 0.0}},
        prompt_ids=(1, 2, 3),
        output_ids=out,
        rounds=rounds,
        token_text=TEXT,
        total_ms=200.0,
        prompt_text="hi",
    )


@pytest.fixture
def trace():
    return make_trace()


def _node_traces(fig):
    return {t.meta: t for t in fig.data if t.meta}


def test_tree_colours_match_statuses(trace):
    fig = tree_figure(trace.rounds[0], trace.token_text)
    nodes = _node_traces(fig)
    assert set(nodes) == {ROOT, ACCEPTED, REJECTED, metrics.CORRECTED}
    for kind, t in nodes.items():
        assert t.marker.color == PALETTE[kind]
    assert len(nodes[ACCEPTED].x) == 2 and len(nodes[REJECTED].x) == 1
    chips = {a.text: a.bgcolor for a in fig.layout.annotations}
    assert chips["␣cat"] == PALETTE[ACCEPTED] and chips["␣sat"] == PALETTE[REJECTED]
    assert chips["␣dog"] == PALETTE[metrics.CORRECTED]  # the resampled correction is its own node
    assert "resampled" in fig.layout.title.text
    hover = " ".join(nodes[ACCEPTED].hovertext)
    assert "q (draft) = 0.500" in hover and "p (target) = 0.400" in hover and "min(1, p/q) = 0.800" in hover


def test_tree_layout_is_layered_and_bonus_hangs_off_the_leaf(trace):
    rnd = trace.rounds[1]
    g = tree_graph(rnd)
    assert [g.nodes[u]["depth"] for u in (0, 1, 2, 3, 4, CORRECTION)] == [0, 1, 1, 2, 3, 4]
    assert list(g.predecessors(CORRECTION)) == [4]
    fig = tree_figure(rnd, trace.token_text)
    nodes = _node_traces(fig)
    assert set(nodes) == {ROOT, ACCEPTED, UNVISITED, metrics.BONUS_TOKEN}
    assert nodes[UNVISITED].marker.color == PALETTE[UNVISITED]
    xs = {u: x for t in nodes.values() for u, x in zip(t.hovertext, t.x)}
    assert sorted(set(xs.values())) == [0, 1, 2, 3, 4]  # x = depth
    pos = tree_layout(g)
    assert {pos[u][1] for u in (0, 1, 3, 4, CORRECTION)} == {0} and pos[2][1] < 0  # committed line on top
    assert "&lt;b&gt;x&lt;/b&gt;" in " ".join(a.text for a in fig.layout.annotations)  # token text is escaped


def test_autoregressive_round_shows_the_target_token(trace):
    fig = tree_figure(trace.rounds[2], trace.token_text)
    assert set(_node_traces(fig)) == {ROOT, metrics.TARGET}
    assert "no draft" in fig.layout.title.text


def test_stop_figure_with_and_without_specdecpp_fields(trace):
    fig = stop_figure(trace.rounds[3], trace.token_text)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert list(bars[0].y) == [0.9, 0.6, 0.5]
    assert list(bars[0].marker.color) == [PALETTE[ACCEPTED], PALETTE[REJECTED], PALETTE[UNVISITED]]
    line = [t for t in fig.data if isinstance(t, go.Scatter) and t.mode == "lines+markers"][0]
    assert list(line.y) == [0.1, 0.46, 0.73]
    assert any(s.y0 == 0.5 for s in fig.layout.shapes)  # the threshold line
    assert "threshold" in fig.layout.title.subtitle.text
    assert showcase_round(trace.rounds) == 0
    empty = stop_figure(trace.rounds[0], trace.token_text)
    assert "SpecDec++" in empty.layout.annotations[0].text and not empty.data


def test_run_figures(trace):
    base = GenerationTrace(
        method="ar",
        config={},
        prompt_ids=(1,),
        output_ids=trace.output_ids,
        rounds=trace.rounds,
        token_text=TEXT,
        total_ms=400.0,
    )
    fig = speedup_figure(trace, base)
    assert "2.00× faster" in fig.layout.title.text
    # the same rounds in twice the wall time: all of the difference is outside the decode loop (the prefill)
    assert metrics.loop_speedup(trace, base) == pytest.approx(1.0)
    assert "decode loop alone 1.00×" in fig.layout.title.subtitle.text
    slow_loop = replace(base, rounds=tuple(replace(r, verify_ms=r.verify_ms + 10.0) for r in trace.rounds))
    assert metrics.loop_speedup(trace, slow_loop) > 1.0
    assert speedup_figure(trace, None).layout.title.text == "Speed"
    assert "2.00× slower" in speedup_figure(base, trace).layout.title.text
    pos = position_figure(trace)
    assert list(pos.data[0].x) == [1, 2, 3] and list(pos.data[0].text) == ["3/3", "2/3", "1/3"]
    hist = histogram_figure(trace)
    assert list(hist.data[0].y) == [1, 1, 1, 1]
    race = race_figure([trace, base])
    assert len([t for t in race.data if isinstance(t, go.Scatter)]) == 2
    assert round_spans(trace)[0][0] == pytest.approx(200.0 - 4 * 31.0)
    assert "Race" in race_figure([]).layout.title.text


def test_metrics(trace):
    assert metrics.tokens_per_call(trace.rounds) == pytest.approx(10 / 4)
    assert metrics.acceptance_rate(trace.rounds) == pytest.approx(6 / 10)
    assert metrics.acceptance_by_position(trace.rounds) == [(1, 3, 3), (2, 3, 2), (3, 3, 1)]
    assert metrics.accepted_length_histogram(trace.rounds) == [1, 1, 1, 1]
    split = metrics.time_split(trace)
    assert (split.draft_ms, split.verify_ms, split.overhead_ms, split.other_ms) == (40.0, 80.0, 4.0, 76.0)
    assert metrics.tokens_per_second(trace) == pytest.approx(50.0)


def test_spans_colour_every_output_token_by_origin(trace):
    spans = token_spans(trace)
    assert [t for t, _ in spans] == [TEXT[t] for t in trace.output_ids]
    assert [k for _, k in spans] == [
        metrics.DRAFTED,
        metrics.DRAFTED,
        metrics.CORRECTED,
        metrics.DRAFTED,
        metrics.DRAFTED,
        metrics.DRAFTED,
        metrics.BONUS_TOKEN,
        metrics.TARGET,
        metrics.DRAFTED,
        metrics.CORRECTED,
    ]
    assert span_rounds(trace) == [0, 0, 0, 1, 1, 1, 1, 2, 3, 3]
    assert set(SPAN_COLORS) == set(metrics.ORIGINS)
    assert SPAN_COLORS[metrics.DRAFTED] == PALETTE[ACCEPTED]


def test_cards_and_labels_escape_trace_strings(trace):
    html_ = summary_cards(metrics.summarize(trace), 1.5, "<script>alert(1)</script>")
    assert "<script>" not in html_ and "1.50×" in html_
    assert show_token(" a\nb") == "␣a↵b" and show_token("") == "∅" and len(show_token("x" * 50)) == 12
    assert placeholder("a\nb").layout.annotations[0].text == "a<br>b"
    assert set(LABELS) >= set(PALETTE)


def test_shipped_traces_draw(tmp_path):
    paths = sorted((ROOT_DIR / "assets" / "traces").glob("*.json"))
    if not paths:
        pytest.skip("no recorded traces in assets/traces")
    for p in paths:
        d = json.loads(p.read_text())
        tr = GenerationTrace.from_dict(d)
        for rnd in tr.rounds[:2]:
            tree_figure(rnd, tr.token_text).to_json()
            stop_figure(rnd, tr.token_text).to_json()
        position_figure(tr).to_json()
        calibration_figure(tr).to_json()
        assert len(token_spans(tr)) == len(tr.output_ids)


def test_viz_imports_no_torch_transformers_or_gradio_and_the_app_state_no_gradio():
    code = (
        "import sys; import specviz.viz.style, specviz.viz.tree, specviz.viz.stop, specviz.viz.sentences, "
        "specviz.viz.run, specviz.viz.budget, specviz.analysis.metrics, specviz.methods.catalog; "
        "bad = [m for m in ('torch', 'transformers', 'gradio') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT_DIR, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    modules = ", ".join(f"specviz.app.{m}" for m in ("policy", "held", "runs", "pairjobs", "files"))
    code = f"import sys; import {modules}; print('gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT_DIR, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_an_empty_trace_draws_placeholders():
    empty = GenerationTrace(method="chain", config={}, prompt_ids=(1,), output_ids=(), rounds=())
    assert not position_figure(empty).data and not histogram_figure(empty).data and not calibration_figure(empty).data
    assert token_spans(empty) == [] and showcase_round(empty.rounds) == 0
    speedup_figure(empty, None).to_json()
    summary_cards(metrics.summarize(empty), None, "chain")


def _specdecpp_trace(factors_and_statuses, models=None):
    rounds = tuple(
        _round(
            i,
            list(range(10, 11 + len(st))),
            list(range(-1, len(st))),
            [ROOT, *st],
            [10],
            "resample",
            accept_probs=tuple(f),
        )
        for i, (f, st) in enumerate(factors_and_statuses)
    )
    return GenerationTrace(
        method="specdecpp",
        config={},
        prompt_ids=(1,),
        output_ids=(10,) * len(rounds),
        rounds=rounds,
        token_text=TEXT,
        total_ms=100.0,
        models=models or {},
    )


def test_head_calibration_metrics_pair_each_judged_candidate_with_its_factor():
    rounds = [
        ((0.9, 0.8, 0.3), (ACCEPTED, ACCEPTED, REJECTED)),
        ((0.2, 0.7), (REJECTED, UNVISITED)),
        ((0.6, 0.95), (ACCEPTED, ACCEPTED)),
    ]
    tr = _specdecpp_trace(rounds, {"acceptance_head": {"lag": False}})
    assert metrics.judged_labels(tr.rounds[1]) == [0]
    pairs = metrics.head_predictions(tr)
    assert pairs == [(0.9, 1), (0.8, 1), (0.3, 0), (0.2, 0), (0.6, 1), (0.95, 1)]  # 0.7 was never judged
    assert metrics.auc(pairs) == 1.0 and metrics.auc([(0.5, 1), (0.5, 0)]) == 0.5 and metrics.auc([(0.1, 1)]) is None
    assert metrics.auc([(0.9, 0.75), (0.1, 0.25)]) == pytest.approx(0.75)  # soft labels: weights of both classes
    assert metrics.brier([(1.0, 1), (0.5, 0)]) == pytest.approx(0.125) and metrics.brier([]) is None
    bins = metrics.calibration_bins(pairs)
    assert [(lo, n) for lo, _, n, _, _ in bins] == [(0.2, 2), (0.6, 1), (0.8, 3)]
    assert bins[0][3:] == pytest.approx((0.25, 0.0)) and bins[2][4] == 1.0
    # a lagged head (the paper's): factor 1 at step 1, step i + 1 scores candidate i; recorded or inferred
    lagged = [((1.0, 0.9, 0.2), (ACCEPTED, REJECTED, UNVISITED))]
    for models in ({"acceptance_head": {"lag": True}}, {}):
        assert metrics.head_predictions(_specdecpp_trace(lagged, models)) == [(0.9, 1), (0.2, 0)]


def test_calibration_figure_draws_bins_and_the_reject_weight_curve():
    rounds = [((0.9, 0.3), (ACCEPTED, REJECTED)), ((0.2, 0.7), (REJECTED, UNVISITED))]
    tr = _specdecpp_trace(rounds, {"acceptance_head": {"lag": False, "reject_weight": 6.0, "heldout_auc": 0.8}})
    fig = calibration_figure(tr)
    names = [t.name for t in fig.data]
    assert names == ["calibrated", "what reject weight 6 aims for", "this run"]
    assert list(fig.data[2].text) == ["2", "1"] and "AUC 1.00" in fig.layout.title.subtitle.text
    assert "held-out at training 0.80" in fig.layout.title.subtitle.text
    for junk in ("six", {"lag": "no", "reject_weight": "6", "heldout_auc": [0.8]}, {"reject_weight": float("nan")}):
        odd = calibration_figure(_specdecpp_trace(rounds, {"acceptance_head": junk}))  # a hand-edited trace file
        assert [t.name for t in odd.data] == [
            "calibrated",
            "this run",
        ] and "held-out" not in odd.layout.title.subtitle.text
    chain = calibration_figure(make_trace())  # not a SpecDec++ run: says how to get one
    assert not chain.data and "SpecDec++" in chain.layout.annotations[0].text


def test_token_text_is_escaped_once_for_plotly():
    assert show_token('"') == '"' and show_token("'s") == "'s"  # plotly draws &quot; as written
    assert show_token("a<b&c") == "a&lt;b&amp;c"


@pytest.mark.parametrize("width", [12, 40])
def test_a_wide_tree_grows_the_figure_and_keeps_labels_readable(width):
    tokens = [1] + [10 + i % 8 for i in range(width)]
    status = [ROOT] + [ACCEPTED] + [UNVISITED] * (width - 1)
    rnd = _round(0, tokens, [-1] + [0] * width, status, (tokens[1], 12), "bonus")
    fig = tree_figure(rnd, TEXT)
    folds = [a.text for a in fig.layout.annotations if a.text.startswith("+")]
    if width == 12:  # one row a sibling: each keeps its spacing
        assert fig.layout.height >= 34 * width and not folds
    else:  # past the cap, the last unvisited siblings fold into one chip
        assert 900 <= fig.layout.height <= 1100 and len(folds) == 1
        opened = tree_figure(rnd, TEXT, opened={"fold:0:unvisited"})  # a click opens it: the figure grows
        assert opened.layout.height >= 34 * width and not [a for a in opened.layout.annotations if "+" in a.text]
    assert all(a.font.size >= 12 for a in fig.layout.annotations if a.font and a.font.size)


def test_every_round_reads_in_one_plain_sentence(trace):
    r0, r1, r2 = trace.rounds[:3]
    assert round_sentence(r0, TEXT) == (
        "drafted 3 tokens; the target kept ‘ The cat’, rejected ‘ sat’ (p 0.40 against q 0.50), "
        "and drew ‘ dog’ from the residual."
    )
    assert "(not the target's argmax), and took the target's argmax ‘ dog’ instead" in round_sentence(r0, TEXT, True)
    assert round_sentence(r1, TEXT).startswith("drafted 4 tokens in 2 branches;")
    assert "the bonus ‘&lt;b&gt;x&lt;/b&gt;’ from the target" in round_sentence(r1, TEXT)  # escaped once
    assert round_sentence(r2, TEXT) == "nothing was drafted: the target chose ‘ The’ alone."
    shown = tree_figure(r0, TEXT).layout.title.subtitle.text
    assert shown.startswith(round_sentence(r0, TEXT, width=64)) and "<br>" in round_sentence(r0, TEXT, width=64)
    assert all(len(line) <= 64 for line in round_sentence(r0, TEXT, width=64).split("<br>"))
