"""Measured prior acceptance tables that the methods read before they have seen a round."""

from __future__ import annotations

# Sequoia's positional acceptance vector P[k] for a pair that has none measured yet: rank 1 dominates.
SEQUOIA_FALLBACK_ACCEPTANCE = (0.55, 0.12, 0.05, 0.03, 0.02, 0.015, 0.01, 0.01)


# Prompt lookup's prior acceptance (specviz.methods.lookup): LOOKUP_ACCEPTANCE[n - 1][j - 1] = P(the first j tokens
# copied after a matched n-gram are all accepted), measured with `specviz lookup-priors --max-ngram 8 --depth 16` on
# the target's greedy continuations of the training prompts, never Spec-Bench. Long matches are the target repeating
# itself: after an 8-token match the first copied token is right 92 % of the time and the first 16 all are 60 %.
# Deeper than the table, the last ratio continues (specviz.methods.lookup.plan.prior).
LOOKUP_ACCEPTANCE = (
    (0.19, 0.10, 0.06, 0.04, 0.03, 0.02, 0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.00),
    (0.52, 0.32, 0.21, 0.16, 0.12, 0.09, 0.07, 0.06, 0.05, 0.04, 0.04, 0.03, 0.03, 0.03, 0.03, 0.02),
    (0.60, 0.40, 0.30, 0.22, 0.17, 0.14, 0.11, 0.09, 0.08, 0.07, 0.06, 0.06, 0.05, 0.05, 0.04, 0.04),
    (0.66, 0.49, 0.36, 0.29, 0.23, 0.18, 0.15, 0.13, 0.11, 0.10, 0.10, 0.09, 0.08, 0.07, 0.07, 0.06),
    (0.73, 0.54, 0.43, 0.35, 0.28, 0.24, 0.20, 0.18, 0.16, 0.15, 0.14, 0.12, 0.12, 0.10, 0.10, 0.09),
    (0.74, 0.59, 0.48, 0.38, 0.33, 0.28, 0.24, 0.22, 0.20, 0.19, 0.17, 0.16, 0.14, 0.13, 0.13, 0.12),
    (0.79, 0.64, 0.51, 0.44, 0.38, 0.33, 0.30, 0.28, 0.26, 0.23, 0.22, 0.20, 0.18, 0.18, 0.17, 0.16),
    (0.92, 0.87, 0.82, 0.79, 0.76, 0.74, 0.71, 0.70, 0.68, 0.66, 0.65, 0.64, 0.63, 0.62, 0.61, 0.60),
)


# The same on the target's continuations sampled at T = 0.7 (`specviz lookup-priors --sampled`), the priors every
# sampled run uses: sampled text repeats less, and long copies are worth far less.
LOOKUP_ACCEPTANCE_SAMPLED = (
    (0.16, 0.07, 0.04, 0.02, 0.02, 0.01, 0.01, 0.01, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00),
    (0.44, 0.22, 0.14, 0.09, 0.06, 0.04, 0.03, 0.02, 0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01),
    (0.51, 0.31, 0.20, 0.13, 0.09, 0.07, 0.05, 0.04, 0.03, 0.03, 0.02, 0.02, 0.02, 0.02, 0.01, 0.01),
    (0.60, 0.38, 0.25, 0.19, 0.13, 0.09, 0.07, 0.06, 0.05, 0.04, 0.04, 0.03, 0.03, 0.03, 0.03, 0.02),
    (0.63, 0.41, 0.31, 0.21, 0.15, 0.12, 0.09, 0.08, 0.07, 0.06, 0.06, 0.06, 0.05, 0.04, 0.03, 0.03),
    (0.65, 0.48, 0.34, 0.23, 0.18, 0.15, 0.12, 0.11, 0.09, 0.09, 0.09, 0.07, 0.06, 0.05, 0.05, 0.04),
    (0.75, 0.52, 0.36, 0.29, 0.23, 0.19, 0.17, 0.14, 0.14, 0.14, 0.12, 0.10, 0.07, 0.07, 0.06, 0.05),
    (0.82, 0.71, 0.63, 0.57, 0.52, 0.48, 0.44, 0.41, 0.39, 0.36, 0.34, 0.32, 0.30, 0.29, 0.28, 0.27),
)


# A greedy round's first copied token, given its prior alpha_1 (above) and the draft's own probability q of it at the
# root (the D that sets node values): P(accepted) = sigmoid(b0 + b1 logit(alpha_1) + b2 logit(q)), (b0, b1, b2) below,
# a logistic fit to 1,054 rounds of the default pair (DySpec 4 with copying, the EAGLE drafter, bf16) on 48 training
# prompts, never Spec-Bench (`specviz copy-calibration --dtype bf16`). The prior alone misjudges the copy whenever the
# draft disagrees: with q < 0.05 (37 % of those rounds) 1.5 % of first copies were accepted, where their mean prior
# said 23 %; with q > 0.8, 81 % (prior 45 %).
COPY_CALIBRATION = (-0.325, 0.571, 0.501)
