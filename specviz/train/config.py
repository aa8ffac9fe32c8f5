"""Training configurations: the data and optimisation of `python -m specviz.train draft | eagle | head`."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.config import _check
from specviz.methods.specdecpp.inputs import check
from specviz.models.eagle import MAX_LAYERS
from specviz.models.lm import checked_taps


@dataclass(frozen=True)
class HeadTrainConfig:
    """`python -m specviz.train head`: data and optimisation of the SpecDec++ acceptance head.

    Each batch of prompts is one regime: greedy (labels 1[argmax p = argmax q]) with probability
    `greedy_fraction`, else sampled at T = 1 (labels min(1, p/q)). `mixing_ratio` of the input tokens
    are the target's own (no loss there); `reject_weight` is w of the weighted soft BCE.
    """

    prompts: int = 960  # composed chat prompts (another seed than the draft's)
    new_tokens: int = 96
    gen_batch: int = 48
    greedy_fraction: float = 0.5
    mixing_ratio: float = 0.15
    reject_weight: float = 6.0
    num_layers: int = 1  # residual SiLU blocks; 1 chosen by held-out AUC (models/smollm2-draft/README.md)
    # beyond the paper: scalar inputs beside the hidden state (specviz.methods.specdecpp.inputs.CATALOG); these
    # eight chosen by held-out AUC (models/smollm2-eagle/README.md)
    inputs: tuple[str, ...] = ("log_q", "greedy", "entropy", "log_top1", "log_top2", "depth", "copy_n", "copy_y")
    # the paper's one-step lag (AcceptanceHead, specviz.methods.specdecpp.stop_rule); False: each candidate is
    # scored before any forward over it, so a round can stop at one token. False chosen by measurement
    # (assets/bench/specdecpp/sweep-nolag.md, models/smollm2-eagle/README.md)
    lag: bool = False
    epochs: int = 8  # at most; the epoch with the least validation loss is kept
    lr: float = 1e-3
    batch: int = 256
    heldout_fraction: float = 0.15
    seed: int = 0

    def __post_init__(self):
        _check(
            self.prompts >= 2 and self.new_tokens >= 1 and self.gen_batch >= 1,
            "need >= 2 prompts, >= 1 new token, batch >= 1",
        )
        _check(
            0 <= self.greedy_fraction <= 1 and 0 <= self.mixing_ratio < 1,
            "greedy fraction in [0, 1], mixing ratio in [0, 1)",
        )
        _check(
            self.reject_weight > 0 and self.lr > 0 and self.epochs >= 1 and self.batch >= 1,
            "reject weight, lr, epochs, batch must be positive",
        )
        _check(0 <= self.num_layers <= 8, f"head layers must lie in [0, 8], got {self.num_layers}")
        check(self.inputs)
        _check(0 < self.heldout_fraction < 1, f"held-out fraction must lie in (0, 1), got {self.heldout_fraction}")


# `python -m specviz.train head --quick` and the page's "train a head": minutes on a 2-core CPU for a small pair
# (docs/training.md#a-head-for-your-own-pair has its measured time and AUC)
QUICK = HeadTrainConfig(prompts=192, new_tokens=64, gen_batch=16, epochs=6)


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
    checkpoint_minutes: float = 5.0  # a checkpoint (no evaluation) at least this often, for a run cut short
    bf16: bool = False  # forward and backward under bf16 autocast (weights and Adam stay fp32); see train/loop.py
    heldout_fraction: float = 0.03
    eval_prompts: int = 40
    seed: int = 0

    def __post_init__(self):
        _check(
            min(self.greedy_prompts, self.new_tokens, self.top_k, self.steps, self.batch_tokens) >= 1
            and min(self.doc_prompts, self.sampled_prompts, self.broad_prompts, self.real_prompts) >= 0,
            "greedy prompts, new tokens, top k, steps, batch tokens >= 1; doc / sampled / broad / real prompts >= 0",
        )
        _check(256 <= self.head_size <= 49152, f"head size must lie in [256, 49152], got {self.head_size}")
        _check(len(self.init_layers) >= 1, "the draft needs at least one layer (init_layers)")
        _check(self.checkpoint_minutes > 0, f"need checkpoint minutes > 0, got {self.checkpoint_minutes}")
        _check(self.lr > 0 and 0 < self.sample_temperature <= 2, "lr must be > 0, sample temperature in (0, 2]")
        _check(
            0 < self.heldout_fraction < 1 and 1 <= self.eval_prompts <= 480,
            "held-out fraction in (0, 1), eval prompts in [1, 480]",
        )


@dataclass(frozen=True)
class EagleTrainConfig:
    """`python -m specviz.train eagle`: the EAGLE-style drafter (specviz.models.eagle) on the standalone draft's
    distillation data, plus `broad_prompts` / `self_prompts` / `real_prompts` more. The defaults are the first
    stage's recipe; later stages continue a shipped drafter with `--warm-start` and other flags. The model card
    (models/smollm2-eagle/README.md) lists every stage, its command and what it added; experiments that were not
    shipped are in assets/bench/experiments/.
    """

    steps: int = 200
    batch_tokens: int = 4096
    lr: float = 1e-3
    warmup: int = 20
    greedy_prompts: int = DraftTrainConfig.greedy_prompts  # composed chat prompts, greedy (the draft's recipe)
    sampled_prompts: int = DraftTrainConfig.sampled_prompts  # composed chat prompts, sampled (the draft's recipe)
    doc_prompts: int = 64  # long-context prompts in the distillation data (the draft's recipe: 64)
    broad_prompts: int = 0  # more prompts over real text (train/corpus.py), beside the draft's data
    self_prompts: int = 0  # more prompts the target writes itself (train/selfprompts.py)
    real_prompts: int = 0  # more prompts real users wrote: ShareGPT first turns (train/sharegpt.py)
    fixed_prompts: int = 0  # EAGLE-1's data: ShareGPT exchanges whose answers (not the target's) are prefilled
    noise: float = 0.05
    feat_weight: float = 0.1
    layers: int = 1  # decoder layers; more than the warm start's are added as identities (models.eagle.build_eagle)
    taps: tuple[int, ...] = ()  # target layers whose normed outputs fc also reads (models.eagle.add_feature_taps)
    balance_inputs: bool = False  # scale f to |e| in fc's input (slows the feature path down; measured worse)
    copy_input: bool = False  # add the prompt-lookup input a_n e(y) (specviz.models.eagle.add_copy_input;
    # n-grams up to LookupConfig's)
    context_vocab: bool = False  # the loss's q also covers each position's context (ModelConfig.context_vocab)
    copy_gain: float = 30.0  # a_n at the start: a larger gain makes Adam move the new zero block faster;
    # 30 chosen by measurement (assets/bench/experiments/eagle-copy-input)
    checkpoint_every: int = 25
    checkpoint_minutes: float = 5.0  # a checkpoint (no evaluation) at least this often, for a run cut short
    bf16: bool = False  # forward and backward under bf16 autocast (weights and Adam stay fp32); see train/loop.py
    heldout_fraction: float = 0.03
    eval_prompts: int = 40
    seed: int = 0

    def __post_init__(self):
        _check(
            min(self.steps, self.batch_tokens, self.checkpoint_every, self.eval_prompts, self.greedy_prompts) >= 1
            and min(
                self.doc_prompts,
                self.broad_prompts,
                self.self_prompts,
                self.real_prompts,
                self.sampled_prompts,
                self.fixed_prompts,
            )
            >= 0,
            "steps, batch tokens, checkpoint interval, eval and greedy prompts must be >= 1, "
            "doc / broad / self / real / sampled prompts >= 0",
        )
        _check(
            self.lr > 0 and self.noise >= 0 and self.feat_weight >= 0 and 0 < self.heldout_fraction < 1,
            "need lr > 0, noise >= 0, feature weight >= 0 and a held-out fraction in (0, 1)",
        )
        _check(0 < self.copy_gain <= 1000, f"need 0 < copy gain <= 1000, got {self.copy_gain}")
        _check(
            1 <= self.layers <= MAX_LAYERS, f"an EAGLE drafter has 1 to {MAX_LAYERS} decoder layers, got {self.layers}"
        )
        _check(self.checkpoint_minutes > 0, f"need checkpoint minutes > 0, got {self.checkpoint_minutes}")
        object.__setattr__(self, "taps", checked_taps(self.taps))  # a tuple, also from a card's JSON list


def precision(cfg: DraftTrainConfig | EagleTrainConfig) -> str:
    """How a run's steps computed (`bf16`), as its model card says it."""
    return "bf16 autocast (fp32 weights and Adam)" if cfg.bf16 else "fp32"
