"""The round in words: the titles and sentences over the tree view, and the growth replay's running commentary.

Notation as in `specviz.core.trace`.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping

from specviz.analysis.metrics import BONUS_TOKEN, CORRECTED, TARGET
from specviz.core.trace import BONUS, REJECTED, RESAMPLE, RoundTrace
from specviz.viz.style import token_label


def correction_kind(rnd: RoundTrace) -> str | None:
    """What the extra token after the accepted path is: BONUS_TOKEN, CORRECTED, TARGET (no draft) or None."""
    if len(rnd.emitted) <= rnd.n_accepted:
        return None  # the round stopped inside the accepted path (EOS, budget)
    if rnd.n_drafted == 0:
        return TARGET
    return BONUS_TOKEN if rnd.correction == BONUS else CORRECTED if rnd.correction == RESAMPLE else TARGET


def growth_sentence(rnd: RoundTrace, token_text: Mapping[int, str], step: int, level_threshold: float = 0) -> str:
    """The growth replay at `step` in words: the node just added, the value of the slot it came from, and the
    slots that competed for it (DySpec's level variant, `level_threshold` t > 0: every slot of a depth level worth
    at least t is drawn, best first)."""
    n = len(rnd.expand_order)
    if step == 0:
        head = f"step 0 of {n}: the root alone"
    else:
        c = rnd.expand_order[step - 1]
        tok, par = (
            quoted(token_text, [rnd.tree.tokens[c]]),
            quoted(token_text, [rnd.tree.tokens[rnd.tree.parents[c]]]),
        )
        head = f"step {step} of {n}: drew {tok} under {par} (q {rnd.tree.q[c]:.2g}"
        head += f", node value {rnd.values[c]:.2g})" if rnd.values is not None else ")"
        if rnd.frontier and step - 1 < len(rnd.frontier):
            (_, v, _), *rest = rnd.frontier[step - 1]
            others = ", ".join(f"{quoted(token_text, [rnd.tree.tokens[u]])} {w:.3f}" for u, w, _ in rest[:3])
            head += f"; its slot was worth {v:.3f}, " + (f"ahead of {others}" if rest else "the only one open")
            if level_threshold > 0:
                head += f" (this level draws every slot worth at least {level_threshold:g}, best first)"
    if rnd.frontier and step < len(rnd.frontier):
        u, v, copy = rnd.frontier[step][0]
        head += f"; next: a {'copy' if copy else 'draw'} under {quoted(token_text, [rnd.tree.tokens[u]])} ({v:.3f})"
    elif step == n:
        head += "; the tree is complete"
    return head + "."


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


def quoted(token_text: Mapping[int, str], toks) -> str:
    return "‘" + "".join(token_text.get(t, f"<{t}>") for t in toks).replace("\n", "↵")[:40] + "’"


def round_sentence(rnd: RoundTrace, token_text: Mapping[int, str], greedy: bool = False, width: int = 0) -> str:
    """The round in plain words: what was drafted, what the target kept, what it rejected and why, and where the
    extra token came from. Escaped for plotly; with `width`, wrapped into lines of at most that many characters."""
    kind = correction_kind(rnd)
    extra = rnd.emitted[rnd.n_accepted] if kind else None
    if rnd.n_drafted == 0:
        return wrapped(f"nothing was drafted: the target chose {quoted(token_text, [extra])} alone.", width)
    parents = set(rnd.tree.parents[1:])
    branches = sum(1 for u in range(1, len(rnd.tree)) if u not in parents)
    words = [f"drafted {rnd.n_drafted} token{'s' * (rnd.n_drafted > 1)}"]
    if branches > 1:
        words[0] += f" in {branches} branches"
    kept = [rnd.tree.tokens[u] for u in rnd.accepted_path]
    words.append(f"the target kept {quoted(token_text, kept)}" if kept else "the target kept none of them")
    rejected = [u for u, st in enumerate(rnd.status) if st == REJECTED]
    why = []
    for u in rejected[:3]:
        q, p = rnd.tree.q[u], rnd.p[u]
        if greedy:
            reason = "not the target's argmax"
        elif p is not None:
            reason = f"p {p:.2f} against q {q:.2f}"
            draw = None if rnd.u is None else rnd.u[u]
            if draw is not None and q > 0:
                reason += f", u {draw:.2f} > p/q" if draw * q >= p else f", u {draw:.2f}"
        else:
            reason = f"q {q:.2f}"
        why.append(f"{quoted(token_text, [rnd.tree.tokens[u]])} ({reason})")
    if rejected:
        more = f" and {len(rejected) - 3} more" if len(rejected) > 3 else ""
        words.append("rejected " + ", ".join(why) + more)
    if kind == BONUS_TOKEN:
        words.append(f"and drew the bonus {quoted(token_text, [extra])} from the target")
    elif kind == CORRECTED:
        words.append(
            f"and took the target's argmax {quoted(token_text, [extra])} instead"
            if greedy
            else f"and drew {quoted(token_text, [extra])} from the residual"
        )
    elif kind == TARGET:
        words.append(f"and added the target's {quoted(token_text, [extra])}")
    return wrapped("; ".join(words[:2]) + (", " + ", ".join(words[2:]) if words[2:] else "") + ".", width)


def wrapped(text: str, width: int) -> str:
    """`text` escaped for plotly, in lines of at most `width` characters joined by <br> (one line without a width)."""
    rows = textwrap.wrap(text, width, break_on_hyphens=False) if width else [text]
    return "<br>".join(html.escape(line, quote=False) for line in rows)


def round_subtitle(rnd: RoundTrace) -> str:
    return (
        f"+{len(rnd.emitted)} tokens · draft {rnd.draft_ms:.0f} ms ({rnd.draft_forwards} forwards) · "
        f"verify {rnd.verify_ms:.0f} ms · overhead {rnd.overhead_ms:.0f} ms"
    )
