"""SpecDec++'s stop rule: stop drafting once the predicted P(at least one rejection) exceeds h."""

from __future__ import annotations

from specviz.core.config import SpecDecPPConfig


def stop_rule(
    n: int,
    head_prob: float,
    cum: float,
    eos: bool,
    cfg: SpecDecPPConfig,
    budget: int | None = None,
    lagged: bool = True,
) -> tuple[float, str | None]:
    """One draft step of the SpecDec++ stop rule, as the official code runs it.

    Call it after the n-th candidate Y_n has been sampled. Returns the new running product
    ``cum`` and the stop reason, or None to draft Y_{n+1}.

    The one-step lag: the head is applied to the hidden state at the *last input position* of
    the draft forward that produced Y_n's logits, and that input is Y_{n-1} (for n = 1, the last
    committed token). So ``head_prob`` at step n is the predicted acceptance of Y_{n-1}, computed
    for free in the forward that drafts Y_n. At n = 1 the input token is already verified, so
    its factor is forced to 1 (``head_prob`` is ignored) and the threshold cannot fire. When the
    rule stops at step n, all n sampled candidates are submitted: the decision "P(a rejection
    among Y_1..Y_{n-1}) > h" still sends Y_n, which costs nothing more to draft and only one more
    position to verify.

    ``lagged=False`` (beyond the paper; a head trained with ``lag=False``, `AcceptanceHead`): ``head_prob``
    at step n is the predicted acceptance of Y_n itself, read from the hidden state that produced Y_n's
    logits and Y_n's own scalar inputs, so every factor counts, the rule can stop after Y_1, and stopping
    submits exactly Y_1..Y_n without a draft forward over Y_n.

    Order of checks (as in the official loop): EOS stops drafting at once; then the round's
    remaining token budget (``budget``, when it is below k_max) and k_max; below k_min never
    stop; otherwise stop when ``1 - cum > threshold`` (strictly).
    """
    cum = cum * (1.0 if lagged and n == 1 else float(head_prob))
    if eos:
        return cum, "eos"
    if budget is not None and budget < cfg.k_max and n >= budget:
        return cum, "budget"
    if n >= cfg.k_max:
        return cum, "k_max"
    if n < cfg.k_min:
        return cum, None
    return cum, ("threshold" if 1.0 - cum > cfg.threshold else None)


def stop_point(accept_probs, eos: list[bool], cfg: SpecDecPPConfig) -> int:
    """Where the rule stops on recorded per-step factors (a replay; the round must have drafted far enough).
    The recorded factors already carry the lag, if any (a lagged round records 1 at step 1)."""
    cum = 1.0
    for n, (a, e) in enumerate(zip(accept_probs, eos), 1):
        cum, reason = stop_rule(n, a, cum, e, cfg, lagged=False)
        if reason:
            return n
    return len(accept_probs)
