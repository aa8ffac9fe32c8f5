"""Figures of a prompt set (`analysis.promptset`) and of an A/B of two sets (`analysis.compare`); no torch.

Each function takes the records the analysis computed and returns a plotly figure; `tools.report` lays them out
in an HTML file and the dashboard's Prompt set tab shows the same figures.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specviz.analysis.compare import Comparison
from specviz.analysis.promptset import (
    PROB_EDGES,
    binned,
    context_snippet,
    disagreements,
    entropy_edges,
    entropy_pairs,
    head_calibration,
    margin_pairs,
    position_acceptance,
    prompt_rows,
    q_reliability,
    set_time_split,
    sibling_rank_acceptance,
    worst_prompts,
)
from specviz.analysis.runset import RunSet
from specviz.viz.run import GRID, PHASES
from specviz.viz.style import (
    PALETTE,
    PHASE_COLORS,
    against_diagonal,
    base_layout,
    bin_markers,
    placeholder,
    plotly_text,
    show_token,
)

HEIGHT = 380
CATEGORY_COLORS = ("#2563eb", "#16a34a", "#f59e0b", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#dc2626")
ACCEPT_COLOR = PALETTE["accepted"]


def _rate_axes(fig: go.Figure, x_title: str, x_range=None) -> None:
    fig.update_xaxes(title=x_title, gridcolor=GRID, range=x_range)
    fig.update_yaxes(title="accepted", range=[0, 1.08], tickformat=".0%", gridcolor=GRID)


def position_figure(rs: RunSet) -> go.Figure:
    """Acceptance at each draft depth, over the set and per category."""
    title = "Acceptance per draft position"
    data = position_acceptance(rs)
    if not data["all"]:
        return placeholder("Nothing was drafted in this set (autoregressive decoding).", HEIGHT, title)
    fig = go.Figure()
    for i, (name, rows) in enumerate(data.items()):
        overall = name == "all"
        fig.add_trace(
            go.Scatter(
                x=[d for d, _, _ in rows],
                y=[a / n if n else None for _, n, a in rows],
                mode="lines+markers",
                name="all prompts" if overall else name,
                line=dict(
                    color="#111827" if overall else CATEGORY_COLORS[(i - 1) % len(CATEGORY_COLORS)],
                    width=4 if overall else 1.5,
                ),
                visible=True if overall or len(data) <= 9 else "legendonly",
                customdata=[[n, a] for _, n, a in rows],
                hovertemplate="depth %{x}: %{y:.0%} (%{customdata[1]} of %{customdata[0]} rounds)<extra>"
                + plotly_text(name)
                + "</extra>",
            )
        )
    _rate_axes(fig, "draft position d")
    fig.update_xaxes(dtick=1)
    sub = "P(the accepted path reaches depth d | the draft reached d), pooled over rounds"
    return base_layout(fig, HEIGHT, title, sub, legend_space=60)


def tau_figure(rs: RunSet, worst: int = 5) -> go.Figure:
    """τ per prompt as a strip over a box, the worst prompts named."""
    title = "τ per prompt (tokens per target call)"
    rows = prompt_rows(rs)
    fig = go.Figure()
    fig.add_trace(
        go.Box(
            x=[r.tau for r in rows],
            name="",
            boxpoints="all",
            jitter=0.5,
            pointpos=0,
            marker=dict(color=ACCEPT_COLOR, size=8, opacity=0.8),
            line=dict(color="#64748b"),
            fillcolor="rgba(148,163,184,0.15)",
            customdata=[[r.qid, r.category, r.tokens_per_s, plotly_text(r.prompt[:60])] for r in rows],
            hovertemplate="prompt %{customdata[0]} (%{customdata[1]}): τ %{x:.2f}, %{customdata[2]:.1f} tokens/s"
            "<br>%{customdata[3]}<extra></extra>",
            orientation="h",
            showlegend=False,
        )
    )
    for j, i in enumerate(worst_prompts(rows, worst)):  # staggered, so that prompts with the same τ stay legible
        fig.add_annotation(
            x=rows[i].tau,
            y=0,
            text=plotly_text(rows[i].qid),
            showarrow=True,
            arrowhead=0,
            ay=-24 - 14 * j,
            font_size=11,
        )
    fig.update_xaxes(title="τ", gridcolor=GRID)
    fig.update_yaxes(visible=False)
    sub = f"{len(rows)} prompts · the {min(worst, len(rows))} lowest named by id"
    return base_layout(fig, 300, title, sub)


def time_figure(rs: RunSet) -> go.Figure:
    """Where the set's wall time went."""
    split = set_time_split(rs)
    total = sum(split.values()) or 1.0
    fig = go.Figure()
    for ph in PHASES:
        fig.add_trace(
            go.Bar(
                y=[""],
                x=[split[ph] / 1e3],
                name=ph,
                orientation="h",
                marker_color=PHASE_COLORS[ph],
                text=[f"{ph} {split[ph] / total:.0%}" if split[ph] / total >= 0.06 else ""],
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate=f"{ph}: %{{x:.1f}} s ({split[ph] / total:.0%})<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="seconds, summed over prompts", gridcolor=GRID)
    fig.update_yaxes(visible=False)
    sub = "verify = the target's forward; overhead = cache bookkeeping; other = prefill and glue"
    return base_layout(fig, 300, "Where the time went", sub, legend_space=40)


def q_figure(rs: RunSet) -> go.Figure:
    """Acceptance against the draft's q: does q predict acceptance (DySpec's premise)?"""
    title = "Acceptance against the draft's q"
    rel = q_reliability(rs)
    if not rel["n"]:
        return placeholder("No drafted node was judged in this set.", HEIGHT, title)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#94a3b8", dash="dash"), name="q = acceptance")
    )
    fig.add_trace(bin_markers(rel["bins"], "this set", ACCEPT_COLOR, "q", "judged nodes"))
    _rate_axes(fig, "draft probability q of the drafted token", [0, 1])
    sub = f"{rel['n']} judged nodes · AUC of q {rel['auc']:.2f}" if rel["auc"] is not None else f"{rel['n']} nodes"
    sub += " · on the diagonal, q is a calibrated bet"
    return base_layout(fig, HEIGHT, title, sub, legend_space=40)


def target_figure(rs: RunSet) -> go.Figure:
    """Acceptance against the target's entropy and its top-1 margin where it was judged."""
    title = "Acceptance against the target's certainty"
    ent, mar = entropy_pairs(rs), margin_pairs(rs)
    if not ent and not mar:
        return placeholder(
            "These traces hold no record of the target's distributions\n(made with --record-top 0, or by an "
            "older specviz).",
            HEIGHT,
            title,
        )
    fig = go.Figure()
    if mar:
        fig.add_trace(bin_markers(binned(mar, PROB_EDGES), "top-1 margin (p1 - p2)", ACCEPT_COLOR, "margin", "nodes"))
    if ent:
        edges = entropy_edges(ent)
        rows = binned(ent, edges)
        top = edges[-1]
        scaled = [(lo / top, hi / top, n, m / top, r) for lo, hi, n, m, r in rows]  # shares the 0-1 axis
        fig.add_trace(
            bin_markers(scaled, f"entropy (nats, 0–{top:g} scaled to 0–1)", "#f59e0b", "entropy ÷ max", "nodes")
        )
    _rate_axes(fig, "top-1 margin, or entropy ÷ the largest seen", [0, 1])
    sub = "a flat target (low margin, high entropy) is where any draft is rejected"
    return base_layout(fig, HEIGHT, title, sub, legend_space=60)


def rank_figure(rs: RunSet) -> go.Figure:
    """Acceptance by sibling rank: the vector Sequoia's tree is built from."""
    title = "Acceptance by sibling rank"
    rows = sibling_rank_acceptance(rs)
    if len(rows) < 2:
        return placeholder("A chain has one candidate per position: sibling ranks need a tree method.", 300, title)
    fig = go.Figure(
        go.Bar(
            x=[r for r, _, _ in rows],
            y=[a / n for _, n, a in rows],
            marker_color=ACCEPT_COLOR,
            text=[f"{a}/{n}" for _, n, a in rows],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="rank %{x}: %{y:.0%} accepted when judged (%{text})<extra></extra>",
        )
    )
    _rate_axes(fig, "sibling rank r (the r-th child drawn)")
    fig.update_xaxes(dtick=1)
    return base_layout(fig, 300, title, "P(a parent's r-th child is accepted | it was judged)")


def head_figure(rs: RunSet) -> go.Figure:
    """SpecDec++'s head over the whole set."""
    title = "Stop head calibration over the set"
    cal = head_calibration(rs)
    if not cal or not cal["n"]:
        return placeholder("Only SpecDec++ runs have an acceptance head to check.", 300, title)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#94a3b8", dash="dash"), name="calibrated")
    )
    fig.add_trace(bin_markers(cal["bins"], "this set", ACCEPT_COLOR, "predicted", "candidates"))
    _rate_axes(fig, "predicted P(accept)", [0, 1])
    sub = f"{cal['n']} candidates judged"
    sub += f" · AUC {cal['auc']:.2f}" if cal["auc"] is not None else ""
    sub += f" · Brier {cal['brier']:.3f}" if cal["brier"] is not None else ""
    return base_layout(fig, HEIGHT, title, sub, legend_space=40)


def set_figures(rs: RunSet) -> dict[str, go.Figure]:
    """Every figure of one set, by name, in reading order."""
    figs = {
        "positions": position_figure(rs),
        "tau": tau_figure(rs),
        "time": time_figure(rs),
        "q": q_figure(rs),
        "target": target_figure(rs),
        "ranks": rank_figure(rs),
    }
    if rs.method == "specdecpp":
        figs["head"] = head_figure(rs)
    return figs


def ab_figure(cmp: Comparison) -> go.Figure:
    """Per prompt, B's τ against A's: above the diagonal B is ahead."""
    title = f"τ per prompt: {cmp.b} against {cmp.a}"
    fig = against_diagonal(
        [p.tau[0] for p in cmp.pairs],
        [p.tau[1] for p in cmp.pairs],
        ACCEPT_COLOR,
        [[p.qid, p.category, *p.tokens_per_s] for p in cmp.pairs],
        "prompt %{customdata[0]} (%{customdata[1]}): τ %{x:.2f} → %{y:.2f}, "
        "%{customdata[2]:.1f} → %{customdata[3]:.1f} tokens/s<extra></extra>",
    )
    fig.update_xaxes(title=f"τ, A = {cmp.a}", gridcolor=GRID)
    fig.update_yaxes(title=f"τ, B = {cmp.b}", gridcolor=GRID)
    t = cmp.tau
    sub = f"mean Δτ {t.mean:+.2f} (95 % CI {t.lo:+.2f} to {t.hi:+.2f}, paired bootstrap over {t.n} prompts)"
    return base_layout(fig, 420, plotly_text(title), sub, legend_space=40)


# -- tables (HTML) -------------------------------------------------------------------------------------


def token_chip(rs: RunSet, t: int) -> str:
    """A token as the set's traces label it, visible whitespace, escaped."""
    text = next((r.trace.token_text[t] for r in rs.runs if t in r.trace.token_text), f"<{t}>")
    return f'<span class="sv-tok">{show_token(text, 24)}</span>'


def disagreement_html(rs: RunSet, top: int = 20, examples: int = 3) -> str:
    """The most frequent (drafted -> target) pairs as an HTML table, each with a few places in context."""
    runs = {r.qid: r for r in rs.runs}
    rows = []
    for d in disagreements(rs, top, examples):
        ex = [
            f'<span class="sv-ctx">…{html.escape(context_snippet(runs[qid].trace, pos))}</span> ⟨{html.escape(qid)}⟩'
            for qid, _, pos in d.examples
        ]
        rows.append(
            f'<tr><td class="n">{d.count}</td><td>{token_chip(rs, d.drafted)}</td><td>{token_chip(rs, d.target)}</td>'
            f"<td>{'<br>'.join(ex)}</td></tr>"
        )
    if not rows:
        return "<p>No round ended on a rejection in this set.</p>"
    return (
        '<table class="sv-table"><tr><th>count</th><th>drafted</th><th>target\'s</th><th>in context (prompt id)</th>'
        "</tr>" + "".join(rows) + "</table>"
    )
