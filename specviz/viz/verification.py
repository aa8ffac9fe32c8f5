"""The verification replay in words and bars: one plain sentence a step (and the formula it uses), and the
distribution the step reads as a bar chart with the judged or drawn token marked. Records: `analysis.verification`."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from specviz.analysis.verification import BONUS_DRAW, DRAW, END, JUDGE, Step
from specviz.viz.style import PALETTE, base_layout, placeholder, token_label

BARS_HEIGHT = 300
BARS = 12  # tokens drawn of a distribution
MARK, OTHER = "#f59e0b", "#93c5fd"


def _t(token_text: Mapping[int, str], tok: int | None) -> str:
    return "?" if tok is None else f"“{token_label(token_text, tok, 24)}”"


def sentence(st: Step, token_text: Mapping[int, str]) -> tuple[str, str]:
    """(what the step does, in one plain sentence; the formula it uses, "" where none)."""
    y, where = _t(token_text, st.token), "the prompt" if st.parent == 0 else f"node {st.parent}"
    if st.kind == END:
        return "The run reached its length inside this round: nothing more is drawn.", ""
    if st.greedy and st.kind == JUDGE:
        verdict = (
            "they match: **accepted**, and the walk goes on below it" if st.accepted else "they differ: **rejected**"
        )
        who = "copied from the context" if st.copied else "drafted"
        return (
            f"Depth {st.depth + 1}: after {where} the target's own greedy choice is {_t(token_text, st.target)}; the "
            f"{who} token is {y}: {verdict}.",
            "accept y if y = argmax p(· | context)",
        )
    if st.greedy:
        what = (
            "every drafted token on the path matched, so the same target pass gives the next token free"
            if (st.kind == BONUS_DRAW)
            else "no drafted child matched, so the target's own choice is emitted instead"
        )
        return f"Then {what}: {y}.", "x = argmax p(· | context)"
    if st.kind == JUDGE:
        return _sampled_judge(st, y, token_text)
    if st.kind == DRAW:
        return (
            f"Every child here was rejected, so the token is drawn from the residual the last rejection left: {y}. "
            "This is what makes the output follow the target exactly: the residual holds the probability the draft "
            "under-proposed.",
            "x ~ R = norm(max(0, R − D))",
        )
    return (
        f"Every drafted token on the path was accepted, so the bonus token is drawn from the target's own "
        f"distribution after the path: {y}.",
        "x ~ p(· | context, path)",
    )


def _sampled_judge(st: Step, y: str, token_text) -> tuple[str, str]:
    against = (
        "the target's distribution p"
        if st.after is None
        else f"the residual left by rejecting node {st.after}, R = norm(max(0, R − D))"
    )
    if st.r is None:
        return f"{y} is rejected without a draw: the draft's distribution has no probability left for it.", ""
    verdict = "below it: **accepted**" if st.accepted else "not below it: **rejected**"
    if st.copied:
        return (
            f"{y} was copied from the context (a point mass, D(y) = 1); judged against {against}, R(y) = {st.r:.4f}: "
            f"accept with probability min(1, R(y)) = {st.ratio:.4f}; the draw u = {st.u:.4f} is {verdict}.",
            "accept if u < min(1, R(y) / 1)",
        )
    return (
        f"The draft proposed {y} with D(y) = {st.d:.4f}; judged against {against}, R(y) = {st.r:.4f}. Accept with "
        f"probability min(1, R(y) / D(y)) = {st.ratio:.4f}; the draw u = {st.u:.4f} is {verdict}.",
        "accept if u < min(1, R(y) / D(y))",
    )


def bars_title(st: Step) -> str:
    if st.greedy:
        return "the target's distribution here (its top is the greedy choice)"
    if st.after is not None:
        return f"R: the residual after node {st.after} was rejected"
    return "R = p: the target's distribution here" if st.kind == JUDGE else "the target's distribution"


def bars_figure(st: Step | None, token_text: Mapping[int, str]) -> go.Figure:
    """The top of the distribution the step reads, its token marked (a placeholder where it is not recorded)."""
    if st is None:
        return placeholder("Step through the round's verification.", BARS_HEIGHT)
    if not st.bars:
        why = "the bonus token's distribution is not kept" if st.kind == BONUS_DRAW else "not recorded (--record-top 0)"
        return placeholder(f"No distribution to draw at this step:\n{why}.", BARS_HEIGHT)
    top = list(st.bars)[:BARS]
    labels = [token_label(token_text, int(t), 12) for t, _ in top]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=[p for _, p in top],
            marker_color=[MARK if int(t) == st.token else OTHER for t, _ in top],
            hovertemplate="%{x}: %{y:.4f}<extra></extra>",
        )
    )
    if st.kind == JUDGE and st.token not in {int(t) for t, _ in top}:
        fig.add_annotation(text=f"{token_label(token_text, st.token, 12)} is below the top {len(top)}", x=1, y=1,
                           xref="paper", yref="paper", showarrow=False, xanchor="right")  # fmt: skip
    fig.update_yaxes(title="probability", rangemode="tozero")
    return base_layout(fig, BARS_HEIGHT, bars_title(st))


def panel(st: Step | None, k: int, n: int, token_text: Mapping[int, str], note: str = "") -> str:
    """The step's words: "Step k of n", the sentence and its formula."""
    if st is None:
        return note or "Press *next step* to walk through the round's verification."
    text, formula = sentence(st, token_text)
    colour = PALETTE["accepted"] if st.accepted else PALETTE["rejected"] if st.accepted is False else "#334155"
    head = f'<span style="color:{colour}">**Step {k} of {n}**</span>'
    return f"{head}: {text}" + (f"\n\n`{formula}`" if formula else "")
