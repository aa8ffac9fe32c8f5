"""What a round keeps for the node inspector: the top of the draft's q, the target's p and the residual at each node.

Per drafted node c: ``q_top[c]`` is the top of the distribution c was drawn from (its parent's D; for a copied node,
the point mass on its token), ``p_top[c]`` the top of the target's warped distribution at c's parent, the one c was
judged against, and, at a rejected c of a sampled round, ``residual_top[c]`` the top of the residual
norm(max(0, R - D)) left after that rejection: what the next sibling was judged against, or the correction drawn
from. Each is a list of [token id, probability] pairs, most probable first, probabilities to 4 significant digits;
``p_entropy[c]`` is the entropy in nats of the whole distribution ``p_top[c]`` is the top of. The root's entries are
None. Recording reads tensors the round computed anyway and draws no random number, so it
changes no output.
"""

from __future__ import annotations

import torch

from specviz.core.trace import DraftTree
from specviz.kernels import rowstats


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


BLOCK = 128  # `top_k`'s block width


def top_k(rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.topk(rows, k) of (m, V) rows, its values exactly, about four times faster over a vocabulary: the row's
    blocks of BLOCK entries with the k largest maxima hold its k largest entries (any other block has k maxima
    above all of its entries), so one pass of block maxima and a top-k over those k blocks find them."""
    m, V = rows.shape
    k = min(k, V)
    nb = -(-V // BLOCK)
    if nb * BLOCK > V:
        rows = torch.nn.functional.pad(rows, (0, nb * BLOCK - V), value=float("-inf"))
    padded = rows.reshape(m, nb, BLOCK)
    best = torch.topk(padded.amax(-1), min(k, nb), dim=-1).indices  # (m, <= k) blocks
    cand = torch.gather(padded, 1, best[..., None].expand(-1, -1, BLOCK)).reshape(m, -1)
    vals, pos = torch.topk(cand, k, dim=-1)
    return vals, torch.gather(best, 1, pos // BLOCK) * BLOCK + pos % BLOCK


def top_pairs(rows: torch.Tensor, k: int) -> list[list[list]]:
    """The k most probable [token id, probability] pairs of each row of `rows` (m, V), zeros left out."""
    vals, idx = top_k(rows.float(), k)
    return [[[i, _sig(v)] for i, v in zip(ids, vs) if v > 0] for ids, vs in zip(idx.tolist(), vals.tolist())]


def entropies(rows: torch.Tensor) -> list[float]:
    """The entropy in nats of each row of `rows` (m, V), to 4 significant digits (0 log 0 = 0)."""
    r = rows.float()
    h = (-(r * torch.log(r.clamp_min(1e-30))).sum(-1)).clamp_min(0.0) + 0.0  # no -0.0
    return [_sig(x) for x in h.tolist()]


def summaries(
    probs: torch.Tensor, index: list[int], k: int, entropy: bool = True
) -> tuple[list[list[list]], list[float]]:
    """`top_pairs` and, with `entropy`, `entropies` (else []) of `probs`' rows `index`: in one pass over each row, in
    place, where the kernel serves (`kernels.rowstats`), else from a copy of the rows."""
    fast = rowstats.summarize(probs, index, k, entropy)
    if fast is None:
        rows = probs[torch.tensor(index, device=probs.device)]
        return top_pairs(rows, k), entropies(rows) if entropy else []
    vals, ids, h = fast
    tops = [[[i, _sig(v)] for i, v in zip(i_row, v_row) if v > 0] for i_row, v_row in zip(ids, vals)]
    return tops, [_sig(x) for x in h]


def _by_node(nodes: list[int], rows: list[torch.Tensor], k: int) -> dict[int, list]:
    return dict(zip(nodes, top_pairs(torch.stack(rows), k))) if nodes else {}


def round_tops(
    tree: DraftTree,
    probs: torch.Tensor,
    dists: dict[int, torch.Tensor],
    residuals: dict[int, torch.Tensor] | None,
    copied: frozenset[int],
    k: int,
) -> dict[str, tuple]:
    """RoundTrace's q_top, p_top and residual_top for one verified round; `probs` (n, V): the target's warped
    distributions after each node; `dists`: the draft's D at each node that has drawn children."""
    n = len(tree)
    if n == 1:
        return {"q_top": (None,), "p_top": (None,), "residual_top": None, "p_entropy": (None,)}
    parents = sorted(set(tree.parents[1:]))
    drew = [u for u in parents if u in dists]
    p_tops, p_h = summaries(probs, parents, k)
    p_at, h_at = dict(zip(parents, p_tops)), dict(zip(parents, p_h))
    q_rows = torch.stack([dists[u] for u in drew]).to(probs) if drew else None
    q_at = dict(zip(drew, summaries(q_rows, list(range(len(drew))), k, entropy=False)[0])) if drew else {}
    q_top, p_top, p_entropy = [None], [None], [None]
    for c in range(1, n):
        u = tree.parents[c]
        q_top.append([[tree.tokens[c], 1.0]] if c in copied else q_at.get(u))
        p_top.append(p_at[u])
        p_entropy.append(h_at[u])
    out = {"q_top": tuple(q_top), "p_top": tuple(p_top), "residual_top": None, "p_entropy": tuple(p_entropy)}
    if residuals:
        rejected = sorted(residuals)
        left = _by_node(rejected, [residuals[c] for c in rejected], k)
        out["residual_top"] = tuple(left.get(c) for c in range(n))
    return out
