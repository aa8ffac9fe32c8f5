"""A round's draft tree as a graph to draw: its nodes with their depth, kind and rank (`tree_graph`), groups of
siblings folded into one "+n more" node until it fits (`fold`), and rows laid out so the committed line reads
straight across the top (`tree_layout`)."""

from __future__ import annotations

import networkx as nx

from specviz.core.trace import ACCEPTED, REJECTED, ROOT, UNVISITED, RoundTrace
from specviz.viz.sentences import correction_kind
from specviz.viz.style import CORRECTION

FOLD, GROWN = "fold", "grown"  # node kinds of this view only: a folded group, a node in the growth replay


def tree_graph(rnd: RoundTrace, upto: int | None = None) -> nx.DiGraph:
    """DiGraph of the round: draft nodes 0..n-1 plus the correction node, with attrs depth, kind and rank
    (0 for the committed line: accepted nodes and the correction; then siblings in sampling order).
    `upto`: the growth replay's view, the first `upto` nodes of `expand_order`, all of kind GROWN, no verdict."""
    parents, kind = rnd.tree.parents, correction_kind(rnd)
    nodes = range(1, len(parents)) if upto is None else sorted((rnd.expand_order or ())[:upto])
    g = nx.DiGraph()
    g.add_node(0, depth=0, kind=ROOT, rank=0)
    for i in nodes:
        st = GROWN if upto is not None else rnd.status[i]
        g.add_node(i, depth=g.nodes[parents[i]]["depth"] + 1, kind=st, rank=0 if st == ACCEPTED else 1 + i)
        g.add_edge(parents[i], i)
    if kind is not None and upto is None:
        tip = rnd.accepted_path[-1] if rnd.accepted_path else 0
        g.add_node(CORRECTION, depth=g.nodes[tip]["depth"] + 1, kind=kind, rank=0)
        g.add_edge(tip, CORRECTION)
    return g


def fold_id(parent, kind: str) -> str:
    """The name a folded group is clicked by: the parent it hangs off and what it holds."""
    return f"fold:{parent}:{kind}"


def n_rows(g: nx.DiGraph) -> int:
    """Rows `tree_layout` gives the graph: one a leaf."""
    return sum(1 for u in g if g.out_degree(u) == 0)


def _leaves(g: nx.DiGraph, u) -> int:
    return sum(1 for d in (u, *nx.descendants(g, u)) if g.out_degree(d) == 0)


def fold(g: nx.DiGraph, max_rows: int, opened=()) -> nx.DiGraph:
    """Fold groups of siblings into one "+n more" chip until the tree fits `max_rows` rows: first the last
    unvisited children of a node (with their subtrees), largest groups first; then, if still too tall, a node's
    last rejected children whose subtrees hold nothing visited. A group named in `opened` (`fold_id`) stays
    open; the committed line never folds."""
    g = g.copy()
    for kind in (UNVISITED, REJECTED):
        if n_rows(g) <= max_rows:
            break
        groups = []
        for u in list(g):
            kids = [c for c in g.successors(u) if g.nodes[c]["kind"] == kind]
            if kind == REJECTED:
                kids = [c for c in kids if all(g.nodes[d]["kind"] in (UNVISITED, FOLD) for d in nx.descendants(g, c))]
            if not kids or fold_id(u, kind) in opened:
                continue
            leaves = sum(_leaves(g, c) for c in kids)
            if leaves > 1:
                groups.append((leaves - 1, u, sorted(kids, key=lambda c: g.nodes[c]["rank"])))
        for _, u, kids in sorted(groups, key=lambda x: (-x[0], str(x[1]))):
            excess = n_rows(g) - max_rows
            if excess <= 0:
                break
            if u not in g:  # folded away inside a larger group
                continue
            tail, leaves = [], 0  # fold the last siblings (sampling order), as few as make the tree fit
            for c in reversed(kids):
                tail.insert(0, c)
                leaves += _leaves(g, c)
                if leaves - 1 >= excess:
                    break
            if leaves < 2:
                continue
            hidden = {d for c in tail for d in (c, *nx.descendants(g, c))}
            count = sum(g.nodes[d].get("count", 1) for d in hidden)
            g.remove_nodes_from(hidden)
            g.add_node(fold_id(u, kind), depth=g.nodes[u]["depth"] + 1, kind=FOLD, rank=10**6, count=count, holds=kind)
            g.add_edge(u, fold_id(u, kind))
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
