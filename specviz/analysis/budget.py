"""Hardware-aware tree budget: how long one verification forward takes per number of tree tokens, and
the budget that maximises expected tokens per second (Sequoia §3.1.2's choice, with measured costs).

Notation: n = tokens in one forward (the root plus the drafted nodes), t(n) = measured median ms of that
forward on top of a realistic context; for a budget of m drafted nodes a round costs
t_target(m + 1) + (draft forwards) * t_draft and yields G(m) tokens in expectation, so the best budget is
argmax_m G(m) / cost(m). `specviz budget` measures the pair's curves and stores them in
assets/verify_curve.json, one record per dtype with the machine it was measured on, for the dashboard
to draw (`load_curves`), together with the budget `pick_tree_budget` chooses from the pair's measured
positional acceptance vector at T = 0 and T = 1, for each drafter the record has a curve of (`DRAFTER_CURVES`: the
standalone draft, and the EAGLE drafter where the pair has one); the source of the DySpec and Sequoia default
budgets. Copies from the context, which a DySpec tree adds past its budget, are not in the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specviz.core.assets import ACCEPTANCE
from specviz.core.curves import DRAFTER_CURVES, interpolate, pick_key
from specviz.core.tree import children, depths
from specviz.methods.trees.acceptance import acceptance_key
from specviz.methods.trees.static import expected_tokens, sequoia


@dataclass(frozen=True)
class BudgetChoice:
    budget: int
    tokens_per_s: float
    table: tuple[tuple[int, float, float, float], ...]  # (budget, expected tokens, round ms, tokens/s)


def pick_budget(
    curve: dict,
    expected_tokens: Callable[[int], float],
    budgets: Sequence[int],
    draft_ms: Callable[[int], float] = lambda m: 0.0,
) -> BudgetChoice:
    """The budget m maximising expected_tokens(m) / (t_target(m + 1) + draft_ms(m)) in tokens per second."""
    rows = []
    for m in budgets:
        g = float(expected_tokens(m))
        cost = interpolate(curve, m + 1) + float(draft_ms(m))
        rows.append((int(m), round(g, 4), round(cost, 3), round(1e3 * g / cost, 3)))
    best = max(rows, key=lambda r: r[3])
    return BudgetChoice(best[0], best[3], tuple(rows))


def level_draft_ms(parents: Sequence[int], draft_curve: dict) -> float:
    """Draft time to grow a tree level by level: one draft forward per depth over that depth's parents."""
    kids, dep = children(parents), depths(parents)
    per_level: dict[int, int] = {}
    for u, ks in enumerate(kids):
        if ks:
            per_level[dep[u]] = per_level.get(dep[u], 0) + 1
    return sum(interpolate(draft_curve, n) for n in per_level.values())


def pick_tree_budget(
    record: dict, P: Sequence[float], max_depth: int, budgets: Sequence[int] = range(1, 65), drafter: str = "draft"
) -> BudgetChoice:
    """The budget that maximises expected tokens/s for Sequoia's tree from the acceptance vector P, with one
    machine's measured target curve and the curve of the drafter that grows the tree (`record[drafter]`); the
    same number serves DySpec, whose tree is grown from the same per-rank acceptances at run time."""
    trees = {m: sequoia(m, P, max_depth) for m in budgets}
    return pick_budget(
        record["target"],
        lambda m: expected_tokens(trees[m], P),
        budgets,
        lambda m: level_draft_ms(trees[m], record[drafter]),
    )


def picks(record: dict, info: dict, max_depth: int) -> dict:
    """Best budget per drafter with a curve in `record` and temperature with a measured acceptance vector for it:
    the record's own (`analysis.hardware.measure_pair`), else the shipped one (assets/acceptance.json, keyed by the
    drafter's name in `info`)."""
    table = json.loads(ACCEPTANCE.read_text()) if ACCEPTANCE.exists() else {}
    own = record.get("acceptance") or {}
    out = {}
    for drafter in DRAFTER_CURVES:
        if drafter not in record:
            continue
        for t in (0.0, 1.0):
            row = own.get(pick_key(drafter, t)) or table.get(acceptance_key(info.get("target"), info.get(drafter), t))
            if row:
                c = pick_tree_budget(record, row["vector"], max_depth, drafter=drafter)
                out[pick_key(drafter, t)] = {
                    "drafter": info.get(drafter),
                    "budget": c.budget,
                    "tokens_per_s": c.tokens_per_s,
                    "acceptance": row["vector"],
                    "table": [list(r) for r in c.table],
                }
    return out
