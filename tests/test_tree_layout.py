"""The tree view holds 1-256 drafted nodes: no chip overlaps another or leaves the plot, at the narrowest width the
view is sized for, on random trees. The boxes come from the figure itself: each chip annotation's position in data
coordinates, mapped through the figure's axis ranges, margins and height, and its text, font size, padding and
border (chips use a monospace font, whose advance is 0.6 of its size; a wide CJK character takes two)."""

import html
import random
import re
import unicodedata

import pytest

from specviz.core.trace import ACCEPTED, REJECTED, ROOT, UNVISITED, DraftTree, RoundTrace
from specviz.viz.tree import MAX_TREE_HEIGHT, TREE_WIDTH, tree_figure

ADVANCE, LINE = 0.602, 1.3  # DejaVu Sans Mono's advance and a line's height, in font sizes
WORDS = [
    " the",
    " a",
    "ing",
    " sky",
    " blue",
    "\n",
    " because",
    " light",
    "。",
    "天空",
    " 🙂",
    "<b>",
    ' "',
    " scattering",
]


def random_round(n: int, seed: int, greedy_like: bool = True, max_depth: int = 8) -> RoundTrace:
    """A random tree of n drafted nodes with consistent verdicts: one accepted path from the root; before each
    accepted child its earlier siblings were rejected; everything under a rejected or unvisited node unvisited."""
    rng = random.Random(seed)
    parents, depth = [-1], [0]
    style = rng.choice(["wide", "deep", "mixed"])
    for i in range(1, n + 1):
        if style == "wide":
            cand = [u for u in range(i) if depth[u] < 2]
        elif style == "deep":
            cand = [i - 1] if depth[i - 1] < max_depth else [u for u in range(i) if depth[u] < max_depth]
        else:
            cand = [u for u in range(i) if depth[u] < max_depth]
        u = rng.choice(cand)
        parents.append(u)
        depth.append(depth[u] + 1)
    kids = [[] for _ in parents]
    for c in range(1, len(parents)):
        kids[parents[c]].append(c)
    status = [ROOT] + [UNVISITED] * n
    path, u = [], 0
    while kids[u]:
        pick = rng.randrange(len(kids[u]) + 1)  # len: every child rejected
        for c in kids[u][:pick]:
            status[c] = REJECTED
        if pick == len(kids[u]):
            break
        status[kids[u][pick]] = ACCEPTED
        path.append(kids[u][pick])
        u = kids[u][pick]
    tokens = [0] + [rng.randrange(len(WORDS)) for _ in range(n)]
    return RoundTrace(
        index=0,
        context_len=4,
        tree=DraftTree(tuple(tokens), tuple(parents), (1.0,) + tuple(rng.random() for _ in range(n))),
        status=tuple(status),
        p=(None,) + tuple(rng.random() for _ in range(n)),
        accepted_path=tuple(path),
        emitted=tuple(tokens[c] for c in path) + (1,),
        correction="bonus" if not kids[u] else "resample",
        draft_ms=1.0,
        verify_ms=1.0,
    )


def chip_boxes(fig) -> list[tuple[float, float, float, float]]:
    """(left, top, right, bottom) in px of every chip, at TREE_WIDTH."""
    lay = fig.layout
    (x0, x1), (y0, y1) = lay.xaxis.range, lay.yaxis.range
    plot_w = TREE_WIDTH - lay.margin.l - lay.margin.r
    plot_h = lay.height - lay.margin.t - lay.margin.b
    boxes = []
    for a in lay.annotations:
        if a.xref == "paper":
            continue
        cx = lay.margin.l + (a.x - x0) / (x1 - x0) * plot_w
        cy = lay.margin.t + (y1 - a.y) / (y1 - y0) * plot_h
        text = html.unescape(re.sub(r"<[^>]+>", "", a.text))
        cells = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
        edge = 2 * (a.borderpad + a.borderwidth)
        w, h = cells * ADVANCE * a.font.size + edge, LINE * a.font.size + edge
        boxes.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return boxes


def assert_legible(fig):
    lay = fig.layout
    boxes = chip_boxes(fig)
    assert all(a.font.size >= 12 for a in lay.annotations if a.xref != "paper")
    left, right = lay.margin.l, TREE_WIDTH - lay.margin.r
    top, bottom = lay.margin.t, lay.height - lay.margin.b
    for b in boxes:  # nothing cut off
        assert left <= b[0] and b[2] <= right and top <= b[1] and b[3] <= bottom, b
    order = sorted(boxes)
    for i, a in enumerate(order):  # sweep by left edge: no two intersect
        for b in order[i + 1 :]:
            if b[0] >= a[2]:
                break
            assert b[1] >= a[3] or a[1] >= b[3], (a, b)


SIZES = [1, 2, 3, 5, 8, 13, 16, 24, 32, 48, 64, 96, 128, 192, 256]


@pytest.mark.parametrize("n", SIZES)
def test_no_chip_overlaps_another_or_leaves_the_plot(n):
    text = dict(enumerate(WORDS))
    for seed in range(4):
        rnd = random_round(n, seed)
        fig = tree_figure(rnd, text)
        assert_legible(fig)
        assert fig.layout.height <= MAX_TREE_HEIGHT  # past it, subtrees fold
        ys = {a.y for a in fig.layout.annotations if a.xref != "paper" and a.x in range(0, len(rnd.accepted_path) + 2)}
        assert 0 in ys  # the committed line is the top row


def test_long_chains_and_copied_chains_fit_their_columns():
    text = dict(enumerate(WORDS))
    for depth in (8, 12, 16):
        rnd = random_round(depth, 1, max_depth=depth)
        assert_legible(tree_figure(rnd, text))


def test_an_opened_fold_grows_the_figure_and_stays_legible():
    text = dict(enumerate(WORDS))
    rnd = random_round(256, 0)
    folded = tree_figure(rnd, text)
    folds = [d.customdata for d in folded.data if d.meta == "fold"][0]
    opened = tree_figure(rnd, text, opened=set(folds))
    assert opened.layout.height >= folded.layout.height
    assert_legible(opened)


def test_the_growth_replay_is_legible_at_every_step():
    text = dict(enumerate(WORDS))
    base = random_round(32, 2)
    rnd = RoundTrace(
        **{**base.__dict__, "expand_order": tuple(range(1, 33)), "values": (1.0,) + (0.5,) * 32, "frontier": None}
    )
    for step in range(0, 33, 4):
        fig = tree_figure(rnd, text, step=step)
        assert_legible(fig)
        assert len([a for a in fig.layout.annotations if a.xref != "paper"]) == step + 1
