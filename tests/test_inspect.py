"""The node inspector: for a clicked node, the panel shows q against p, the verdict with its numbers, the residual at a
rejection, SpecDec++'s head at that step and DySpec's growth; a clicked token opens its round and node; a click on a
folded group opens it; older traces say what they lack. Traces are decoded on tiny random pairs."""

import html
import re

import pytest
from helpers import TREES, recorded_run, recorded_specdecpp

from specviz.app import inspector
from specviz.core.config import SamplingConfig
from specviz.core.trace import ACCEPTED, REJECTED, GenerationTrace
from specviz.viz.inspect import default_node, node_panel
from specviz.viz.style import CORRECTION, span_nodes

SAMPLED = SamplingConfig(temperature=1.0, seed=3)


@pytest.fixture(scope="module")
def dyspec():
    from conftest import make_pair

    return recorded_run(make_pair("random"), "dyspec", SAMPLED, 8, **TREES["dyspec"])


def _first(trace, status):
    for r in trace.rounds:
        for c, st in enumerate(r.status):
            if st == status:
                return r, c
    raise AssertionError(f"no {status} node")


def _text(panel: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", panel))


def test_a_rejected_node_shows_q_p_u_and_the_residual(dyspec):
    r, c = _first(dyspec, REJECTED)
    panel = node_panel(dyspec, r.index, c)
    words = _text(panel)
    assert "q: the draft's distribution" in words and "p: the target's distribution" in words
    assert f"uniform draw u = {r.u[c]:.3f}" in words and "min(1, p/q)" in words
    assert "residual norm(max(0, p − q)) after rejecting" in words
    assert panel.count('class="sv-mark"') >= 2  # the drafted token marked in q and in p
    assert "Growth" in words and "node value" in words and "Slots competing at that step" in words
    assert "does not record" not in words


def test_greedy_panels_name_the_target_argmax(tiny_pair):
    trace = recorded_run(tiny_pair("random"), "chain", SamplingConfig(), 8)
    r, c = _first(trace, REJECTED)
    words = _text(node_panel(trace, r.index, c))
    top = r.p_top[c][0][0]
    assert "Temperature 0: kept iff it is the target's argmax" in words
    assert trace.token_text.get(top, f"<{top}>").strip()[:4] in words.replace("␣", " ")


def test_specdecpp_panel_shows_the_head_and_the_running_product(tiny_pair):
    trace = recorded_specdecpp(tiny_pair("random"), SAMPLED, 8)
    r = next(r for r in trace.rounds if r.n_drafted >= 2)
    words = _text(node_panel(trace, r.index, 2))
    assert "SpecDec++ at draft step 2" in words and f"{r.accept_probs[1]:.3f}" in words
    assert f"P(at least one rejection) = 1 − ∏ = {r.stop_probs[1]:.3f}" in words
    assert "log_q" in words and "depth" in words


def test_an_older_trace_says_what_it_lacks(dyspec):
    old = dyspec.to_dict()
    for r in old["rounds"]:
        for key in ("q_top", "p_top", "residual_top", "expand_order", "values", "frontier"):
            r.pop(key)
    legacy = GenerationTrace.from_dict(old)
    r, c = _first(legacy, REJECTED)
    words = _text(node_panel(legacy, r.index, c))
    assert "This trace does not record the top of q and p" in words and "growth order" in words
    assert "not recorded" in words and "min(1, p/q)" in words  # what it has is still shown


def test_every_node_and_the_correction_render_and_escape(dyspec):
    for r in dyspec.rounds:
        for c in [*range(len(r.tree)), CORRECTION]:
            panel = node_panel(dyspec, r.index, c)
            assert "<script" not in panel and panel.startswith('<div class="sv-inspect">')
    assert "Click a node" in node_panel(dyspec, 0, "no such node") and "Click a node" in node_panel(dyspec, 0, 999)


def test_a_clicked_token_opens_its_round_and_node(dyspec):
    spans = span_nodes(dyspec)
    assert len(spans) == len(dyspec.output_ids)
    for j, node in spans:
        r = dyspec.rounds[j]
        assert node == CORRECTION or r.status[node] == ACCEPTED
    k = len(spans) - 1
    j, node = spans[k]
    out = inspector.token_round(dyspec, k)
    assert out[0] == j and out[5] == node_panel(dyspec, j, node)
    assert all(x is not None for x in inspector.token_round(dyspec, 10_000))  # out of range: nothing changes


def test_a_click_in_the_tree_opens_a_node_or_a_fold(dyspec):
    r, c = _first(dyspec, REJECTED)
    tree, panel, opened = inspector.on_pick(dyspec, r.index, f"{c}@1712", [], 0)
    assert panel == node_panel(dyspec, r.index, c)
    tree, panel, opened = inspector.on_pick(dyspec, r.index, "fold:0:unvisited@5", [], 0)
    assert opened == ["fold:0:unvisited"] and tree.layout is not None
    assert inspector.parse_pick("<img src=x>@1") is None and inspector.parse_pick(None) is None


def test_a_round_opens_on_its_first_rejection_and_the_replay_steps_through(dyspec, monkeypatch):
    r, c = _first(dyspec, REJECTED)
    assert default_node(r) == c
    tree, stop, grow, replay, panel, opened, *_verification = inspector.open_round(dyspec, r.index)
    assert panel == node_panel(dyspec, r.index, c) and opened == []
    fig = inspector.on_growth(dyspec, r.index, 1, [])
    assert fig.layout.title.text.endswith("how the tree grew") and "step 1 of" in fig.layout.title.subtitle.text
    monkeypatch.setattr(inspector, "REPLAY_STEP_S", 0.0)
    steps = list(inspector.replay(dyspec, r.index, []))
    assert [s for s, _ in steps] == [*range(1, len(r.expand_order) + 1), 0]  # every step, then the verdicts
