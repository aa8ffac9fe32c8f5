"""The view of one round: its draft tree.

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
import unicodedata
from collections.abc import Mapping

import networkx as nx
import plotly.graph_objects as go

from specviz.analysis.metrics import BONUS_TOKEN, CORRECTED, TARGET
from specviz.core.trace import (
    ACCEPTED,
    REJECTED,
    ROOT,
    UNVISITED,
    RoundTrace,
)
from specviz.viz.sentences import growth_sentence, round_sentence, round_subtitle, round_title, wrapped
from specviz.viz.style import (
    COPY_BORDER,
    CORRECTION,
    LABELS,
    MAX_LABEL,
    PALETTE,
    TITLE_MARGIN,
    base_layout,
    legend_entry,
    placeholder,
    token_label,
)
from specviz.viz.treegraph import FOLD, GROWN, fold, tree_graph, tree_layout

MAX_DRAW_NODES = 400
MIN_ROWS = 4
TREE_WIDTH = 520  # px: the narrowest plot labels are sized for (wider plots only add room)
TREE_PLOT_HEIGHT = 260  # the plot area's least height; it grows by ROW_HEIGHT a row up to MAX_TREE_HEIGHT
ROW_HEIGHT = 34
MAX_TREE_HEIGHT = 1100  # the figure's height past which subtrees fold into "+n more" chips
LEGEND_SPACE = 64  # px under the plot for the legend
SIDE_MARGIN = 16
CHIP_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"  # fixed advance: a chip's width follows its text
CHAR_EM = 0.6  # a monospace character's advance, in font sizes (a wide CJK character: two)
LINE_EM = 1.3  # a line's height, in font sizes
CHIP_GAP = 4  # px kept free between neighbouring chips
SENTENCE_WIDTH = 64  # characters a line of the round's sentence holds
FOLD_COLOR, GROWN_COLOR, NEWEST_BORDER, SLOT_COLOR = "#f1f5f9", "#64748b", "#f59e0b", "#f59e0b"


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _hover(rnd: RoundTrace, u, kind: str, token_text: Mapping[int, str], greedy: bool, g=None) -> str:
    if kind == FOLD:
        d = g.nodes[u]
        par = token_label(token_text, rnd.tree.tokens[next(iter(g.predecessors(u)))], 40)
        what = "never reached by the target" if d["holds"] == UNVISITED else "rejected, with what grew under them"
        return f"<b>+{d['count']} more</b> under <b>{par}</b><br>drafted nodes {what}<br>click to open"
    if u == CORRECTION:
        tok = rnd.emitted[rnd.n_accepted]
        why = {
            BONUS_TOKEN: "bonus: drawn from the target after the whole draft was accepted",
            CORRECTED: "resampled from the residual norm(max(0, p − q)) after a rejection",
            TARGET: "the target's own token (nothing was drafted)",
        }[kind]
        return f"<b>{token_label(token_text, tok, 40)}</b>  (id {tok})<br>{why}<br>click to inspect"
    tok = rnd.tree.tokens[u]
    head = f"<b>{token_label(token_text, tok, 40)}</b>  (id {tok})<br>"
    if u == 0:
        return head + "root: the last committed token"
    q, p = rnd.tree.q[u], rnd.p[u]
    if kind == GROWN:
        value = None if rnd.values is None else rnd.values[u]
        return head + f"drafted with q = {_fmt(q)}" + (f"<br>node value = {value:.3f}" if value is not None else "")
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
    return head + "<br>".join(lines) + "<br>click to inspect"


def display_width(text: str) -> int:
    """Character cells `text` takes in a monospace font: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def chip_text(token_text: Mapping[int, str], tok: int, cells: int) -> str:
    """A token's chip label that fits `cells` character cells."""
    label = token_label(token_text, tok, MAX_LABEL)
    plain = html.unescape(label)
    if display_width(plain) <= cells:
        return label
    while plain and display_width(plain) > cells - 1:
        plain = plain[:-1]
    return html.escape(plain + "…", quote=False)


def _sizes(depth: int, rows: int) -> dict:
    """Font, padding and label cells for a tree `depth` columns deep and `rows` rows tall, so that at
    TREE_WIDTH no chip reaches its neighbour's column or row."""
    col_px = (TREE_WIDTH - 2 * SIDE_MARGIN) / (max(depth, 3) + 1.2)
    size = 14 if rows <= 10 and col_px >= 90 else 12  # 12 px at least: labels read on a projector
    side = 6 if col_px >= 48 else 3  # padding + border, each side
    cells = int((col_px - CHIP_GAP - 2 * side) / (CHAR_EM * size))
    return dict(size=size, side=side, cells=max(2, min(MAX_LABEL, cells)))


def tree_figure(
    rnd: RoundTrace,
    token_text: Mapping[int, str],
    greedy: bool = False,
    opened=(),
    step: int | None = None,
    level_threshold: float = 0,
    mark=None,
) -> go.Figure:
    """The round's draft tree as token chips coloured by status; hover shows q, p and min(1, p/q), a click
    (`customdata`: the node, or a folded group's `fold_id`) opens it. Too many rows for MAX_TREE_HEIGHT fold into
    "+n more" chips unless named in `opened`. `step` k (1..n, tree methods): the growth replay, the tree as it
    stood after its first k nodes, with the slots competing for the next draw ringed (`level_threshold`: the
    DySpec level variant's t, named in the words). `mark`: a node (or CORRECTION) ringed, as the newest is."""
    if len(rnd.tree) > MAX_DRAW_NODES:
        return placeholder(
            f"Round {rnd.index}: the draft tree has {len(rnd.tree)} nodes,\n"
            f"more than the {MAX_DRAW_NODES} this view draws.",
            TREE_PLOT_HEIGHT,
        )
    growth = step is not None and rnd.expand_order is not None
    if growth:
        step = max(0, min(int(step), len(rnd.expand_order)))
    # plotly does not wrap: the sentence's lines fit a half-page plot
    if growth:
        words = wrapped(growth_sentence(rnd, token_text, step, level_threshold), SENTENCE_WIDTH)
    else:
        words = round_sentence(rnd, token_text, greedy, SENTENCE_WIDTH)
    top = TITLE_MARGIN + 8 + 16 * (words.count("<br>") + 1)  # one 16 px line a line of the sentence
    max_rows = (MAX_TREE_HEIGHT - top - LEGEND_SPACE) // ROW_HEIGHT
    g = fold(tree_graph(rnd, step if growth else None), max_rows, opened)
    pos = tree_layout(g)
    depth = max(x for x, _ in pos.values())
    rows = 1 - min(y for _, y in pos.values())
    sz = _sizes(depth, rows)
    plot_h = max(TREE_PLOT_HEIGHT, ROW_HEIGHT * rows)  # past the cap only where opened groups need the rows
    fig = go.Figure()
    _edges(fig, g, pos)
    newest = rnd.expand_order[step - 1] if growth and step else mark
    _chips(fig, rnd, g, pos, token_text, greedy, sz, newest)
    if growth:
        _slots(fig, rnd, g, pos, token_text, step)
    # frame
    fig.update_xaxes(visible=False, range=[-0.6, max(depth, 3) + 0.6], fixedrange=True)
    spare = max(0, MIN_ROWS - rows) / 2  # few rows: keep their spacing, centred
    fig.update_yaxes(visible=False, range=[-(rows - 1) - 0.5 - spare, 0.5 + spare], fixedrange=True)
    title = round_title(rnd, token_text) if not growth else f"Round {rnd.index}: how the tree grew"
    subtitle = words + "<br>" + round_subtitle(rnd)
    fig = base_layout(fig, top + plot_h + LEGEND_SPACE, title, subtitle, legend_space=LEGEND_SPACE)
    fig.update_layout(title=dict(yref="container", y=1, yanchor="top", pad_t=12))  # lines stack down from the top
    return fig.update_layout(margin=dict(t=top, l=SIDE_MARGIN, r=SIDE_MARGIN), hovermode="closest")


def _edges(fig: go.Figure, g: nx.DiGraph, pos: dict) -> None:
    """Edges styled by the child's fate; the correction's edge dotted in its own colour."""
    styles = {
        ACCEPTED: dict(color=PALETTE[ACCEPTED], width=3),
        REJECTED: dict(color=PALETTE[REJECTED], width=1.5, dash="dash"),
        UNVISITED: dict(color="#cbd5e1", width=1.2),
        FOLD: dict(color="#cbd5e1", width=1.2, dash="dot"),
        GROWN: dict(color=GROWN_COLOR, width=1.5),
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


def _chips(fig, rnd, g, pos, token_text, greedy, sz, newest) -> None:
    """Nodes: one hover-and-click trace per kind (invisible squares under the chips), token chips as annotations."""
    by_kind: dict[str, list] = {}
    for u in g.nodes:
        by_kind.setdefault(g.nodes[u]["kind"], []).append(u)
    order = [ROOT, ACCEPTED, BONUS_TOKEN, CORRECTED, TARGET, REJECTED, UNVISITED, GROWN, FOLD]
    colours = {**PALETTE, FOLD: FOLD_COLOR, GROWN: GROWN_COLOR}
    names = {**LABELS, FOLD: "folded: click to open", GROWN: "drafted (before the target's verdict)"}
    copied = set(rnd.copied or ())
    chips = []  # one layout update for all (plotly revalidates every annotation on each add_annotation)
    for kind in order:
        nodes = by_kind.get(kind, [])
        if not nodes:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[u][0] for u in nodes],
                y=[pos[u][1] for u in nodes],
                mode="markers",
                name=names[kind],
                marker=dict(color=colours[kind], size=30, symbol="square", opacity=0.0),
                showlegend=False,
                hovertext=[_hover(rnd, u, kind, token_text, greedy, g) for u in nodes],
                hoverinfo="text",
                customdata=[str(u) for u in nodes],
                meta=kind,
            )
        )
        legend_entry(fig, names[kind], colours[kind], border="#94a3b8" if kind == FOLD else None)
        for u in nodes:
            copy, new = u in copied, u == newest
            if kind == FOLD:
                text = html.escape(f"+{g.nodes[u]['count']}"[: sz["cells"]], quote=False)
            else:
                tok = rnd.emitted[rnd.n_accepted] if u == CORRECTION else rnd.tree.tokens[u]
                text = chip_text(token_text, tok, sz["cells"])
            bw = 3 if copy or new else 1
            chips.append(
                dict(
                    x=pos[u][0],
                    y=pos[u][1],
                    text=text,
                    showarrow=False,
                    bgcolor=colours[kind],
                    bordercolor=NEWEST_BORDER
                    if new
                    else COPY_BORDER
                    if copy
                    else "#94a3b8"
                    if kind == FOLD
                    else "white",
                    borderwidth=bw,
                    borderpad=sz["side"] - bw,
                    font=dict(
                        color="#334155" if kind in (UNVISITED, FOLD) else "white", size=sz["size"], family=CHIP_FONT
                    ),
                )
            )
    fig.update_layout(annotations=[*fig.layout.annotations, *chips])
    if copied:
        legend_entry(fig, "copied from the context (prompt lookup)", "white", border=COPY_BORDER)


def _slots(fig, rnd, g, pos, token_text, step) -> None:
    """The growth replay: ring each node whose slot competes for the next draw, its value on hover."""
    if not rnd.frontier or step >= len(rnd.frontier):
        return
    slots = [(u, v, c) for u, v, c in rnd.frontier[step] if u in pos]
    if not slots:
        return
    best = {}
    for u, v, c in slots:
        best.setdefault(u, []).append((v, c))
    fig.add_trace(
        go.Scatter(
            x=[pos[u][0] for u in best],
            y=[pos[u][1] for u in best],
            mode="markers",
            marker=dict(size=38, symbol="circle-open", color=SLOT_COLOR, line=dict(width=2)),
            hovertext=[
                f"<b>{token_label(token_text, rnd.tree.tokens[u], 40)}</b>: the next draw here is worth "
                + ", ".join(f"{v:.3f}{' (copy)' if c else ''}" for v, c in vs)
                for u, vs in best.items()
            ],
            hoverinfo="text",
            name="slots competing for the next draw",
            showlegend=True,
        )
    )


def showcase_round(rounds) -> int:
    """The round to open a finished trace on: the first with both an accepted and a rejected draft token,
    else the one with the largest tree."""
    for i, r in enumerate(rounds):
        if r.n_accepted and REJECTED in r.status:
            return i
    return max(range(len(rounds)), key=lambda i: len(rounds[i].tree), default=0)
