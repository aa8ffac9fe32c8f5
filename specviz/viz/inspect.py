"""The node inspector: why one node of a round was accepted or rejected, as an HTML panel.

Notation as in `specviz.core.trace` and `specviz.core.verify`: q is the draft's distribution the node was drawn from,
p the target's at the same position; a drafted token y is accepted iff u < min(1, p(y)/q(y)) for a uniform draw u (at
temperature 0: iff y is the target's argmax); after a rejection the next sibling is judged against, or the correction
drawn from, the residual norm(max(0, p − q)). The panel reads the trace's `q_top`, `p_top`, `u`, `residual_top`,
`head_inputs`, `values`, `expand_order` and `frontier`, and says which of them a trace lacks. Every string from the
trace is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from specviz.analysis.metrics import BONUS_TOKEN, CORRECTED, TARGET
from specviz.core.trace import ACCEPTED, REJECTED, ROOT, UNVISITED, GenerationTrace, RoundTrace
from specviz.methods.catalog import TREES
from specviz.viz.sentences import correction_kind
from specviz.viz.stop import stop_probabilities
from specviz.viz.style import CORRECTION, LABELS, PALETTE, show_token

SHOWN = 8  # rows of each top-k table
HINT = "Click a node of the tree, or a token of the output, to see why it was kept or rejected."


def _tok(token_text: Mapping[int, str], t: int) -> str:
    return show_token(token_text.get(t, f"<{t}>"), 24)


def _p(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}" if x >= 0.001 or x == 0 else f"{x:.1e}"


def _bar(x: float, colour: str) -> str:
    return f'<span class="sv-bar" style="width:{max(1.0, 100 * x):.0f}%;background:{colour}"></span>'


def top_table(title: str, top: list | None, mark: int | None, token_text, colour: str) -> str:
    """One top-k distribution as a table: token, probability and a bar; the drafted token's row marked."""
    if not top:
        return f'<div class="sv-top"><div class="sv-top-title">{title}</div><i>not recorded</i></div>'
    rows = []
    for t, x in top[:SHOWN]:
        here = ' class="sv-mark"' if t == mark else ""
        star = "★ " if t == mark else ""
        rows.append(f"<tr{here}><td>{star}{_tok(token_text, t)}</td><td>{_p(x)}</td><td>{_bar(x, colour)}</td></tr>")
    if mark is not None and mark not in [t for t, _ in top[:SHOWN]]:
        rows.append(
            f'<tr class="sv-mark"><td>★ {_tok(token_text, mark)}</td><td colspan="2">below the top '
            f"{min(SHOWN, len(top))}</td></tr>"
        )
    return f'<div class="sv-top"><div class="sv-top-title">{title}</div><table>{"".join(rows)}</table></div>'


def _lookup(top: list | None, t: int) -> float | None:
    return None if top is None else next((x for s, x in top if s == t), 0.0)


def missing(rnd: RoundTrace, method: str) -> list[str]:
    """What this round's trace lacks for a full panel, in words."""
    out = []
    if rnd.q_top is None or rnd.p_top is None:
        out.append("the top of q and p (recorded with --record-top 0, or by an older specviz)")
    if rnd.n_drafted and rnd.expand_order is None and method in TREES:
        out.append("the tree's growth order and node values")
    if method == "specdecpp" and rnd.n_drafted and rnd.head_inputs is None:
        out.append("the acceptance head's inputs")
    return out


def node_panel(trace: GenerationTrace, round_index: int, node) -> str:
    """The inspector for `node` (an index into the round's tree, or CORRECTION) of round `round_index`."""
    if not trace.rounds:
        return f'<div class="sv-inspect">{HINT}</div>'
    rnd = trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]
    greedy = trace.greedy
    tt = trace.token_text
    if node == CORRECTION or node == str(CORRECTION):
        body = _correction(rnd, tt, greedy)
    else:
        try:
            node = int(node)
        except (TypeError, ValueError):
            return f'<div class="sv-inspect">{HINT}</div>'
        if not 0 <= node < len(rnd.tree):
            return f'<div class="sv-inspect">{HINT}</div>'
        body = _node(trace, rnd, node, tt, greedy)
    lacks = missing(rnd, trace.method)
    note = (
        f'<div class="sv-lacks">This trace does not record {"; ".join(lacks)}: those parts are left out.</div>'
        if lacks
        else ""
    )
    return f'<div class="sv-inspect">{body}{note}</div>'


def _head(rnd: RoundTrace, label: str, kind: str) -> str:
    colour = PALETTE.get(kind, "#334155")
    return (
        f'<div class="sv-inspect-head"><span class="sv-chip" style="background:{colour}">{label}</span> '
        f"round {rnd.index}</div>"
    )


def _node(trace, rnd: RoundTrace, c: int, tt, greedy: bool) -> str:
    tok = rnd.tree.tokens[c]
    if c == 0:
        return (
            _head(rnd, _tok(tt, tok), ROOT)
            + f"<p>The root: the last committed token (id {tok}). Its children were drafted after it.</p>"
        )
    st, parent = rnd.status[c], rnd.tree.parents[c]
    q, p = rnd.tree.q[c], rnd.p[c]
    copied = c in (rnd.copied or ())
    parts = [
        _head(rnd, _tok(tt, tok), st),
        f"<p><b>{LABELS[st]}</b> · node {c}, depth {_depth(rnd, c)}, drafted after "
        f"<b>{_tok(tt, rnd.tree.tokens[parent])}</b> (id {tok})</p>",
        _verdict(rnd, c, tok, q, p, st, greedy, copied, tt),
    ]
    q_title = "q: copied, a point mass on this token" if copied else "q: the draft's distribution"
    residual, earlier = _residuals(rnd, c, tt)
    parts.append(
        '<div class="sv-tops">'
        + top_table(q_title, rnd.q_top[c] if rnd.q_top else None, tok, tt, "#60a5fa")
        + top_table(_p_title(rnd, c), rnd.p_top[c] if rnd.p_top else None, tok, tt, "#1e3a8a")
        + residual
        + "</div>"
        + earlier
    )
    parts.append(_specdecpp(rnd, c))
    parts.append(_growth(rnd, c, tt))
    return "".join(parts)


def _p_title(rnd: RoundTrace, c: int) -> str:
    h = rnd.p_entropy[c] if rnd.p_entropy else None
    return "p: the target's distribution" + (f" (entropy {h:.2f} nats)" if h is not None else "")


def _depth(rnd: RoundTrace, c: int) -> int:
    d = 0
    while c > 0:
        c, d = rnd.tree.parents[c], d + 1
    return d


def _verdict(rnd, c, tok, q, p, st, greedy, copied, tt) -> str:
    if st == UNVISITED:
        why = "an earlier sibling was accepted" if _sibling_accepted(rnd, c) else "the target never reached it"
        return f"<p>Not judged: {why}, so the verifier never compared it.</p>"
    if greedy:
        top = rnd.p_top[c] if rnd.p_top else None
        if top:
            am = top[0][0]
            same = "the drafted token" if am == tok else f"not the drafted {_tok(tt, tok)}"
            return (
                f"<p>Temperature 0: kept iff it is the target's argmax. The argmax is "
                f"<b>{_tok(tt, am)}</b> (p {_p(top[0][1])}), {same}: <b>{st}</b>.</p>"
            )
        return f"<p>Temperature 0: kept iff it is the target's argmax: <b>{st}</b> (p {_p(p)}, q {_p(q)}).</p>"
    u = None if rnd.u is None else rnd.u[c]
    if copied:
        ratio = "min(1, p/1) = " + _p(p)
    elif p is not None and q > 0:
        ratio = f"min(1, p/q) = min(1, {_p(p)} / {_p(q)}) = {_p(min(1.0, p / q))}"
    else:
        ratio = f"p {_p(p)}, q {_p(q)}"
    if u is None:
        return f"<p>Acceptance ratio {ratio}: <b>{st}</b> (this trace does not record the uniform draw u).</p>"
    r = min(1.0, p / (1.0 if copied else q)) if p is not None and (copied or q > 0) else None
    cmp = "" if r is None else (" &lt; " if u < r else " ≥ ") + _p(r)
    return f"<p>Acceptance ratio {ratio}; uniform draw u = {_p(u)}{cmp}: <b>{st}</b>.</p>"


def _sibling_accepted(rnd: RoundTrace, c: int) -> bool:
    parent = rnd.tree.parents[c]
    return any(rnd.tree.parents[s] == parent and rnd.status[s] == ACCEPTED for s in range(1, len(rnd.tree)))


def _residuals(rnd: RoundTrace, c: int, tt) -> tuple[str, str]:
    """At a rejection: the residual after this node in full, and a line on those after earlier rejected siblings."""
    if rnd.status[c] != REJECTED or not rnd.residual_top:
        return "", ""
    parent = rnd.tree.parents[c]
    sibs = [s for s in range(1, len(rnd.tree)) if rnd.tree.parents[s] == parent and rnd.status[s] == REJECTED]
    before = [s for s in sibs if s < c and rnd.residual_top[s]]
    nxt = next((s for s in range(c + 1, len(rnd.tree)) if rnd.tree.parents[s] == parent), None)
    then = (
        f"the next sibling {_tok(tt, rnd.tree.tokens[nxt])} was judged against it"
        if nxt is not None
        else "the correction was drawn from it"
    )
    table = top_table(
        f"residual norm(max(0, p − q)) after rejecting {_tok(tt, rnd.tree.tokens[c])}: {then}",
        rnd.residual_top[c],
        None,
        tt,
        PALETTE[CORRECTED],
    )
    out = []
    if before:
        steps = " → ".join(
            f"after {_tok(tt, rnd.tree.tokens[s])}: "
            + ", ".join(f"{_tok(tt, t)} {_p(x)}" for t, x in rnd.residual_top[s][:3])
            for s in before
        )
        out.append(f'<p class="sv-small">Earlier rejected siblings left: {steps}</p>')
    return table, "".join(out)


def _specdecpp(rnd: RoundTrace, c: int) -> str:
    """SpecDec++: at chain position i, the head's inputs, its factor, the running product and P(≥1 rejection) vs h."""
    stops = stop_probabilities(rnd)
    if rnd.accept_probs is None or stops is None or not 1 <= c <= len(rnd.accept_probs):
        return ""
    i = c
    a, s = rnd.accept_probs[i - 1], stops[i - 1]
    h = rnd.threshold
    verdict = "" if h is None else (f" &gt; h = {h:g}: drafting stopped here" if s > h else f" ≤ h = {h:g}: go on")
    rows = ""
    if rnd.head_inputs and i - 1 < len(rnd.head_inputs):
        cells = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{v:.3f}</td></tr>" for k, v in rnd.head_inputs[i - 1].items()
        )
        rows = f"<table class='sv-kv'>{cells}</table><p class='sv-small'>plus the draft's hidden state</p>"
    return (
        f'<div class="sv-block"><b>SpecDec++ at draft step {i}</b>: predicted factor P(accept) = {a:.3f}; '
        f"running product ∏ = {1 - s:.3f}; P(at least one rejection) = 1 − ∏ = {s:.3f}{verdict}.{rows}</div>"
    )


def _growth(rnd: RoundTrace, c: int, tt) -> str:
    """Tree methods: the node's value (the product of q along its path), the step it joined, when it was expanded,
    and (DySpec) the slots that competed for it."""
    if rnd.values is None or rnd.expand_order is None:
        return ""
    path, u = [], c
    while u > 0:
        path.append(rnd.tree.q[u])
        u = rnd.tree.parents[u]
    product = " × ".join(f"{x:.2f}" for x in reversed(path))
    step = rnd.expand_order.index(c) + 1 if c in rnd.expand_order else None
    kids = [s for s in range(1, len(rnd.tree)) if rnd.tree.parents[s] == c]
    first = min((rnd.expand_order.index(k) + 1 for k in kids), default=None)
    out = f'<div class="sv-block"><b>Growth</b>: node value {rnd.values[c]:.3f} (= {product})'
    if step is not None:
        out += f"; joined the tree at step {step} of {len(rnd.expand_order)}"
    out += f"; expanded at step {first} ({len(kids)} children)" if first else "; never expanded"
    if rnd.frontier and step is not None and step - 1 < len(rnd.frontier):
        slots = ", ".join(
            f"{_tok(tt, rnd.tree.tokens[s])} {v:.3f}{' (copy)' if copy else ''}"
            for s, v, copy in rnd.frontier[step - 1]
        )
        out += f". Slots competing at that step, best first (the first was drawn): {slots}"
    return out + ".</div>"


def _correction(rnd: RoundTrace, tt, greedy: bool) -> str:
    kind = correction_kind(rnd)
    if kind is None:
        return f"<p>Round {rnd.index} ended inside its accepted path (end of text or the length budget).</p>"
    tok = rnd.emitted[rnd.n_accepted]
    head = _head(rnd, _tok(tt, tok), kind)
    tip = rnd.accepted_path[-1] if rnd.accepted_path else 0
    if kind == TARGET:
        return head + "<p>Nothing was drafted: the target chose this token alone, as in autoregressive decoding.</p>"
    if kind == BONUS_TOKEN:
        return head + (
            "<p>Bonus: every drafted token on the path was accepted, so the target's own next token comes free from "
            "the same forward (" + ("its argmax" if greedy else "drawn from p after the last accepted node") + ").</p>"
        )
    tried = [s for s in range(1, len(rnd.tree)) if rnd.tree.parents[s] == tip and rnd.status[s] == REJECTED]
    names = ", ".join(_tok(tt, rnd.tree.tokens[s]) for s in tried)
    if greedy:
        return head + f"<p>The target's argmax after rejecting {names}: temperature 0 takes it directly.</p>"
    last = tried[-1] if tried else None
    table = (
        top_table("the residual it was drawn from", rnd.residual_top[last], tok, tt, PALETTE[CORRECTED])
        if last is not None and rnd.residual_top and rnd.residual_top[last]
        else ""
    )
    return head + f"<p>Resampled from the residual norm(max(0, p − q)) left after rejecting {names}.</p>" + table


def default_node(rnd: RoundTrace):
    """The node the panel opens on for a round: its first rejected node, else its correction, else the root."""
    rejected = [u for u, st in enumerate(rnd.status) if st == REJECTED]
    if rejected:
        return rejected[0]
    return CORRECTION if correction_kind(rnd) else 0
