"""Views of a whole run: speedup and time split, acceptance per draft position, accepted-length
histogram, the SpecDec++ head's calibration, and the race of several methods on one prompt. Definitions of the
numbers: `specviz.analysis.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.analysis.metrics import (
    acceptance_by_position,
    accepted_length_histogram,
    auc,
    brier,
    calibration_bins,
    head_predictions,
    loop_speedup,
    recorded_head,
    speedup,
    time_split,
    tokens_per_call,
    tokens_per_second,
)
from specviz.core.trace import ACCEPTED, GenerationTrace
from specviz.viz.style import (
    PALETTE,
    PHASE_COLORS,
    base_layout,
    bin_markers,
    method_name,
    placeholder,
)

RUN_HEIGHT = 360
RACE_HEIGHT = 500
RACE_COLORS = ("#2563eb", "#16a34a", "#f59e0b", "#7c3aed")
PHASES = ("draft", "verify", "overhead", "other")
PHASE_LABELS = {"draft": "draft", "verify": "verify (target)", "overhead": "overhead", "other": "prefill + other"}
GRID = "#eef2f7"


def speedup_figure(trace: GenerationTrace, baseline: GenerationTrace | None) -> go.Figure:
    """Left: tokens/s of the run against autoregressive decoding. Right: where the time went."""
    runs = [trace] + ([baseline] if baseline is not None and baseline is not trace else [])
    names = [method_name(t.method) for t in runs]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.38, 0.62],
        horizontal_spacing=0.12,
        subplot_titles=("tokens / s", "seconds per phase"),
    )
    tps = [tokens_per_second(t) for t in runs]
    fig.add_trace(
        go.Bar(
            x=names,
            y=tps,
            marker_color=["#2563eb", "#94a3b8"][: len(runs)],
            showlegend=False,
            text=[f"{v:.1f}" for v in tps],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}: %{y:.2f} tokens/s<extra></extra>",
        ),
        row=1,
        col=1,
    )
    splits = [time_split(t) for t in runs]
    for ph in PHASES:
        vals = [getattr(s, f"{ph}_ms") / 1e3 for s in splits]
        fig.add_trace(
            go.Bar(
                y=names,
                x=vals,
                orientation="h",
                name=PHASE_LABELS[ph],
                marker_color=PHASE_COLORS[ph],
                hovertemplate=f"{PHASE_LABELS[ph]}: %{{x:.2f}} s<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(gridcolor=GRID, rangemode="tozero", row=1, col=1)
    fig.update_xaxes(gridcolor=GRID, row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    sp = speedup(trace, baseline) if baseline is not None else None
    tau = tokens_per_call(trace.rounds)
    if sp is None:
        title, sub = "Speed", f"τ = {tau:.2f} tokens per target call · autoregressive baseline not measured"
    else:
        title = f"{sp:.2f}× faster than autoregressive" if sp >= 1 else f"{1 / sp:.2f}× slower than autoregressive"
        loop = loop_speedup(trace, baseline)
        sub = (
            f"τ = {tau:.2f} tokens per target call (autoregressive: 1.00) · "
            + (f"decode loop alone {loop:.2f}× (no prefill) · " if loop else "")
            + "same prompt, sampling and length"
        )
    base_layout(fig, RUN_HEIGHT, title, sub, legend_space=44)
    fig.update_layout(margin=dict(t=100))
    return fig


def position_figure(trace: GenerationTrace) -> go.Figure:
    """Acceptance at each draft depth: of the rounds that drafted that far, how many accepted that far."""
    rows = acceptance_by_position(trace.rounds)
    if not rows:
        return placeholder(
            "Nothing was drafted in this run\n(autoregressive decoding).", RUN_HEIGHT, "Acceptance per draft position"
        )
    d = [r[0] for r in rows]
    rate = [a / n if n else 0.0 for _, n, a in rows]
    fig = go.Figure(
        go.Bar(
            x=d,
            y=rate,
            marker_color=PALETTE[ACCEPTED],
            text=[f"{a}/{n}" for _, n, a in rows],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="position %{x}: %{y:.0%} accepted (%{text} rounds)<extra></extra>",
        )
    )
    fig.update_xaxes(title="draft position (depth)", tickmode="linear", dtick=1)
    fig.update_yaxes(title="accepted", range=[0, 1.12], tickformat=".0%", gridcolor=GRID)
    return base_layout(
        fig,
        RUN_HEIGHT,
        "Acceptance per draft position",
        "where do drafts die? rounds accepting ≥ d tokens / rounds drafting ≥ d",
    )


def histogram_figure(trace: GenerationTrace) -> go.Figure:
    """How many draft tokens each round accepted."""
    if not trace.rounds:
        return placeholder("No rounds yet.", RUN_HEIGHT, "Accepted length per round")
    counts = accepted_length_histogram(trace.rounds)
    fig = go.Figure(
        go.Bar(
            x=list(range(len(counts))),
            y=counts,
            marker_color="#2563eb",
            text=counts,
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y} rounds accepted %{x} draft tokens<extra></extra>",
        )
    )
    fig.update_xaxes(title="draft tokens accepted in the round", tickmode="linear", dtick=1)
    fig.update_yaxes(title="rounds", gridcolor=GRID, rangemode="tozero")
    mean = sum(r.n_accepted for r in trace.rounds) / len(trace.rounds)
    return base_layout(
        fig, RUN_HEIGHT, "Accepted length per round", f"mean {mean:.2f} accepted, plus one target token per round"
    )


def calibration_figure(trace: GenerationTrace) -> go.Figure:
    """SpecDec++: the head's predicted P(accept) against how often those candidates were accepted (a reliability
    diagram over the run's judged candidates), with the diagonal of a calibrated head and, where the trace records
    the head's reject weight w, the curve P(accept) = w p / (1 - p + w p) that its weighted loss aims for."""
    title = "Stop head: predicted against realised acceptance"
    pairs = head_predictions(trace) if trace.method == "specdecpp" else []
    if not pairs:
        return placeholder(
            "Only SpecDec++ runs have an acceptance head to check:\n"
            "pick SpecDec++ and press Run, or load a SpecDec++ trace.",
            RUN_HEIGHT,
            title,
        )
    rows = calibration_bins(pairs)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            line=dict(color="#94a3b8", dash="dash"),
            name="calibrated",
            hoverinfo="skip",
        )
    )
    head = recorded_head(trace)
    w = head.get("reject_weight")
    if w:
        ps = [i / 50 for i in range(51)]
        fig.add_trace(
            go.Scatter(
                x=ps,
                y=[w * p / (1 - p + w * p) for p in ps],
                mode="lines",
                hoverinfo="skip",
                line=dict(color="#f59e0b", dash="dot"),
                name=f"what reject weight {w:g} aims for",
            )
        )
    fig.add_trace(bin_markers(rows, "this run", PALETTE[ACCEPTED], "predicted", "candidates", True, (10, 26)))
    fig.update_xaxes(title="predicted P(accept)", range=[0, 1], gridcolor=GRID)
    fig.update_yaxes(title="accepted", range=[0, 1.08], tickformat=".0%", gridcolor=GRID)
    a, b = auc(pairs), brier(pairs)
    trained = head.get("heldout_auc")
    sub = f"{len(pairs)} candidates judged · AUC {a:.2f}" if a is not None else f"{len(pairs)} candidates judged"
    sub += f" (held-out at training {trained:.2f})" if trained else ""
    sub += f" · Brier {b:.3f} · marker size: candidates in the bin"
    return base_layout(fig, RUN_HEIGHT, title, sub, legend_space=40)


def round_spans(trace: GenerationTrace) -> list[tuple[float, float, float, int]]:
    """[(start ms, draft ms, verify+overhead ms, tokens)] per round on the run's own clock.

    Rounds carry durations, not timestamps; time the rounds do not account for (mostly prefill)
    is put before the first round.
    """
    busy = [r.draft_ms + r.verify_ms + r.overhead_ms for r in trace.rounds]
    t = max(0.0, trace.total_ms - sum(busy))
    out = []
    for r, b in zip(trace.rounds, busy):
        out.append((t, r.draft_ms, r.verify_ms + r.overhead_ms, len(r.emitted)))
        t += b
    return out


def race_figure(traces: Sequence[GenerationTrace]) -> go.Figure:
    """Methods on the same prompt: tokens over time (top) and one lane of rounds per method (bottom)."""
    if not traces:
        return placeholder(
            "Pick 2–4 methods and press “Race”: they decode the same prompt\n"
            "one after another, and their timelines are drawn side by side.",
            RACE_HEIGHT,
            "Race",
        )
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
    names = [method_name(t.method) for t in traces]
    for i, (t, name) in enumerate(zip(traces, names)):
        color = RACE_COLORS[i % len(RACE_COLORS)]
        spans = round_spans(t)
        xs, ys, n = [0.0], [0], 0
        for start, dm, vm, k in spans:
            n += k
            xs.append((start + dm + vm) / 1e3)
            ys.append(n)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line_shape="hv",
                name=name,
                line=dict(color=color, width=3),
                hovertemplate=f"{name}<br>%{{y}} tokens at %{{x:.2f}} s<extra></extra>",
            ),
            row=1,
            col=1,
        )
        for off, part in enumerate(("draft", "verify")):
            fig.add_trace(
                go.Bar(
                    y=[name] * len(spans),
                    x=[s[1 + off] / 1e3 for s in spans],
                    base=[(s[0] + (s[1] if off else 0)) / 1e3 for s in spans],
                    orientation="h",
                    showlegend=False,
                    marker=dict(
                        color=color, opacity=0.4 if part == "draft" else 1.0, line=dict(color="white", width=0.5)
                    ),
                    customdata=[[j, s[3]] for j, s in enumerate(spans)],
                    hovertemplate=f"{name} round %{{customdata[0]}}: {part} %{{x:.2f}} s, "
                    "+%{customdata[1]} tokens<extra></extra>",
                ),
                row=2,
                col=1,
            )
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(title="tokens", gridcolor=GRID, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_xaxes(gridcolor=GRID, row=1, col=1)
    fig.update_xaxes(title="seconds since start (each method timed alone)", gridcolor=GRID, row=2, col=1)
    fastest = max(traces, key=tokens_per_second)
    sub = "lanes: one bar per round, light = drafting, dark = verification · tokens/s: " + ", ".join(
        f"{n} {tokens_per_second(t):.1f}" for t, n in zip(traces, names)
    )
    return base_layout(fig, RACE_HEIGHT, f"Race: {method_name(fastest.method)} is fastest", sub, legend_space=84)
