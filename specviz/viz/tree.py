"""The view of one round: its draft tree, and SpecDec++'s stop decision.

Notation as in `specviz.core.trace`: q = draft probability of a drafted token, p = target probability
of the same token in the same context; the verifier accepts a token with probability
min(1, p / q) (at temperature 0: iff it equals the target's argmax).

The tree is a networkx DiGraph laid out in layers by depth (x = depth, left to right like the
text). Rows are given depth-first with the committed line first, so edges never cross and the top
row reads as what the round emitted: the accepted draft tokens, then the correction token (bonus or
resample), drawn as one extra node hanging off the last accepted node. Below it: what was tried.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping

import networkx as nx
import plotly.graph_objects as go

from specviz.analysis.metrics import BONUS_TOKEN, CORRECTED, TARGET
from specviz.core.trace import (
    ACCEPTED,
    BONUS,
    REJECTED,
    RESAMPLE,
    ROOT,
    UNVISITED,
    RoundTrace,
)
from specviz.viz.style import (
    COPY_BORDER,
    LABELS,
    MAX_LABEL,
    PALETTE,
    TITLE_MARGIN,
    base_layout,
    legend_entry,
    placeholder,
    token_label,
)

MAX_DRAW_NODES = 400
MIN_ROWS = 4
TREE_HEIGHT = 380  # the figure's least height; it grows by ROW_HEIGHT a row up to MAX_TREE_HEIGHT
ROW_HEIGHT = 34
MAX_TREE_HEIGHT = 1100
SENTENCE_WIDTH = 64  # characters a line of the round's sentence holds
STOP_HEIGHT = 380
CORRECTION = "correction"


def correction_kind(rnd: RoundTrace) -> str | None:
    """What the extra token after the accepted path is: BONUS_TOKEN, CORRECTED, TARGET (no draft) or None."""
    if len(rnd.emitted) <= rnd.n_accepted:
        return None  # the round stopped inside the accepted path (EOS, budget)
    if rnd.n_drafted == 0:
        return TARGET
    return BONUS_TOKEN if rnd.correction == BONUS else CORRECTED if rnd.correction == RESAMPLE else TARGET


def tree_graph(rnd: RoundTrace) -> nx.DiGraph:
    """DiGraph of the round: draft nodes 0..n-1 plus the correction node, with attrs depth, kind and rank
    (0 for the committed line: accepted nodes and the correction; then siblings in sampling order)."""
    parents, kind = rnd.tree.parents, correction_kind(rnd)
    g = nx.DiGraph()
    g.add_node(0, depth=0, kind=ROOT, rank=0)
    for i in range(1, len(parents)):
        g.add_node(
            i,
            depth=g.nodes[parents[i]]["depth"] + 1,
            kind=rnd.status[i],
            rank=0 if rnd.status[i] == ACCEPTED else 1 + i,
        )
        g.add_edge(parents[i], i)
    if kind is not None:
        tip = rnd.accepted_path[-1] if rnd.accepted_path else 0
        g.add_node(CORRECTION, depth=g.nodes[tip]["depth"] + 1, kind=kind, rank=0)
        g.add_edge(tip, CORRECTION)
    return g


def tree_layout(g: nx.DiGraph) -> dict:
    """{node: (x, y)}: x = depth; y = row. Depth-first, a node shares the row of its first child and every
    other leaf opens a new row below, so the committed tokens of the round read as one straight top line."""
    order = nx.dfs_preorder_nodes(g, 0, sort_neighbors=lambda us: sorted(us, key=lambda u: g.nodes[u]["rank"]))
    row, rows, pos = {}, 0, {}
    for u in order:
        parent = next(iter(g.predecessors(u)), None)
        if parent is not None and all(row.get(s) is None for s in g.successors(parent) if s != u):
            row[u] = row[parent]  # the first child continues its parent's row
        elif parent is not None:
            rows += 1
            row[u] = rows
        else:
            row[u] = 0
        pos[u] = (g.nodes[u]["depth"], -row[u])
    return pos


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _hover(rnd: RoundTrace, u, kind: str, token_text: Mapping[int, str], greedy: bool) -> str:
    if u == CORRECTION:
        tok = rnd.emitted[rnd.n_accepted]
        why = {
            BONUS_TOKEN: "bonus: drawn from the target after the whole draft was accepted",
            CORRECTED: "resampled from the residual norm(max(0, p − q)) after a rejection",
            TARGET: "the target's own token (nothing was drafted)",
        }[kind]
        return f"<b>{token_label(token_text, tok, 40)}</b>  (id {tok})<br>{why}"
    tok = rnd.tree.tokens[u]
    head = f"<b>{token_label(token_text, tok, 40)}</b>  (id {tok})<br>"
    if u == 0:
        return head + "root: the last committed token"
    q, p = rnd.tree.q[u], rnd.p[u]
    lines = [f"{LABELS[kind]}", f"q (draft) = {_fmt(q)}", f"p (target) = {_fmt(p)}"]
    if u in (rnd.copied or ()):
        lines[1] = "copied from the context (prompt lookup): a point mass, q = 1"
    if p is not None and q > 0:
        lines.append(f"acceptance ratio min(1, p/q) = {min(1.0, p / q):.3f}")
    draw = None if rnd.u is None else rnd.u[u]  # the schema holds u to one entry a node
    if draw is not None:
        lines.append(f"uniform draw u = {draw:.3f}: accepted iff u is below its acceptance ratio")
    if greedy:
        lines.append("greedy: accepted iff it is the target's argmax")
    return head + "<br>".join(lines)


def tree_figure(rnd: RoundTrace, token_text: Mapping[int, str], greedy: bool = False) -> go.Figure:
    """The round's draft tree as token chips coloured by status; hover shows q, p and min(1, p/q)."""
    if len(rnd.tree) > MAX_DRAW_NODES:
        return placeholder(
            f"Round {rnd.index}: the draft tree has {len(rnd.tree)} nodes,\n"
            f"more than the {MAX_DRAW_NODES} this view draws.",
            TREE_HEIGHT,
        )
    g = tree_graph(rnd)
    pos = tree_layout(g)
    depth = max(x for x, _ in pos.values())
    n_rows = 1 - min(y for _, y in pos.values())
    limit = max(3, min(MAX_LABEL, 64 // (depth + 1)))  # chips must fit their column
    size = 14 if n_rows <= 10 else 12  # 12 px at least: labels read on a projector
    height = max(TREE_HEIGHT, min(MAX_TREE_HEIGHT, 120 + ROW_HEIGHT * n_rows))
    fig = go.Figure()
    # 1. edges, styled by the child's fate
    styles = {
        ACCEPTED: dict(color=PALETTE[ACCEPTED], width=3),
        REJECTED: dict(color=PALETTE[REJECTED], width=1.5, dash="dash"),
        UNVISITED: dict(color="#cbd5e1", width=1.2),
    }
    for kind, line in styles.items():
        xs, ys = [], []
        for a, b in g.edges:
            if g.nodes[b]["kind"] == kind:
                xs += [pos[a][0], pos[b][0], None]
                ys += [pos[a][1], pos[b][1], None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=line, hoverinfo="skip", showlegend=False))
    if CORRECTION in g:
        ((a, _),) = g.in_edges(CORRECTION)
        kind = g.nodes[CORRECTION]["kind"]
        fig.add_trace(
            go.Scatter(
                x=[pos[a][0], pos[CORRECTION][0]],
                y=[pos[a][1], pos[CORRECTION][1]],
                mode="lines",
                line=dict(color=PALETTE[kind], width=2.5, dash="dot"),
                hoverinfo="skip",
                showlegend=False,
            )
        )
    # 2. nodes: one hover trace per kind, token chips as annotations on top
    by_kind: dict[str, list] = {}
    for u in g.nodes:
        by_kind.setdefault(g.nodes[u]["kind"], []).append(u)
    order = [ROOT, ACCEPTED, BONUS_TOKEN, CORRECTED, TARGET, REJECTED, UNVISITED]
    copied = set(rnd.copied or ())
    for kind in order:
        nodes = by_kind.get(kind, [])
        if not nodes:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[u][0] for u in nodes],
                y=[pos[u][1] for u in nodes],
                mode="markers",
                name=LABELS[kind],
                marker=dict(color=PALETTE[kind], size=30, symbol="square", opacity=0.0),
                showlegend=False,
                hovertext=[_hover(rnd, u, kind, token_text, greedy) for u in nodes],
                hoverinfo="text",
                meta=kind,
            )
        )
        legend_entry(fig, LABELS[kind], PALETTE[kind])
        for u in nodes:
            tok = rnd.emitted[rnd.n_accepted] if u == CORRECTION else rnd.tree.tokens[u]
            dark = kind == UNVISITED
            copy = u in copied
            fig.add_annotation(
                x=pos[u][0],
                y=pos[u][1],
                text=token_label(token_text, tok, limit),
                showarrow=False,
                bgcolor=PALETTE[kind],
                bordercolor=COPY_BORDER if copy else "white",
                borderwidth=3 if copy else 1,
                borderpad=5 - 2 * copy,
                font=dict(color="#334155" if dark else "white", size=size),
            )
    if copied:
        legend_entry(fig, "copied from the context (prompt lookup)", "white", border=COPY_BORDER)
    # 3. frame
    fig.update_xaxes(visible=False, range=[-0.6, max(depth, 3) + 0.6])
    spare = max(0, MIN_ROWS - n_rows) / 2  # few rows: keep their spacing, centred
    fig.update_yaxes(visible=False, range=[-(n_rows - 1) - 0.5 - spare, 0.5 + spare])
    words = round_sentence(rnd, token_text, greedy, SENTENCE_WIDTH)  # plotly does not wrap: lines fit a half-page plot
    subtitle = words + "<br>" + round_subtitle(rnd)
    top = TITLE_MARGIN + 8 + 16 * (words.count("<br>") + 1)  # one 16 px line a line of the sentence
    fig = base_layout(fig, height + top - TITLE_MARGIN, round_title(rnd, token_text), subtitle)
    return fig.update_layout(margin_t=top)


def round_title(rnd: RoundTrace, token_text: Mapping[int, str]) -> str:
    kind = correction_kind(rnd)
    if rnd.n_drafted == 0:
        head = f"Round {rnd.index}: no draft, the target alone"
    else:
        n_copied = len(rnd.copied or ())
        head = (
            f"Round {rnd.index}: drafted {rnd.n_drafted}"
            + (f" ({n_copied} copied)" if n_copied else "")
            + f", accepted {rnd.n_accepted}"
        )
    if kind in (BONUS_TOKEN, CORRECTED):
        tok = token_label(token_text, rnd.emitted[rnd.n_accepted])
        head += f", then {'bonus' if kind == BONUS_TOKEN else 'resampled'} ‘{tok}’"
    return head


def _quoted(token_text: Mapping[int, str], toks) -> str:
    return "‘" + "".join(token_text.get(t, f"<{t}>") for t in toks).replace("\n", "↵")[:40] + "’"


def round_sentence(rnd: RoundTrace, token_text: Mapping[int, str], greedy: bool = False, width: int = 0) -> str:
    """The round in plain words: what was drafted, what the target kept, what it rejected and why, and where the
    extra token came from. Escaped for plotly; with `width`, wrapped into lines of at most that many characters."""
    kind = correction_kind(rnd)
    extra = rnd.emitted[rnd.n_accepted] if kind else None
    if rnd.n_drafted == 0:
        return _lines(f"nothing was drafted: the target chose {_quoted(token_text, [extra])} alone.", width)
    parents = set(rnd.tree.parents[1:])
    branches = sum(1 for u in range(1, len(rnd.tree)) if u not in parents)
    words = [f"drafted {rnd.n_drafted} token{'s' * (rnd.n_drafted > 1)}"]
    if branches > 1:
        words[0] += f" in {branches} branches"
    kept = [rnd.tree.tokens[u] for u in rnd.accepted_path]
    words.append(f"the target kept {_quoted(token_text, kept)}" if kept else "the target kept none of them")
    rejected = [u for u, st in enumerate(rnd.status) if st == REJECTED]
    why = []
    for u in rejected[:3]:
        q, p = rnd.tree.q[u], rnd.p[u]
        if greedy:
            reason = "not the target's argmax"
        elif p is not None:
            reason = f"p {p:.2f} against q {q:.2f}"
        else:
            reason = f"q {q:.2f}"
        why.append(f"{_quoted(token_text, [rnd.tree.tokens[u]])} ({reason})")
    if rejected:
        more = f" and {len(rejected) - 3} more" if len(rejected) > 3 else ""
        words.append("rejected " + ", ".join(why) + more)
    if kind == BONUS_TOKEN:
        words.append(f"and drew the bonus {_quoted(token_text, [extra])} from the target")
    elif kind == CORRECTED:
        words.append(
            f"and took the target's argmax {_quoted(token_text, [extra])} instead"
            if greedy
            else f"and drew {_quoted(token_text, [extra])} from the residual"
        )
    elif kind == TARGET:
        words.append(f"and added the target's {_quoted(token_text, [extra])}")
    return _lines("; ".join(words[:2]) + (", " + ", ".join(words[2:]) if words[2:] else "") + ".", width)


def _lines(text: str, width: int) -> str:
    lines = textwrap.wrap(text, width, break_on_hyphens=False) if width else [text]
    return "<br>".join(html.escape(line, quote=False) for line in lines)


def round_subtitle(rnd: RoundTrace) -> str:
    return (
        f"+{len(rnd.emitted)} tokens · draft {rnd.draft_ms:.0f} ms ({rnd.draft_forwards} forwards) · "
        f"verify {rnd.verify_ms:.0f} ms · overhead {rnd.overhead_ms:.0f} ms"
    )


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


def showcase_round(rounds) -> int:
    """The round to open a finished trace on: the first with both an accepted and a rejected draft token,
    else the one with the largest tree."""
    for i, r in enumerate(rounds):
        if r.n_accepted and REJECTED in r.status:
            return i
    return max(range(len(rounds)), key=lambda i: len(rounds[i].tree), default=0)
