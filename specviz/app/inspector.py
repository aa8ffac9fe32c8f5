"""The round view's handlers: which round and node are on screen, the node inspector, folded groups and the
growth replay. Plain functions from the visitor's trace and the controls' values to views; `specviz.app.ui` wires
them. A click in the tree reaches `on_pick` through a hidden textbox that the page's script (`theme.CLICK_JS`)
fills with the clicked point's `customdata`: a node, "correction" or a folded group's `viz.treegraph.fold_id`.
"""

from __future__ import annotations

import time

import gradio as gr

from specviz.analysis import verification
from specviz.viz.inspect import HINT, default_node, node_panel
from specviz.viz.side import side_figure
from specviz.viz.style import CORRECTION, placeholder, span_nodes
from specviz.viz.tree import tree_figure
from specviz.viz.verification import bars_figure
from specviz.viz.verification import panel as verify_panel

REPLAY_STEP_S = 0.6  # seconds a growth step stays on screen in the replay
EMPTY = "No run yet: press Run, or load a recorded trace."


def _index(trace, i) -> int:
    return max(0, min(int(i), len(trace.rounds) - 1))


def _round(trace, i):
    return trace.rounds[_index(trace, i)]


def round_views(trace, i, opened=(), step=None, stop: bool = True, mark=None):
    """Tree and stop figures of round i (clamped to the trace); `step` > 0: the tree's growth at that step; `stop`
    False: the tree alone (None for the stop figure); `mark`: a node ringed (the verification replay's)."""
    if trace is None or not trace.rounds:
        return placeholder(EMPTY), placeholder(EMPTY)
    rnd = _round(trace, i)
    grow = step if step and rnd.expand_order else None
    t = trace.config.get("dyspec", {}).get("level_threshold", 0) if trace.method == "dyspec" else 0
    t = t if isinstance(t, (int, float)) and 0 < t <= 1 else 0  # a trace file is input
    tree = tree_figure(rnd, trace.token_text, trace.greedy, set(opened or ()), grow, t, mark)
    return tree, side_figure(trace, _index(trace, i)) if stop else None


def growth_controls(trace, i):
    """The growth slider and replay button for round i: shown where the round records its growth."""
    rnd = _round(trace, i) if trace is not None and trace.rounds else None
    n = len(rnd.expand_order) if rnd is not None and rnd.expand_order else 0
    return gr.Slider(maximum=max(n, 1), value=0, visible=n > 1), gr.Button(visible=n > 1)


def panel(trace, i, node=None) -> str:
    """The inspector for `node` of round i (None: the round's most telling node, `default_node`)."""
    if trace is None or not trace.rounds:
        return f'<div class="sv-inspect">{HINT}</div>'
    rnd = _round(trace, i)
    return node_panel(trace, rnd.index, default_node(rnd) if node is None else node)


def open_round(trace, i, node=None):
    """Everything that changes with the round on screen: tree, stop plot, growth controls, inspector, open folds and
    the verification replay (back at its start)."""
    return (
        *round_views(trace, i),
        *growth_controls(trace, i),
        panel(trace, i, node),
        [],
        *verification_views(trace, i),
    )


def _walk(trace, i) -> tuple[list, str]:
    """Round i's verification steps, or [] and the sentence naming the field its trace lacks."""
    try:
        return verification.steps(trace, _round(trace, i).index), ""
    except ValueError as e:  # a field the replay needs is not in this trace: say which
        return [], str(e)


def verification_views(trace, i, k: int = 0, walk: list | None = None):
    """The verification replay of round i at step k (0: not started): its slider, its words and its bars (`walk`:
    the round's steps, where the caller has them)."""
    if trace is None or not trace.rounds:
        return gr.Slider(maximum=1, value=0), "", bars_figure(None, {})
    walk, missing = (walk, "") if walk is not None else _walk(trace, i)
    if missing:
        return gr.Slider(maximum=1, value=0), missing, bars_figure(None, {})
    k = max(0, min(int(k or 0), len(walk)))
    st = walk[k - 1] if k else None
    text = verify_panel(st, k, len(walk), trace.token_text)
    return gr.Slider(maximum=max(len(walk), 1), value=k), text, bars_figure(st, trace.token_text)


def on_verify(trace, i, k, opened, walk: list | None = None):
    """A step of the verification replay: the tree with the node being judged ringed (or the drawn token), the
    step's words and bars."""
    if trace is None or not trace.rounds:
        return gr.skip(), gr.skip(), gr.skip()
    walk, missing = (walk, "") if walk is not None else _walk(trace, i)
    if missing:
        return gr.skip(), missing, bars_figure(None, {})
    _, text, bars = verification_views(trace, i, k, walk)
    st = walk[int(k) - 1] if k and 0 < int(k) <= len(walk) else None
    mark = None if st is None else st.node if st.kind == verification.JUDGE else CORRECTION
    return round_views(trace, i, opened, stop=False, mark=mark)[0], text, bars


def verify_step(trace, i, k, delta: int, opened):
    """The replay's step buttons: one step on or back (clamped)."""
    if trace is None or not trace.rounds:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    walk, missing = _walk(trace, i)
    k = max(0, min(int(k or 0) + delta, len(walk)))
    return (k, *on_verify(trace, i, k, opened, None if missing else walk))


def step_round(trace, i, delta: int):
    n = len(trace.rounds) if trace is not None else 1
    j = max(0, min(int(i) + delta, n - 1))
    return (j, *open_round(trace, j))


def on_token(trace, evt: gr.SelectData):
    """A clicked output token: its round and node (`token_round`)."""
    return token_round(trace, evt.index)


def token_round(trace, index):
    """A clicked output token (its span index): its round, with the inspector on its node."""
    if trace is None or index is None:
        return (gr.skip(),) * 10
    spans = span_nodes(trace)
    k = index[0] if isinstance(index, (list, tuple)) else index
    if not isinstance(k, int) or not 0 <= k < len(spans):
        return (gr.skip(),) * 10
    j, node = spans[k]
    return (j, *open_round(trace, j, node))


def parse_pick(text: str | None) -> str | None:
    """The clicked point's name from the hidden textbox ("<customdata>@<time>": each click differs)."""
    if not isinstance(text, str) or not text:
        return None
    name = text.rsplit("@", 1)[0][:64]
    if name == CORRECTION or name.isdigit() or name.startswith("fold:"):
        return name
    return None


def on_pick(trace, i, text, opened, step):
    """A click in the tree: a node opens its inspector; a folded group opens in place (tree redrawn)."""
    name = parse_pick(text)
    if trace is None or not trace.rounds or name is None:
        return gr.skip(), gr.skip(), gr.skip()
    if name.startswith("fold:"):
        opened = sorted({*(opened or []), name})
        return round_views(trace, i, opened, step)[0], gr.skip(), opened
    return gr.skip(), panel(trace, i, name), gr.skip()


def on_growth(trace, i, step, opened):
    return round_views(trace, i, opened, step)[0]


def replay(trace, i, opened):
    """The growth replay: step 1, 2, ... n, one figure every REPLAY_STEP_S, then back to the verdicts."""
    if trace is None or not trace.rounds or not _round(trace, i).expand_order:
        return
    n = len(_round(trace, i).expand_order)
    for step in range(1, n + 1):
        yield step, round_views(trace, i, opened, step)[0]
        time.sleep(REPLAY_STEP_S)
    yield 0, round_views(trace, i, opened)[0]
