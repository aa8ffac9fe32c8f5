"""The panel beside the tree, one purpose for each method: SpecDec++'s stop decision (`viz.stop`); for a chain,
the draft's q of each drafted token against what the target accepted, with the run's acceptance at each position;
for a tree, the accepted length the draft expected of each round's tree (from q) against what was accepted."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.analysis.metrics import acceptance_by_position, expected_accepted
from specviz.core.trace import ACCEPTED, REJECTED, GenerationTrace
from specviz.methods.catalog import TREES, label
from specviz.viz.stop import STOP_HEIGHT, stop_figure
from specviz.viz.style import PALETTE, base_layout, legend_entry, placeholder, token_label

CHAINS = ("chain", "heuristic", "lookup")  # SpecDec++ drafts a chain too: its panel is the stop chart


def side_figure(trace: GenerationTrace, i: int) -> go.Figure:
    """The panel for round i of `trace`, by its method."""
    rnd = trace.rounds[i]
    if trace.method == "specdecpp":
        return stop_figure(rnd, trace.token_text)
    if trace.method in TREES:
        return tree_expectation(trace, i)
    if trace.method in CHAINS:
        return chain_positions(trace, i)
    return placeholder(
        f"{label(trace.method)}: one target forward a token,\nnothing drafted, nothing to judge.", STOP_HEIGHT
    )


UPRIGHT_LABELS = 5  # bars a chain panel labels upright; more stand their labels on end


def chain_positions(trace: GenerationTrace, i: int) -> go.Figure:
    """Round i's drafted tokens by position: the draft's q of each (bars coloured by the verdict) and, over the
    whole run, the share of rounds that accepted each position (a line)."""
    rnd = trace.rounds[i]
    if len(rnd.tree) == 1:
        return placeholder(f"Round {rnd.index} drafted nothing:\nthe target's token alone.", STOP_HEIGHT)
    nodes = list(range(1, len(rnd.tree)))
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=nodes,
            y=[rnd.tree.q[n] for n in nodes],
            marker_color=[PALETTE.get(rnd.status[n], PALETTE["unvisited"]) for n in nodes],
            text=[token_label(trace.token_text, rnd.tree.tokens[n], 8) for n in nodes],
            textposition="outside",
            textangle=0 if len(nodes) <= UPRIGHT_LABELS else -90,  # many narrow bars: labels stand up
            cliponaxis=False,
            hovertemplate="position %{x}: q = %{y:.3f}<extra></extra>",
            showlegend=False,
        )
    )
    rates = [(d, a / r) for d, r, a in acceptance_by_position(trace.rounds) if r]
    fig.add_trace(
        go.Scatter(
            x=[d for d, _ in rates],
            y=[x for _, x in rates],
            mode="lines+markers",
            name="accepted at this position, whole run",
            line=dict(color="#334155", dash="dot"),
            hovertemplate="position %{x}: accepted in %{y:.0%} of the rounds that drafted it<extra></extra>",
        )
    )
    for status in (ACCEPTED, REJECTED):
        legend_entry(fig, f"{status} this round", PALETTE[status])
    fig.update_xaxes(title="draft position", dtick=1)
    fig.update_yaxes(title="draft q / share accepted", range=[0, 1.15])
    sub = "bars: q by verdict · line: the whole run"  # fits the narrow panel
    fig.update_layout(uniformtext=dict(minsize=9, mode="hide"))  # a label that cannot fit is left out, not overlaid
    return base_layout(fig, STOP_HEIGHT, f"Round {rnd.index}: the draft's q by position", sub, legend_space=80)


def tree_expectation(trace: GenerationTrace, i: int) -> go.Figure:
    """Every round: the accepted length the draft expected of its tree (sum over nodes of q along the path) against
    what the target accepted; round i marked."""
    xs = [r.index for r in trace.rounds]
    expected = [expected_accepted(r) for r in trace.rounds]
    got = [r.n_accepted for r in trace.rounds]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs, y=expected, mode="lines", name="expected from q", line=dict(color="#60a5fa"),
            hovertemplate="round %{x}: the draft expected %{y:.2f} accepted<extra></extra>",
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=xs, y=got, mode="markers", name="accepted", marker=dict(color=PALETTE[ACCEPTED], size=6),
            hovertemplate="round %{x}: %{y} accepted<extra></extra>",
        )
    )  # fmt: skip
    rnd = trace.rounds[i]
    fig.add_trace(
        go.Scatter(
            x=[rnd.index], y=[rnd.n_accepted], mode="markers", name="this round",
            marker=dict(color="rgba(0,0,0,0)", size=14, line=dict(color="#f59e0b", width=3)), hoverinfo="skip",
        )
    )  # fmt: skip
    fig.update_xaxes(title="round")
    fig.update_yaxes(title="draft tokens accepted", rangemode="tozero")
    sub = (  # fits the narrow panel
        f"this round {expected[i]:.2f} expected, {got[i]} accepted · "
        f"run {sum(expected) / len(xs):.2f} vs {sum(got) / len(xs):.2f}"
    )
    return base_layout(fig, STOP_HEIGHT, "Expected from q, and accepted", sub, legend_space=80)
