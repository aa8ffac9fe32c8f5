"""Figures of a served engine's run (`analysis.served`): acceptance length per prompt, acceptance by draft position
with 95 % intervals, the accepted-length histogram, each against specviz's reference or a second run; and the A/B
of two runs. No torch; the dashboard's Engine view and the docs show the same figures."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.analysis.served import (
    SAMPLED_ALPHA,
    RunPair,
    acceptance_length,
    by_position,
    histogram,
    pooled_steps,
    tokens_per_s,
)
from specviz.core.served import REASONS, EngineRun
from specviz.viz.run import GRID
from specviz.viz.style import PALETTE, against_diagonal, base_layout, plotly_text

HEIGHT = 360
ENGINE_COLOR, SPECVIZ_COLOR, B_COLOR = "#f59e0b", PALETTE["accepted"], "#7c3aed"


def _series(run: EngineRun, other: EngineRun | None) -> list[tuple[str, str, list[int], list[int]]]:
    """(name, colour, accepted, drafted) per step series: the engine, then specviz at its steps or run B."""
    out = [(run.label, ENGINE_COLOR, *pooled_steps(run))]
    if other is not None:
        out.append((other.label + " (B)", B_COLOR, *pooled_steps(other)))
    elif any(p.reference for p in run.prompts):
        out.append(("specviz at the same steps", SPECVIZ_COLOR, *pooled_steps(run, reference=True)))
    return out


def lengths_figure(run: EngineRun) -> go.Figure:
    """Acceptance length per prompt: the engine's bar, specviz's count at the same steps as a marker."""
    names = [str(p.question_id if p.question_id is not None else i) for i, p in enumerate(run.prompts)]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=[acceptance_length(p.per_step_accepted or []) for p in run.prompts],
            name=run.label,
            marker_color=ENGINE_COLOR,
            customdata=[[len(p.per_step_accepted or []), tokens_per_s(p)] for p in run.prompts],
            hovertemplate="prompt %{x}: %{y:.2f} over %{customdata[0]} steps, %{customdata[1]:.1f} tokens/s"
            "<extra>engine</extra>",
        )
    )
    if any(p.reference for p in run.prompts):
        fig.add_trace(
            go.Scatter(
                x=names,
                y=[acceptance_length(p.reference.per_step_accepted) if p.reference else None for p in run.prompts],
                mode="markers",
                name="specviz at the same steps",
                marker=dict(color=SPECVIZ_COLOR, size=11, symbol="diamond", line=dict(color="white", width=1)),
                hovertemplate="prompt %{x}: %{y:.2f}<extra>specviz</extra>",
            )
        )
    fig.update_xaxes(title="prompt", type="category", gridcolor=GRID)
    fig.update_yaxes(title="acceptance length", gridcolor=GRID, rangemode="tozero")
    sub = "1 + accepted draft tokens a step, as vLLM counts it"
    return base_layout(fig, HEIGHT, "Acceptance length per prompt", sub, legend_space=50)


def positions_figure(run: EngineRun, other: EngineRun | None = None) -> go.Figure:
    """Per draft position d, the share of steps accepting d or more, with Wilson 95 % intervals."""
    fig = go.Figure()
    for i, (name, color, acc, dr) in enumerate(_series(run, other)):
        rows = by_position(acc, dr)
        fig.add_trace(
            go.Scatter(
                x=[r.position + (i - 0.5) * 0.08 for r in rows],
                y=[r.rate for r in rows],
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[r.hi - (r.rate or 0) for r in rows],
                    arrayminus=[(r.rate or 0) - r.lo for r in rows],
                    color=color,
                ),
                mode="lines+markers",
                name=plotly_text(name),
                line=dict(color=color),
                customdata=[[r.position, r.accepted, r.reached, r.lo, r.hi] for r in rows],
                hovertemplate="position %{customdata[0]}: %{y:.1%} (%{customdata[1]} of %{customdata[2]} steps; "
                "95 % %{customdata[3]:.1%} to %{customdata[4]:.1%})<extra></extra>",
            )
        )
    fig.update_xaxes(title="draft position d", dtick=1, gridcolor=GRID)
    fig.update_yaxes(title="accepted d or more", tickformat=".0%", range=[0, 1], gridcolor=GRID)
    sub = "steps drafting d+ that accepted d+ · 95 % intervals"
    return base_layout(fig, HEIGHT, "Acceptance by draft position", sub, legend_space=50)


def histogram_figure(run: EngineRun, other: EngineRun | None = None) -> go.Figure:
    """How many steps accepted 0, 1, ..., K draft tokens, as shares of each series' steps."""
    fig = go.Figure()
    for name, color, acc, dr in _series(run, other):
        counts = histogram(acc, dr)
        total = sum(counts) or 1
        fig.add_trace(
            go.Bar(
                x=list(range(len(counts))),
                y=[c / total for c in counts],
                name=plotly_text(name),
                marker_color=color,
                customdata=counts,
                hovertemplate="%{x} accepted: %{y:.1%} (%{customdata} steps)<extra></extra>",
            )
        )
    fig.update_xaxes(title="draft tokens accepted in a step", dtick=1, gridcolor=GRID)
    fig.update_yaxes(title="share of steps", tickformat=".0%", gridcolor=GRID)
    fig.update_layout(barmode="group")
    return base_layout(fig, HEIGHT, "Accepted length per step", "the engine's acceptance_histogram, pooled", 50)


def ab_figure(pair: RunPair) -> go.Figure:
    """Per prompt, run B's acceptance length against run A's: above the diagonal B accepts more."""
    fig = against_diagonal(
        [acceptance_length(a.per_step_accepted or []) for a, _ in pair.prompts],
        [acceptance_length(b.per_step_accepted or []) for _, b in pair.prompts],
        B_COLOR,
        [[str(a.question_id), tokens_per_s(a), tokens_per_s(b)] for a, b in pair.prompts],
        "prompt %{customdata[0]}: %{x:.2f} → %{y:.2f}, %{customdata[1]:.1f} → %{customdata[2]:.1f} tokens/s"
        "<extra></extra>",
    )
    fig.update_xaxes(title="A: acceptance length", gridcolor=GRID)
    fig.update_yaxes(title="B: acceptance length", gridcolor=GRID)
    t, s = pair.acceptance_length, pair.tokens_per_s
    lines = [f"B − A, 95 % CI, {s.n} prompts paired:"]
    if t:
        lines.append(f"length {t.mean:+.3f} ({t.lo:+.3f}, {t.hi:+.3f})")
    lines.append(f"tokens/s {s.mean:+.1f} ({s.lo:+.1f}, {s.hi:+.1f})")
    fig.add_annotation(
        text="<br>".join(lines),
        x=0.02,
        y=0.98,
        xref="paper",
        yref="paper",
        showarrow=False,
        align="left",
        xanchor="left",
        yanchor="top",
        font=dict(size=12, color="#334155"),
        bgcolor="rgba(255,255,255,0.8)",
    )  # top left: the points lie along the diagonal
    sub = f"A: {plotly_text(pair.a)} · B: {plotly_text(pair.b)}"
    return base_layout(fig, 420, "A/B: acceptance length per prompt", sub, legend_space=40)


def reasons_html(run: EngineRun) -> str:
    """The reasons found over the run, each with its count and what it means."""
    counts = (run.reference_settings or {}).get("counts") or {}
    if not counts:
        return ""
    rows = "".join(
        f"<tr><td class='n'>{counts[r]}</td><td><code>{r}</code></td><td>{plotly_text(REASONS[r])}</td></tr>"
        for r in REASONS
        if counts.get(r)
    )
    return f"<table><tr><th>steps</th><th>reason</th><th>what it means</th></tr>{rows}</table>"


def sampled_note(run: EngineRun) -> str:
    """At T > 0: whether the engine's acceptance by draft position agrees with the algorithm's at the same steps,
    in one sentence ("" where the run holds no such check)."""
    checks = (run.reference_settings or {}).get("sampled_check") or []
    if not checks:
        return ""
    rates = "; ".join(
        f"position {c['position']}: engine {c['engine'][0]} of {c['engine'][1]}, specviz {c['specviz'][0]} of "
        f"{c['specviz'][1]} (p = {c['p_value']:.2g})"
        for c in checks
    )
    off = [c for c in checks if c["p_value"] < SAMPLED_ALPHA]
    if not off:
        return f"Sampled: the engine accepts as the algorithm does at every draft position ({rates})."
    where = ", ".join(str(c["position"]) for c in off)
    less = all(c["engine"][0] / max(c["engine"][1], 1) < c["specviz"][0] / max(c["specviz"][1], 1) for c in off)
    return (
        f"Sampled: the engine accepts {'less' if less else 'otherwise'} than the algorithm at draft position "
        f"{where} (Fisher's test, p < {SAMPLED_ALPHA:g}): its sampled verification is not the algorithm's ({rates})."
    )
