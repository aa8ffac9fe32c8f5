"""Configuration dataclasses: the single home of every default in specviz.

The app's widgets, the command line and the library all read their defaults from here.
Every dataclass validates itself in ``__post_init__`` and raises ``ValueError`` with a
message a user can act on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

METHODS = ("ar", "chain", "heuristic", "specdecpp", "dyspec", "kary", "sequoia", "lookup")
# Which draft proposes: "model" the standalone causal-LM draft, "eagle" the feature drafter reading the
# target's hidden states (specviz/eagle.py), "auto" the EAGLE drafter where the pair has one (and, for
# SpecDec++, an acceptance head trained on it), else the standalone draft.
DRAFTERS = ("auto", "eagle", "model")
METHOD_LABELS = {
    "ar": "Autoregressive (target only)",
    "chain": "Speculative sampling, fixed K",
    "heuristic": "HF heuristic K (+2 / -1)",
    "specdecpp": "SpecDec++ (acceptance head)",
    "dyspec": "DySpec dynamic tree",
    "kary": "Fixed k-ary tree (SpecInfer-style)",
    "sequoia": "Sequoia DP tree",
    "lookup": "Prompt lookup (no draft model)",
}
DTYPES = ("auto", "bf16", "fp32")   # auto: see ModelConfig
MAX_NEW_TOKENS_LIMIT = 2048
MAX_PROMPT_TOKENS = 4096


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are drawn. Applied identically to the target and the draft.

    temperature 0 means greedy (argmax); top_k 0 and top_p 1 mean "no truncation".
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        _check(isinstance(self.temperature, (int, float)) and self.temperature == self.temperature,
               "temperature must be a number")
        _check(self.temperature >= 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        _check(self.temperature <= 100, f"temperature {self.temperature} is absurd; use a value in [0, 100]")
        _check(int(self.top_k) == self.top_k and self.top_k >= 0, f"top_k must be an integer >= 0, got {self.top_k}")
        _check(0 < self.top_p <= 1, f"top_p must lie in (0, 1], got {self.top_p}")
        _check(int(self.seed) == self.seed and 0 <= self.seed < 2**63, f"seed must be a non-negative integer, got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class ChainConfig:
    """Classic speculative sampling: the draft proposes exactly k tokens per round."""

    k: int = 3

    def __post_init__(self):
        _check(int(self.k) == self.k and 1 <= self.k <= 64, f"K (draft length) must be an integer in [1, 64], got {self.k}")


@dataclass(frozen=True)
class HeuristicConfig:
    """Hugging Face assisted generation's 'heuristic' schedule: K += 2 after a fully accepted round, else K -= 1."""

    start_k: int = 5
    max_k: int = 20

    def __post_init__(self):
        _check(1 <= self.start_k <= self.max_k <= 64, f"need 1 <= start K <= max K <= 64, got {self.start_k}, {self.max_k}")


@dataclass(frozen=True)
class SpecDecPPConfig:
    """SpecDec++: stop drafting once the predicted P(at least one rejection) exceeds `threshold` (h).

    Defaults measured for the shipped pair on the 2-core CPU (assets/specdecpp/). The default pair's SpecDec++
    drafts with the EAGLE drafter and its head; `python -m specviz.sweep run` (4 prompts per family x 64
    tokens, every h against fixed K = 1..3) measured h = 0.7 best of {0.7, 0.9, 0.95} on the stage-3 drafter
    (sweep-eagle.md), then h = 0.5 best of {0.5, 0.7, 0.9} on the stage-4 drafter at T = 0 and T = 1
    (sweep-eagle4.md; union of chat / math / code: 16.28 tokens/s at T = 0 against 15.79 for h = 0.7 and 16.99
    for the best fixed K = 1; 15.13 at T = 1 against 14.62 and 14.89), and h = 0.7 best of {0.7, 0.9, 0.95, 0.98}
    for the shipped head without the lag (sweep-nolag.md: T = 0 union 21.31 tokens/s, mean K 1.36, against
    20.55 for the best fixed K = 3 and 20.76 for h = 0.9; T = 1 h = 0.9 16.24 against 16.35 for K = 2 and 15.24
    for h = 0.7: a sampled round is accepted less, so 0.7 stops at one candidate there). On the stage-5 drafter
    (copy input) and its head, h = 0.8: `python -m specviz.sweep pick-h --k-mins 1 2 3 --k-maxs 4 6 8`
    (pick-h-stage5.json, composed calibration prompts) models h = 0.8 best at T = 0 (37.6 ms per token against
    37.8 for 0.7 and 39.2 for the best fixed K = 1; the per-round oracle 31.2) and within 0.1 % of the best
    (0.85) at T = 1, and `sweep run --hs 0.6 0.7 0.8 0.9 --k-mins 1 2` (sweep-kmin.md, Spec-Bench) timed h = 0.8
    fastest on the union (19.46 tokens/s against 18.76 for 0.7 and 19.17 for the best fixed K = 3), on chat and
    code, and ahead of 0.7 on all three families. For the standalone draft's head
    (`--drafter model`) the cost-model pick was h = 0.9 (`python -m specviz.sweep pick-h`, pick-h.json:
    66.2 ms per token against 66.9 for the best fixed K = 3).
    Both heads are trained with reject weight 6, so their acceptances sit below the truth and the product
    crosses small h after one or two candidates. k_max = 6: every k_max in 6..12 ties (the threshold fires
    first), and 6 bounds a round's verify forward where the measured verify cost is still flat. k_min = 1:
    one-token drafts are the best fixed K on most families, and k_min = 2 measured slower (sweep-kmin.md: 19.11
    tokens/s at best, h = 0.7; pick-h models 39.3 ms per token at best against 37.5 for k_min = 1).
    """

    threshold: float = 0.8
    k_min: int = 1
    k_max: int = 6

    def __post_init__(self):
        _check(0 < self.threshold < 1, f"threshold h must lie in (0, 1), got {self.threshold}")
        _check(1 <= self.k_min <= self.k_max <= 64, f"need 1 <= k_min <= k_max <= 64, got {self.k_min}, {self.k_max}")


@dataclass(frozen=True)
class HeadTrainConfig:
    """`python -m specviz.train head`: data and optimisation of the SpecDec++ acceptance head.

    Each batch of prompts is one regime: greedy (labels 1[argmax p = argmax q]) with probability
    `greedy_fraction`, else sampled at T = 1 (labels min(1, p/q)). `mixing_ratio` of the input tokens
    are the target's own (no loss there); `reject_weight` is w of the weighted soft BCE.
    """

    prompts: int = 960          # 480 until 2026-12: twice the rows, and a held-out split of 144 prompts, not 72
    new_tokens: int = 96
    gen_batch: int = 48
    greedy_fraction: float = 0.5
    mixing_ratio: float = 0.15
    reject_weight: float = 6.0
    num_layers: int = 1         # measured: 1 block 0.692 held-out AUC, 3 blocks 0.681, 0 blocks 0.678
    # beyond the paper: scalar inputs beside the hidden state (head_inputs.CATALOG). Measured on the EAGLE
    # drafter (held-out AUC, same rows): log_q + greedy 0.776, these eight 0.802, + target_entropy 0.802.
    inputs: tuple[str, ...] = ("log_q", "greedy", "entropy", "log_top1", "log_top2", "depth", "copy_n", "copy_y")
    # the paper's one-step lag (AcceptanceHead, specdecpp.stop_rule); False: each candidate is scored before any
    # forward over it, so a round can stop at one token. Same rows and sweep (assets/specdecpp/sweep-nolag.md):
    # held-out AUC 0.802 lagged / 0.800 not; T = 0 union against the best fixed K: -3.8 % lagged, +3.7 % not.
    lag: bool = False
    epochs: int = 8             # at most; the epoch with the least validation loss is kept
    lr: float = 1e-3
    batch: int = 256
    heldout_fraction: float = 0.15
    seed: int = 0

    def __post_init__(self):
        _check(self.prompts >= 2 and self.new_tokens >= 1 and self.gen_batch >= 1, "need >= 2 prompts, >= 1 new token, batch >= 1")
        _check(0 <= self.greedy_fraction <= 1 and 0 <= self.mixing_ratio < 1, "greedy fraction in [0, 1], mixing ratio in [0, 1)")
        _check(self.reject_weight > 0 and self.lr > 0 and self.epochs >= 1 and self.batch >= 1, "reject weight, lr, epochs, batch must be positive")
        _check(0 <= self.num_layers <= 8, f"head layers must lie in [0, 8], got {self.num_layers}")
        from .head_inputs import check
        check(self.inputs)
        _check(0 < self.heldout_fraction < 1, f"held-out fraction must lie in (0, 1), got {self.heldout_fraction}")


@dataclass(frozen=True)
class DraftTrainConfig:
    """`python -m specviz.train draft`: distil the target into a small standalone draft.

    Data: the target's greedy continuations of `greedy_prompts` composed chat prompts, of `doc_prompts`
    long-context prompts over documents it wrote, of `broad_prompts` / `real_prompts` as for the EAGLE drafter
    (same cached shards), and sampled ones (T = `sample_temperature`) of `sampled_prompts` more; `top_k` log-probs
    kept. Draft: the target's layers `init_layers` + its final norm, embeddings and output layer shared (frozen),
    output restricted to the `head_size` most frequent response tokens. Loss: cross-entropy to the target's top-k.
    """

    greedy_prompts: int = 768
    doc_prompts: int = 64
    sampled_prompts: int = 384
    sample_temperature: float = 0.7
    broad_prompts: int = 0
    real_prompts: int = 0
    new_tokens: int = 128
    top_k: int = 32
    head_size: int = 8192
    init_layers: tuple[int, ...] = (0,)
    steps: int = 700
    batch_tokens: int = 3072
    lr: float = 3e-3
    warmup: int = 30
    checkpoint_every: int = 50
    heldout_fraction: float = 0.03
    eval_prompts: int = 40
    seed: int = 0

    def __post_init__(self):
        _check(min(self.greedy_prompts, self.new_tokens, self.top_k, self.steps, self.batch_tokens) >= 1
               and min(self.doc_prompts, self.sampled_prompts, self.broad_prompts, self.real_prompts) >= 0,
               "greedy prompts, new tokens, top k, steps, batch tokens >= 1; doc / sampled / broad / real prompts >= 0")
        _check(256 <= self.head_size <= 49152, f"head size must lie in [256, 49152], got {self.head_size}")
        _check(len(self.init_layers) >= 1, "the draft needs at least one layer (init_layers)")
        _check(self.lr > 0 and 0 < self.sample_temperature <= 2, "lr must be > 0, sample temperature in (0, 2]")
        _check(0 < self.heldout_fraction < 1 and 1 <= self.eval_prompts <= 480, "held-out fraction in (0, 1), eval prompts in [1, 480]")


@dataclass(frozen=True)
class EagleTrainConfig:
    """`python -m specviz.train eagle`: the EAGLE-style drafter (specviz/eagle.py) on the standalone draft's
    distillation data; the card (models/smollm2-eagle/README.md) lists every stage and its command. Spec-Bench
    agreement by stage: 1-4 (composed, long-context and real-text prompts) 0.30 -> 0.33; 5 `--copy-input` 0.466;
    6-7 `--real-prompts 1920 / 3200` (ShareGPT first turns) 0.535 / 0.548; shipped 8 `--context-vocab` 0.604 (0.589
    from ModelConfig.context_vocab alone). Not shipped (assets/experiments/): target-written prompts, more composed
    prompts, no feature loss, fused target layers, a gentler continuation.
    """

    steps: int = 200
    batch_tokens: int = 4096
    lr: float = 1e-3
    warmup: int = 20
    greedy_prompts: int = DraftTrainConfig.greedy_prompts     # composed chat prompts, greedy (the draft's recipe)
    sampled_prompts: int = DraftTrainConfig.sampled_prompts   # composed chat prompts, sampled (the draft's recipe)
    doc_prompts: int = 64            # long-context prompts in the distillation data (the draft's recipe: 64)
    broad_prompts: int = 0           # more prompts over real text (train/corpus.py), beside the draft's data
    self_prompts: int = 0            # more prompts the target writes itself (train/selfprompts.py)
    real_prompts: int = 0            # more prompts real users wrote: ShareGPT first turns (train/sharegpt.py)
    noise: float = 0.05
    feat_weight: float = 0.1
    balance_inputs: bool = False     # scale f to |e| in fc's input (slows the feature path down; measured worse)
    copy_input: bool = False         # add the prompt-lookup input a_n e(y) (eagle.add_copy_input; n-grams up to LookupConfig's)
    context_vocab: bool = False      # the loss's q also covers each position's context (ModelConfig.context_vocab)
    copy_gain: float = 30.0          # a_n at the start: 30 let the zero block learn in 150 steps (1: 0.390, 10: 0.452, 30: 0.476)
    checkpoint_every: int = 25
    heldout_fraction: float = 0.03
    eval_prompts: int = 40
    seed: int = 0

    def __post_init__(self):
        _check(min(self.steps, self.batch_tokens, self.checkpoint_every, self.eval_prompts, self.greedy_prompts) >= 1
               and min(self.doc_prompts, self.broad_prompts, self.self_prompts, self.real_prompts, self.sampled_prompts) >= 0,
               "steps, batch tokens, checkpoint interval, eval and greedy prompts must be >= 1, doc / broad / self / real / sampled prompts >= 0")
        _check(self.lr > 0 and self.noise >= 0 and self.feat_weight >= 0 and 0 < self.heldout_fraction < 1,
               "need lr > 0, noise >= 0, feature weight >= 0 and a held-out fraction in (0, 1)")
        _check(0 < self.copy_gain <= 1000, f"need 0 < copy gain <= 1000, got {self.copy_gain}")


@dataclass(frozen=True)
class DySpecConfig:
    """DySpec: grow a token tree greedily by estimated value until `budget` draft nodes.

    `level_threshold` > 0 selects the layer-by-layer variant (one draft forward per depth level,
    slots worth >= the threshold); 0 selects the exact heap variant (Algorithm 1; draft forwards
    batched lazily). Default: the level variant at t = 0.05, chosen by measurement on the 2-core CPU
    (13 Spec-Bench prompts, fp32, budget 16): 7.5 vs 6.7 tokens/s for the heap variant at T = 0, 8.3 vs
    7.4 at T = 1; fewer, wider draft forwards. Budget 3, the pick of `python -m specviz.budget` (this
    machine's verify curve and the pair's acceptance vector: 3 drafted nodes + the root make 4 rows, MKL's
    fast width), confirmed on 40 Spec-Bench prompts x 128 tokens, T = 0, EAGLE drafter
    (assets/bench/bench-gqa-budget3-40x128.md): 15.2 tokens/s at budget 3 against 13.3 at 4 (AR 12.4); on
    the 12-prompt suite before that, 10.5 / 8.6 / 7.6 at budgets 4 / 8 / 16. A better-accepted draft, or a
    device whose verify cost is flat (assets/bench/cuda-h200), will want a larger one. `draft_temperature`
    sets the draft probabilities that value the nodes at target temperature 0; at T > 0 the draft is
    warped like the target.
    """

    budget: int = 3
    level_threshold: float = 0.05
    max_depth: int = 8
    draft_temperature: float = 0.6

    def __post_init__(self):
        _check(int(self.budget) == self.budget and 1 <= self.budget <= 256, f"tree budget must be an integer in [1, 256], got {self.budget}")
        _check(0 <= self.level_threshold < 1, f"level threshold must lie in [0, 1), got {self.level_threshold}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")
        _check(0 < self.draft_temperature <= 10, f"draft temperature must lie in (0, 10], got {self.draft_temperature}")


# Sequoia's positional acceptance vector P[k] for a pair that has none measured yet: rank 1 dominates.
SEQUOIA_FALLBACK_ACCEPTANCE = (0.55, 0.12, 0.05, 0.03, 0.02, 0.015, 0.01, 0.01)


@dataclass(frozen=True)
class TreeConfig:
    """Static trees. `kary`: `width` children per node down to `depth`; `sequoia`: DP tree of `budget` drafted
    nodes (root excluded) and depth <= `max_depth`, from the pair's measured positional acceptance vector
    (SEQUOIA_FALLBACK_ACCEPTANCE until one is measured). Budget 3 as for DySpec, by measurement (40 x 128,
    fp32, T = 0: 14.8 tokens/s at budget 3, 12.5 at 4; README benchmark, 12 prompts, T = 0 / 1: 10.4 / 9.9
    at budget 4 against 7.4 / 7.7 at 16)."""

    width: int = 2
    depth: int = 3
    budget: int = 3
    max_depth: int = 8

    def __post_init__(self):
        _check(1 <= self.width <= 16, f"tree width must lie in [1, 16], got {self.width}")
        _check(1 <= self.depth <= 16, f"tree depth must lie in [1, 16], got {self.depth}")
        _check(1 <= self.budget <= 256, f"tree budget must lie in [1, 256], got {self.budget}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")


# Prompt lookup's prior acceptance (lookup.py): LOOKUP_ACCEPTANCE[n - 1][j - 1] = P(the first j tokens copied after
# a matched n-gram are all accepted). Measured on the target's greedy continuations of the training prompts, never
# Spec-Bench (`python -m specviz.lookup --max-ngram 8 --depth 16`: 52,391 positions with a match, of 1 / 2 / 3 / 4 /
# 5 / 6 / 7 / 8 tokens at 23172 / 7677 / 4385 / 2780 / 1908 / 1432 / 1073 / 9964 of them). Long matches are the
# target repeating itself, and it does: after an 8-token match the first copied token is right 92 % of the time and
# the first 16 all are 60 %, where the EAGLE drafter's greedy agreement is 0.33. Deeper, the last ratio continues.
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
# The same on the target's continuations sampled at T = 0.7 (`python -m specviz.lookup --sampled`: 22,702 matched
# positions), the priors every sampled run uses: sampled text repeats less, and long copies are worth far less.
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


@dataclass(frozen=True)
class LookupConfig:
    """Prompt lookup (lookup.py): copy what followed the most recent earlier occurrence of the context's last
    n-gram, n from `max_ngram` down to `min_ngram`.

    The `lookup` method proposes `k` copied tokens a round. With `RunConfig.copy` on, a DySpec tree spends its
    budget on copied tokens where their prior acceptance (LOOKUP_ACCEPTANCE) beats the draft's next node, at most
    `k` of them, and a chain method (chain, heuristic, SpecDec++) makes a round a copy round instead of drafting
    when the first copied token's prior reaches `switch_at` (0.5: a match of 2 or more tokens, whose 3 copies are
    worth 1 + 0.52 + 0.32 + 0.21 = 2.05 tokens a round against the EAGLE chain's measured tau of 1.3-1.5).
    Where this device has a stored verify curve (`python -m specviz.budget`), both then copy further, up to
    `extend_to` copied tokens in all, as far as the expected tokens per verify millisecond keep rising
    (`lookup.best_extension`; copies need no draft forward); 0 turns that off. k = 3 keeps a round at the
    4 rows MKL multiplies at one row's cost on the development CPU; 16 rows cost 1.8x one (verify curve) while a
    long match's 16th copy is still right 60 % of the time. Measured (40 Spec-Bench prompts x 128 tokens, T = 0,
    assets/bench/bench-extend-40x128.md): DySpec with copies 1.51x AR with extend_to 0, 1.60x with 15.
    """

    max_ngram: int = 8
    min_ngram: int = 1
    k: int = 3
    extend_to: int = 15
    switch_at: float = 0.5

    def __post_init__(self):
        _check(1 <= self.min_ngram <= self.max_ngram <= len(LOOKUP_ACCEPTANCE),
               f"need 1 <= min n-gram <= max n-gram <= {len(LOOKUP_ACCEPTANCE)}, got {self.min_ngram}, {self.max_ngram}")
        _check(int(self.k) == self.k and 1 <= self.k <= 64, f"lookup length k must be an integer in [1, 64], got {self.k}")
        _check(int(self.extend_to) == self.extend_to and 0 <= self.extend_to <= 256,
               f"lookup extend_to must be an integer in [0, 256], got {self.extend_to}")
        _check(0 <= self.switch_at <= 1, f"lookup switch_at must lie in [0, 1], got {self.switch_at}")


@dataclass(frozen=True)
class RunConfig:
    """One generation: which method, how long, and the per-method knobs. `copy` adds prompt lookup to the
    methods that draft with a model (chain, heuristic, specdecpp, dyspec; see LookupConfig); others ignore it."""

    method: str = "chain"
    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    chain: ChainConfig = field(default_factory=ChainConfig)
    heuristic: HeuristicConfig = field(default_factory=HeuristicConfig)
    specdecpp: SpecDecPPConfig = field(default_factory=SpecDecPPConfig)
    dyspec: DySpecConfig = field(default_factory=DySpecConfig)
    tree: TreeConfig = field(default_factory=TreeConfig)
    lookup: LookupConfig = field(default_factory=LookupConfig)
    drafter: str = "auto"
    copy: bool = False              # also copy from the context (prompt lookup): every drafting method

    def __post_init__(self):
        _check(self.drafter in DRAFTERS, f"drafter must be one of {', '.join(DRAFTERS)}, got {self.drafter!r}")
        _check(isinstance(self.copy, bool), f"copy must be true or false, got {self.copy!r}")
        _check(self.method in METHODS, f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        _check(int(self.max_new_tokens) == self.max_new_tokens and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT,
               f"max new tokens must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        sub = {f.name: f.type for f in fields(cls)}
        kinds = {"sampling": SamplingConfig, "chain": ChainConfig, "heuristic": HeuristicConfig,
                 "specdecpp": SpecDecPPConfig, "dyspec": DySpecConfig, "tree": TreeConfig,
                 "lookup": LookupConfig}
        kw = {}
        for k, v in d.items():
            if k not in sub:
                continue
            kw[k] = kinds[k](**v) if k in kinds else v
        return cls(**kw)


@dataclass(frozen=True)
class ModelConfig:
    """Which pair to load. None means the shipped offline default.

    dtype "auto" is bf16 on a GPU that has it and on a CPU with AMX, fp32 elsewhere. On an AVX2-only CPU bf16 is
    emulated: a target forward over 1 / 16 tree tokens took 72 / 541 ms against 69 / 122 in fp32 with specviz's
    kernels, which would price trees out. On a Xeon with AMX (2026-12-02, `python -m specviz.budget`) bf16 is the
    flat one (38.6 / 50.7 ms; fp32 37.4 / 70.4) and as exact, its attention batch-invariant (rows_attention.py):
    0 greedy mismatches where the fused attention had left the autoregressive output on 5-7 of 8 prompts. The bf16
    matmuls' own invariance is measured, not promised: `load_pair` probes it and falls back to fp32 where it fails.

    context_vocab: a reduced-vocabulary draft's output layer also covers every token of its context (`lm.LM`);
    the 8192 shipped ids hold 88.7 % of the target's greedy tokens on held-out Spec-Bench, those plus the
    context 97.5 %; the EAGLE drafter's agreement rose 0.548 -> 0.589 with no retraining, 0.604 trained for it.
    """

    target: str | None = None
    draft: str | None = None
    eagle: str | None = None          # EAGLE drafter folder; None = the shipped one with the default pair, "none" = off
    dtype: str = "auto"
    device: str = "auto"
    context_vocab: bool = True

    def __post_init__(self):
        _check(self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        _check(self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
               f"device must be auto, cpu or cuda[:N], got {self.device!r}")


@dataclass(frozen=True)
class BenchConfig:
    """`python -m specviz bench`: the prompt suite and the settings swept (Spec-Bench sample by default).

    chain_ks: our fixed-K chains; hf_ks: Hugging Face assisted generation with a constant K (threshold 0),
    run beside its default dynamic schedule. warmup_tokens: length of the untimed warm-up runs.
    """

    n_prompts: int = 80
    max_new_tokens: int = 128
    temperatures: tuple[float, ...] = (0.0, 1.0)
    seed: int = 0
    chain_ks: tuple[int, ...] = (2, 3, 4)
    hf_ks: tuple[int, ...] = (2, 4, 8)
    warmup_tokens: int = 16

    def __post_init__(self):
        _check(int(self.n_prompts) == self.n_prompts and self.n_prompts >= 1, f"need at least one prompt, got {self.n_prompts}")
        _check(1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT,
               f"max new tokens must lie in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}")
        _check(len(self.temperatures) >= 1 and all(0 <= t <= 100 for t in self.temperatures),
               f"temperatures must be numbers in [0, 100], got {self.temperatures}")
        _check(all(1 <= k <= 64 for k in (*self.chain_ks, *self.hf_ks)), "every K must lie in [1, 64]")
        _check(0 <= self.warmup_tokens <= MAX_NEW_TOKENS_LIMIT, f"warm-up tokens must lie in [0, {MAX_NEW_TOKENS_LIMIT}]")
