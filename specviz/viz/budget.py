"""The hardware view: what one target forward costs per number of tree tokens on the machine that
measured it, and the tree budget that cost curve makes best. Data: `specviz budget`
(assets/verify_curve.json); nothing here needs a model.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.core.curves import DRAFTER_CURVES, pick_label
from specviz.viz.style import base_layout, placeholder

BUDGET_HEIGHT = 380
GRID = "#eef2f7"
COLORS = {"target": "#1e3a8a", "draft": "#60a5fa", "eagle": "#0d9488", "T=0": "#2563eb", "T=1": "#f59e0b"}
DASHES = {"standalone draft": "dot"}  # the EAGLE drafter's picks solid, the standalone draft's dotted


def budget_figure(curves: dict[str, dict], dtype: str | None = None) -> go.Figure:
    """Left: ms per forward against tokens in it (target and draft). Right: expected tokens/s per tree budget."""
    if not curves:
        return placeholder(
            "No cost curve measured yet.\nRun: specviz budget",
            BUDGET_HEIGHT,
            "Verification cost: no curve measured yet",
        )
    rec = curves.get(dtype) or next(iter(curves.values()))
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("ms per forward, by tokens in it", "expected tokens / s, by tree budget"),
    )
    _cost_curves(fig, rec)
    ar = _budget_curves(fig, rec)
    fig.add_hline(
        y=ar,
        line=dict(color="#94a3b8", dash="dot"),
        row=1,
        col=2,
        annotation_text=f"autoregressive {ar:.1f}",
        annotation_position="bottom right",
    )
    fig.update_xaxes(type="log", title_text="tokens in one forward", gridcolor=GRID, row=1, col=1)
    fig.update_xaxes(title_text="drafted nodes (budget)", gridcolor=GRID, row=1, col=2)
    fig.update_yaxes(rangemode="tozero", gridcolor=GRID)
    top = max([ar] + [r[3] for p in rec.get("picks", {}).values() for r in p["table"]])
    fig.update_yaxes(range=[0, 1.3 * top], row=1, col=2)  # room for the labels
    m = rec.get("machine", {})
    sub = (
        f"{rec.get('dtype')}, {m.get('cpu') or m.get('gpu') or m.get('processor', '')}, "
        f"{m.get('torch_threads', '?')} threads, {rec.get('context')} tokens of context; "
        "expected tokens from the measured acceptance per sibling rank (Sequoia's model)"
    )
    base_layout(fig, BUDGET_HEIGHT, "Verification cost on the machine that measured it", sub, legend_space=44)
    fig.update_layout(margin=dict(t=100))
    return fig


def _cost_curves(fig: go.Figure, rec: dict) -> None:
    """Left panel: ms per forward against the tokens in it, for the target and each drafter measured."""
    for who, label in {"target": "target", **DRAFTER_CURVES}.items():
        if who not in rec:
            continue
        c = rec[who]
        fig.add_trace(
            go.Scatter(
                x=c["n"],
                y=c["ms"],
                mode="lines+markers",
                name=f"{label} forward",
                line=dict(color=COLORS[who]),
                hovertemplate=f"{label}: %{{x}} tokens in %{{y:.1f}} ms<extra></extra>",
            ),
            row=1,
            col=1,
        )


def _budget_curves(fig: go.Figure, rec: dict) -> float:
    """Right panel: expected tokens/s per tree budget for each pick, its best budget marked; returns the
    autoregressive tokens/s the panel's line shows."""
    ar = 1e3 / rec["target"]["ms"][0]
    for i, (key, p) in enumerate(rec.get("picks", {}).items()):
        m, _, _, tps = zip(*p["table"])
        who, t = pick_label(key)
        fig.add_trace(
            go.Scatter(
                x=m,
                y=tps,
                mode="lines",
                name=f"{who}, {t}: best {p['budget']}",
                line=dict(color=COLORS.get(t, "#64748b"), dash=DASHES.get(who, "solid")),
                hovertemplate=f"{who}, {t}: budget %{{x}}: %{{y:.1f}} tokens/s<extra></extra>",
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=[p["budget"]],
                y=[p["tokens_per_s"]],
                mode="markers+text",
                showlegend=False,
                marker=dict(size=11, color=COLORS.get(t, "#64748b")),
                text=[str(p["budget"])],
                textposition=("top center", "bottom center")[i % 2],
                hoverinfo="skip",
            ),
            row=1,
            col=2,
        )
    return ar


def budget_note(record: dict | None, here: bool) -> str:
    """One paragraph on a measurement: where and when it ran, what a target forward costs at 1 and 16 tokens, and
    the budget each pick chose. `here`: measured on this machine (else a shipped record of another)."""
    if not record:
        return "No verify curve yet: *Measure* times the loaded pair on this machine."
    m = record.get("machine") or {}
    where = m.get("gpu") or m.get("cpu") or "an unnamed machine"
    whose = "this machine" if here else f"{where} (the shipped curve of the default pair; *Measure* times yours here)"
    t = dict(zip(record["target"]["n"], record["target"]["ms"]))
    cost = f"a target forward takes {t.get(1, 0):.1f} ms for 1 token and {t.get(16, 0):.1f} ms for 16"
    picks = [
        f"{who}, {temp}: budget {p['budget']} ({p['tokens_per_s']:.1f} tokens/s expected)"
        for key, p in (record.get("picks") or {}).items()
        for who, temp in [pick_label(key)]
    ]
    best = "; best tree budgets: " + "; ".join(picks) if picks else "; no acceptance vector to pick a budget from"
    return f"Measured on {whose}, {record.get('measured', '')}, {record.get('dtype')}: {cost}{best}."
