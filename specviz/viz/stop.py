"""SpecDec++'s stop decision for one round: the acceptance head's predicted P(accept) per draft step, the
cumulative probability of at least one rejection, and the threshold h it is stopped at.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import plotly.graph_objects as go

from specviz.analysis.metrics import BONUS_TOKEN
from specviz.core.trace import ACCEPTED, REJECTED, UNVISITED, RoundTrace
from specviz.viz.style import LABELS, PALETTE, base_layout, legend_entry, placeholder, token_label

STOP_HEIGHT = 380


def stop_probabilities(rnd: RoundTrace) -> list[float] | None:
    """P(at least one rejection among steps 1..k) per draft step k: stored, or 1 - prod(accept_probs)."""
    if rnd.stop_probs is not None:
        return list(rnd.stop_probs)
    if rnd.accept_probs is None:
        return None
    out, keep = [], 1.0
    for a in rnd.accept_probs:
        keep *= a
        out.append(1.0 - keep)
    return out


def stop_figure(rnd: RoundTrace, token_text: Mapping[int, str]) -> go.Figure:
    """SpecDec++: predicted acceptance per draft step, the cumulative stop probability and the threshold h."""
    stops = stop_probabilities(rnd)
    if stops is None and rnd.copied and rnd.threshold is None and len(rnd.copied) == rnd.n_drafted:
        return placeholder(
            f"Round {rnd.index} copied {len(rnd.copied)} tokens from the context\n(prompt lookup): "
            "no draft model ran,\nso no stop decision was needed.",
            STOP_HEIGHT,
            "Stop decision (SpecDec++)",
        )
    if stops is None:
        return placeholder(
            "Choose SpecDec++ to see its stop decision:\nper draft step, the acceptance head\n"
            "predicts whether the target will accept;\ndrafting stops once P(at least one\n"
            "rejection) crosses the threshold h.",
            STOP_HEIGHT,
            "Stop decision (SpecDec++)",
        )
    steps = list(range(1, len(stops) + 1))
    fig = go.Figure()
    if rnd.accept_probs is not None:
        _accept_bars(fig, rnd, steps, token_text)
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=stops,
            mode="lines+markers",
            name="P(at least one rejection)",
            line=dict(color="#111827", width=3),
            marker=dict(size=8),
            hovertemplate="step %{x}: P(≥1 rejection) = %{y:.3f}<extra></extra>",
        )
    )
    if rnd.threshold is not None:
        fig.add_hline(
            y=rnd.threshold,
            line=dict(color=PALETTE[REJECTED], dash="dash", width=2),
            annotation_text=f"h = {rnd.threshold:g}",
            annotation_position="top left",
        )
    if rnd.hindsight_k is not None:
        fig.add_vline(
            x=rnd.hindsight_k + 0.5,
            line=dict(color=PALETTE[BONUS_TOKEN], dash="dot", width=2),
            annotation_text=f"best K in hindsight: {rnd.hindsight_k}",
            annotation_position="top right",
        )
    fig.update_xaxes(title="draft step k", tickmode="linear", dtick=1, range=[0.4, len(steps) + 0.6])
    fig.update_yaxes(range=[0, 1.05], title="bars: predicted P(accept)", gridcolor="#eef2f7")
    reason = html.escape(rnd.stop_reason, quote=False) if rnd.stop_reason else "–"
    sub = f"drafted {rnd.n_drafted}, stopped by {reason}; {rnd.n_accepted} accepted"  # fits the narrow panel
    return base_layout(fig, STOP_HEIGHT, f"Round {rnd.index}: when to stop drafting", sub, legend_space=100)


def _accept_bars(fig: go.Figure, rnd: RoundTrace, steps: list[int], token_text: Mapping[int, str]) -> None:
    """The head's predicted P(accept) per draft step as bars, coloured by what the target did with the token."""
    status = [rnd.status[k] if k < len(rnd.status) else UNVISITED for k in steps]
    toks = [token_label(token_text, rnd.tree.tokens[k]) if k < len(rnd.tree) else "" for k in steps]
    fig.add_trace(
        go.Bar(
            x=steps,
            y=list(rnd.accept_probs),
            marker_color=[PALETTE[s] for s in status],
            showlegend=False,
            text=toks,
            textposition="inside",
            insidetextanchor="start",
            opacity=0.85,
            hovertext=[
                f"step {k}: {t}<br>predicted P(accept) = {a:.3f}<br>realised: {LABELS[s]}"
                for k, t, a, s in zip(steps, toks, rnd.accept_probs, status)
            ],
            hoverinfo="text",
        )
    )
    for kind, name in ((ACCEPTED, "accepted by the target"), (REJECTED, "rejected"), (UNVISITED, "not reached")):
        legend_entry(fig, name, PALETTE[kind])
