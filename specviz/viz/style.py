"""Shared look of every specviz drawing: palette, token display, placeholders, output spans and metric cards.

Pure functions from traces to plotly figures, (text, label) spans for ``gr.HighlightedText`` and
HTML strings. Imports neither torch, transformers nor gradio (a test checks). The round view lives
in `specviz.viz.tree`, the run-level views in `specviz.viz.run`, the hardware view in `specviz.viz.budget`.

Every string that comes from a trace (token text, method, stop reason) is HTML-escaped before it
reaches plotly or HTML: traces can be uploaded by anyone.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import plotly.graph_objects as go

from specviz.analysis.metrics import (
    BONUS_TOKEN,
    CORRECTED,
    DRAFTED,
    TARGET,
    Summary,
    token_origins,
)
from specviz.core.trace import ACCEPTED, REJECTED, ROOT, UNVISITED, GenerationTrace
from specviz.methods.catalog import CATALOG

# One colour per way a token can appear. Tree statuses and output-token origins share hues:
# green = the target agreed with the draft, blue = bonus, orange = resampled correction.
PALETTE = {
    ROOT: "#334155",
    ACCEPTED: "#16a34a",
    REJECTED: "#dc2626",
    UNVISITED: "#cbd5e1",
    BONUS_TOKEN: "#2563eb",
    CORRECTED: "#f59e0b",
    TARGET: "#7c3aed",
}
COPY_BORDER = "#06b6d4"  # the outline of a node copied from the context (prompt lookup), any status
SPAN_COLORS = {
    DRAFTED: PALETTE[ACCEPTED],
    BONUS_TOKEN: PALETTE[BONUS_TOKEN],
    CORRECTED: PALETTE[CORRECTED],
    TARGET: PALETTE[TARGET],
}
LABELS = {
    ROOT: "last committed token",
    ACCEPTED: "accepted draft token",
    REJECTED: "rejected draft token",
    UNVISITED: "not reached",
    BONUS_TOKEN: "bonus (target, after a full accept)",
    CORRECTED: "resampled correction",
    TARGET: "target token (no draft)",
}
PHASE_COLORS = {"draft": "#60a5fa", "verify": "#1e3a8a", "overhead": "#94a3b8", "other": "#e2e8f0"}
FONT = dict(family="Inter, system-ui, -apple-system, Segoe UI, sans-serif", size=13, color="#1f2937")
MAX_LABEL = 12
CORRECTION = "correction"  # the node name of a round's extra token (bonus or resampled) in the tree view
TITLE_MARGIN = 72  # px above the plot for a title and a one-line subtitle


def counted(xs, noun: str) -> str:
    """ "1 token", "3 tokens": a count of `xs` with its noun."""
    return f"{len(xs)} {noun}{'' if len(xs) == 1 else 's'}"


def show_token(text: str, limit: int = MAX_LABEL) -> str:
    """A token as a readable chip label: visible spaces and newlines, shortened, escaped once for plotly's text
    (only &, < and >: plotly draws entities such as &quot; as they are written)."""
    s = text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥").replace("\r", "")
    if not s:
        s = "∅"
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s, quote=False)


def token_label(token_text: Mapping[int, str], tok: int, limit: int = MAX_LABEL) -> str:
    return show_token(token_text.get(tok, f"<{tok}>"), limit)


def method_name(method: str) -> str:
    return html.escape(CATALOG[method].short if method in CATALOG else method, quote=False)


def base_layout(
    fig: go.Figure, height: int, title: str | None = None, subtitle: str | None = None, legend_space: int = 0
) -> go.Figure:
    """The common frame: white background, the house font, margins that fit the labels.

    The legend sits just under the plot, or, when `legend_space` > 0, at the bottom of the figure in a
    band of that many pixels (clear of axis titles).
    """
    legend = dict(orientation="h", xanchor="left", x=0, font_size=12, yanchor="top", y=-0.04)
    if legend_space:
        legend.update(yref="container", yanchor="bottom", y=0)
    fig.update_layout(
        template="none",
        height=height,
        margin=dict(l=16, r=16, t=TITLE_MARGIN if title else 16, b=max(16, legend_space)),
        font=FONT,
        paper_bgcolor="white",
        plot_bgcolor="white",
        hoverlabel=dict(font_size=13, align="left"),
        legend=legend,
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if title:
        fig.update_layout(
            title=dict(
                text=title,
                x=0.01,
                xanchor="left",
                font_size=16,
                subtitle=dict(text=subtitle or "", font=dict(size=12, color="#64748b")),
            )
        )
    return fig


def bin_markers(
    rows, name: str, color: str, x_label: str, noun: str, counts: bool = False, size: tuple[int, int] = (8, 22)
) -> go.Scatter:
    """A reliability diagram's points: one marker per bin of [(lo, hi, n, mean x, accepted rate)] at (mean x, rate),
    its area growing with n; `counts` writes n above each marker, else a thin line joins them."""
    top = max(n for _, _, n, _, _ in rows)
    return go.Scatter(
        x=[m for *_, m, _ in rows],
        y=[r for *_, r in rows],
        mode="markers+text" if counts else "markers+lines",
        name=name,
        line=dict(color=color, width=1),
        marker=dict(color=color, size=[size[0] + size[1] * (n / top) ** 0.5 for _, _, n, _, _ in rows]),
        text=[str(n) for _, _, n, _, _ in rows] if counts else None,
        textposition="top center",
        cliponaxis=False,
        customdata=[[lo, hi, n] for lo, hi, n, _, _ in rows],
        hovertemplate=f"{x_label} %{{customdata[0]:.2f}}–%{{customdata[1]:.2f}} (mean %{{x:.2f}}): %{{y:.0%}} of "
        f"%{{customdata[2]}} {noun} accepted<extra></extra>",
    )


def plotly_text(text: object) -> str:
    """`text` escaped once for plotly's titles, labels and hover text (only &, < and >)."""
    return html.escape(str(text), quote=False)


def against_diagonal(xs, ys, color: str, customdata, hovertemplate: str) -> go.Figure:
    """An A/B scatter: B against A per prompt, over the line where they are equal (from 1, the least either can be)."""
    top = max([v for v in (*xs, *ys) if v is not None] + [1.0]) * 1.05
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[1, top], y=[1, top], mode="lines", line=dict(color="#94a3b8", dash="dash"), name="equal")
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            name="prompt",
            marker=dict(color=color, size=9),
            customdata=customdata,
            hovertemplate=hovertemplate,
        )
    )
    return fig


def placeholder(message: str, height: int = 360, title: str | None = None) -> go.Figure:
    """An empty figure that says, in words, what would be here and how to get it."""
    fig = go.Figure()
    fig.add_annotation(
        text=html.escape(message, quote=False).replace("\n", "<br>"),
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=14, color="#64748b"),
        align="center",
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height, title)


def legend_entry(fig: go.Figure, name: str, color: str, symbol: str = "square", border: str | None = None) -> None:
    """A legend-only item (the real marks are chips or bars drawn elsewhere)."""
    line = dict(color=border, width=3) if border else None
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            hoverinfo="skip",
            marker=dict(color=color, size=12, symbol=symbol, line=line),
        )
    )


def token_spans(trace: GenerationTrace) -> list[tuple[str, str]]:
    """(token text, origin) per output token, for ``gr.HighlightedText`` with ``SPAN_COLORS``: the text each token
    adds to the output (a token that ends inside a character adds "" and the next one carries it); older traces
    without pieces show each id's own label."""
    origins = token_origins(trace)
    if trace.pieces is not None and len(trace.pieces) == len(origins):
        return [(piece, kind) for piece, (_, kind, _) in zip(trace.pieces, origins)]
    return [(trace.token_text.get(t, f"<{t}>"), kind) for t, kind, _ in origins]


def span_rounds(trace: GenerationTrace) -> list[int]:
    """The round index of each span of `token_spans` (clicking a token selects its round)."""
    return [r for _, _, r in token_origins(trace)]


def span_nodes(trace: GenerationTrace) -> list[tuple[int, int | str]]:
    """(round index, tree node) of each span of `token_spans`: an accepted draft token's node, or "correction" for
    the round's extra token (clicking a token opens its round and its node)."""
    return [
        (r.index, r.accepted_path[j] if j < r.n_accepted else CORRECTION)
        for r in trace.rounds
        for j in range(len(r.emitted))
    ]


def _card(value: str, label: str, hint: str = "") -> str:
    tip = f' title="{html.escape(hint)}"' if hint else ""
    return f'<div class="sv-card"{tip}><div class="sv-value">{value}</div><div class="sv-label">{label}</div></div>'


def summary_cards(s: Summary, speedup: float | None, method_label: str) -> str:
    """The headline numbers of a run as a row of HTML cards."""
    acc = "–" if s.acceptance is None else f"{100 * s.acceptance:.0f}%"
    if speedup is None:
        sp = "–"
    else:
        sp = f"{speedup:.2f}×"
    cards = [
        _card(
            f"{s.tau:.2f}", "tokens / target call (τ)", "emitted tokens per verification round; 1.0 = autoregressive"
        ),
        _card(acc, "draft tokens accepted", "accepted / drafted tokens over the run"),
        _card(f"{s.tokens_per_s:.1f}", "tokens / s", "wall clock, prefill included"),
        _card(sp, "speed vs autoregressive", "tokens/s of this run over plain target-only decoding of the same prompt"),
        _card(f"{s.tokens}", f"tokens in {s.rounds} rounds"),
    ]
    head = f'<div class="sv-method">{html.escape(method_label)}</div>'
    return f'<div class="sv-cards">{head}{"".join(cards)}</div>'
