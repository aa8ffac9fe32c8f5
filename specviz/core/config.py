"""Configuration dataclasses: the single home of every default in specviz.

The app's widgets, the command line and the library all read their defaults from here.
Every dataclass validates itself in ``__post_init__`` and raises ``ValueError`` with a
message a user can act on.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

from specviz.core.priors import LOOKUP_ACCEPTANCE

METHODS = ("ar", "chain", "heuristic", "specdecpp", "dyspec", "kary", "sequoia", "lookup")  # see methods.catalog
# Which draft proposes: "model" the standalone causal-LM draft, "eagle" the feature drafter reading the
# target's hidden states (specviz.models.eagle), "auto" the EAGLE drafter where the pair has one (and, for
# SpecDec++, an acceptance head trained on it), else the standalone draft.
DRAFTERS = ("auto", "eagle", "model")
DTYPES = ("auto", "bf16", "fp32")  # auto: see ModelConfig
KV_CACHES = ("growing", "fixed")  # specviz.models.kvcache
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's strategies (or a JSON file)
MAX_NEW_TOKENS_LIMIT = 2048
MAX_RECORD_TOP = 64  # most [token, probability] pairs a trace keeps of one distribution
MIN_TEMPERATURE = 0.01  # below it logits / T leave float range for large logits; 0 is greedy


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
        _check(
            isinstance(self.temperature, (int, float)) and self.temperature == self.temperature,
            "temperature must be a number",
        )
        _check(self.temperature >= 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        _check(
            self.temperature == 0 or self.temperature >= MIN_TEMPERATURE,
            f"temperature {self.temperature:g} is too small to sample with; use 0 for greedy decoding "
            f"or at least {MIN_TEMPERATURE:g}",
        )
        _check(self.temperature <= 100, f"temperature {self.temperature} is absurd; use a value in [0, 100]")
        _check(int(self.top_k) == self.top_k and self.top_k >= 0, f"top_k must be an integer >= 0, got {self.top_k}")
        _check(0 < self.top_p <= 1, f"top_p must lie in (0, 1], got {self.top_p}")
        _check(
            int(self.seed) == self.seed and 0 <= self.seed < 2**63,
            f"seed must be a non-negative integer, got {self.seed}",
        )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class ChainConfig:
    """Classic speculative sampling: the draft proposes exactly k tokens per round."""

    k: int = 3

    def __post_init__(self):
        _check(
            int(self.k) == self.k and 1 <= self.k <= 64, f"K (draft length) must be an integer in [1, 64], got {self.k}"
        )


@dataclass(frozen=True)
class HeuristicConfig:
    """Hugging Face assisted generation's 'heuristic' schedule: K += 2 after a fully accepted round, else K -= 1."""

    start_k: int = 5
    max_k: int = 20

    def __post_init__(self):
        _check(
            1 <= self.start_k <= self.max_k <= 64, f"need 1 <= start K <= max K <= 64, got {self.start_k}, {self.max_k}"
        )


@dataclass(frozen=True)
class SpecDecPPConfig:
    """SpecDec++: stop drafting once the predicted P(at least one rejection) exceeds `threshold` (h).

    `k_min` / `k_max` bound the candidates a round drafts. Both shipped heads are trained with reject weight 6,
    so their predicted acceptances sit below the truth and 1 - prod(a_i) crosses a small h after one or two
    candidates. k_max = 6: larger ones tie (the threshold fires first), and 6 bounds a round's verify forward
    where the measured verify cost is still flat. k_min = 1 lets a head trained without the lag stop after
    one candidate. h, k_min and k_max were chosen by measurement on the shipped pair (`specviz sweep`):
    docs/benchmarks.md#why-the-defaults, sweeps in assets/bench/specdecpp/.
    """

    threshold: float = 0.8
    k_min: int = 1
    k_max: int = 6

    def __post_init__(self):
        _check(0 < self.threshold < 1, f"threshold h must lie in (0, 1), got {self.threshold}")
        _check(1 <= self.k_min <= self.k_max <= 64, f"need 1 <= k_min <= k_max <= 64, got {self.k_min}, {self.k_max}")


@dataclass(frozen=True)
class DySpecConfig:
    """DySpec: grow a token tree greedily by estimated value until `budget` draft nodes.

    `level_threshold` > 0 selects the layer-by-layer variant (one draft forward per depth level,
    slots worth >= the threshold); 0 selects the exact heap variant (Algorithm 1; draft forwards
    batched lazily). The level variant at t = 0.05 is the default: fewer, wider draft forwards. Budget 3
    (3 drafted nodes + the root: a 4-row verify) is what `specviz budget` picks for the shipped EAGLE drafter at
    T = 0 from its acceptance and a 2-core CPU's curves, and the bench's best there; both chosen by measurement:
    docs/benchmarks.md#why-the-defaults.
    A better-accepted draft, or a device whose verify cost is flat (a GPU: assets/bench/cuda-h200/), wants a
    larger budget. `draft_temperature` sets the draft probabilities that value the nodes at target
    temperature 0; at T > 0 the draft is warped like the target.
    """

    budget: int = 3
    level_threshold: float = 0.05
    max_depth: int = 8
    draft_temperature: float = 0.6

    def __post_init__(self):
        _check(
            int(self.budget) == self.budget and 1 <= self.budget <= 256,
            f"tree budget must be an integer in [1, 256], got {self.budget}",
        )
        _check(0 <= self.level_threshold < 1, f"level threshold must lie in [0, 1), got {self.level_threshold}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")
        _check(0 < self.draft_temperature <= 10, f"draft temperature must lie in (0, 10], got {self.draft_temperature}")


@dataclass(frozen=True)
class TreeConfig:
    """Static trees. `kary`: `width` children per node down to `depth`; `sequoia`: DP tree of `budget` drafted
    nodes (root excluded) and depth <= `max_depth`, from the pair's measured positional acceptance vector
    (SEQUOIA_FALLBACK_ACCEPTANCE until one is measured). Budget 3 as for DySpec, chosen by measurement:
    docs/benchmarks.md#why-the-defaults."""

    width: int = 2
    depth: int = 3
    budget: int = 3
    max_depth: int = 8

    def __post_init__(self):
        _check(1 <= self.width <= 16, f"tree width must lie in [1, 16], got {self.width}")
        _check(1 <= self.depth <= 16, f"tree depth must lie in [1, 16], got {self.depth}")
        _check(1 <= self.budget <= 256, f"tree budget must lie in [1, 256], got {self.budget}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")


@dataclass(frozen=True)
class LookupConfig:
    """Prompt lookup (specviz.methods.lookup): copy what followed the most recent earlier occurrence of the
    context's last n-gram, n from `max_ngram` down to `min_ngram`.

    The `lookup` method proposes `k` copied tokens a round. With `RunConfig.copy` on, a DySpec tree spends its
    budget on copied tokens where their prior acceptance (LOOKUP_ACCEPTANCE) beats the draft's next node, at most
    `k` of them, and a chain method (chain, heuristic, SpecDec++) makes a round a copy round instead of drafting
    when the first copied token's prior reaches `switch_at` (0.5: a match of 2 or more tokens, whose 3 copies
    are worth 1 + 0.52 + 0.32 + 0.21 = 2.05 expected tokens a round). Where this device has a stored verify curve
    (`specviz budget`), both then copy further, up to `extend_to` copied tokens in all, as far as the expected
    tokens per verify millisecond keep rising (`specviz.methods.lookup.plan.best_extension`; copies need no
    draft forward); 0 turns that off. k = 3 keeps a round at 4 rows, a cheap verify width on CPU, while a long
    match's copies stay right far past it. k and extend_to were chosen by measurement:
    docs/benchmarks.md#why-the-defaults. With `draft_rated` on, a greedy tree grower first rescales the copy's
    priors by the draft's own probability of its first token (`specviz.methods.lookup.plan.calibrated`): a copy the
    draft rates improbable is rarely right, whatever its match length.
    """

    max_ngram: int = 8
    min_ngram: int = 1
    k: int = 3
    extend_to: int = 15
    switch_at: float = 0.5
    draft_rated: bool = True

    def __post_init__(self):
        _check(
            1 <= self.min_ngram <= self.max_ngram <= len(LOOKUP_ACCEPTANCE),
            f"need 1 <= min n-gram <= max n-gram <= {len(LOOKUP_ACCEPTANCE)}, got {self.min_ngram}, {self.max_ngram}",
        )
        _check(
            int(self.k) == self.k and 1 <= self.k <= 64, f"lookup length k must be an integer in [1, 64], got {self.k}"
        )
        _check(
            int(self.extend_to) == self.extend_to and 0 <= self.extend_to <= 256,
            f"lookup extend_to must be an integer in [0, 256], got {self.extend_to}",
        )
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
    copy: bool = False  # also copy from the context (prompt lookup): every drafting method
    record_top: int = 8  # per node, the top of q, p and the residual kept for the inspector (0: none)

    def __post_init__(self):
        _check(
            isinstance(self.record_top, int)
            and not isinstance(self.record_top, bool)
            and 0 <= self.record_top <= MAX_RECORD_TOP,
            f"record top must be a whole number in [0, {MAX_RECORD_TOP}], got {self.record_top!r}",
        )
        _check(self.drafter in DRAFTERS, f"drafter must be one of {', '.join(DRAFTERS)}, got {self.drafter!r}")
        _check(isinstance(self.copy, bool), f"copy must be true or false, got {self.copy!r}")
        _check(self.method in METHODS, f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        _check(
            int(self.max_new_tokens) == self.max_new_tokens and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT,
            f"max new tokens must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}",
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        sub = {f.name: f.type for f in fields(cls)}
        kinds = {
            "sampling": SamplingConfig,
            "chain": ChainConfig,
            "heuristic": HeuristicConfig,
            "specdecpp": SpecDecPPConfig,
            "dyspec": DySpecConfig,
            "tree": TreeConfig,
            "lookup": LookupConfig,
        }
        kw = {}
        for k, v in d.items():
            if k not in sub:
                continue
            kw[k] = kinds[k](**v) if k in kinds else v
        return cls(**kw)


@dataclass(frozen=True)
class ModelConfig:
    """Which pair to load. None means the shipped offline default.

    dtype "auto" is bf16 on a GPU that has it and on a CPU with AMX or AVX-512 BF16, fp32 elsewhere. On an
    AVX2-only CPU bf16 is emulated and a target forward grows steeply with its tokens, which would price trees out;
    with AMX or AVX-512 BF16 it is nearly flat in tokens and as exact, its attention batch-invariant
    (specviz.kernels.attention.rows_attention).
    Measured: docs/benchmarks.md#why-the-defaults. The bf16 matmuls' own invariance is measured, not promised:
    `load_pair` probes it and falls back to fp32 where it fails.

    context_vocab: a reduced-vocabulary draft's output layer also covers every token of its context
    (specviz.models.lm.LM), so it can propose the names and rare words of its prompt; q stays zero elsewhere,
    so every method stays lossless. What it adds to acceptance: models/smollm2-eagle/README.md.

    kv_cache: "growing" (appends into spare capacity; the fastest on a CPU) or "fixed" (a static cache read whole,
    every forward's shapes independent of the context). cuda_graphs (needs "fixed"): forwards of up to 64 tokens
    padded to power-of-two widths and, on CUDA, replayed from graphs captured once per width; on a CPU the padded
    forwards run eagerly. Both are exact (specviz.models.kvcache, specviz.models.graphs); what they buy on a GPU
    is measured by .ci/cuda-check.sh.
    """

    target: str | None = None
    draft: str | None = None
    eagle: str | None = None  # EAGLE drafter folder; None = the shipped one with the default pair, "none" = off
    dtype: str = "auto"
    device: str = "auto"
    context_vocab: bool = True
    kv_cache: str = "growing"
    cuda_graphs: bool = False
    device_map: str | None = None  # the target placed by accelerate: a strategy in DEVICE_MAPS or a JSON file
    max_memory: str | None = None  # with device_map: "0=20GiB,1=20GiB,cpu=64GiB" (accelerate's max_memory)

    def __post_init__(self):
        _check(self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        _check(self.kv_cache in KV_CACHES, f"kv cache must be one of {KV_CACHES}, got {self.kv_cache!r}")
        _check(not self.cuda_graphs or self.kv_cache == "fixed", "CUDA graphs need the fixed cache (--kv-cache fixed)")
        _check(
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
            f"device must be auto, cpu or cuda[:N], got {self.device!r}",
        )
        _check(
            self.device_map is None or self.device_map in DEVICE_MAPS or self.device_map.endswith(".json"),
            f"device map must be one of {DEVICE_MAPS} or a JSON file of module -> device, got {self.device_map!r}",
        )
        _check(self.max_memory is None or self.device_map is not None, "max memory needs a device map (--device-map)")
        if self.max_memory is not None:
            max_memory(self.max_memory)  # a ValueError with a sentence where it does not parse


MEMORY = re.compile(r"^\d+(\.\d+)?\s*([KMGT]i?B|B)?$", re.IGNORECASE)


def max_memory(text: str) -> dict:
    """ "0=20GiB,cpu=64GiB" -> {0: "20GiB", "cpu": "64GiB"}: accelerate's max_memory (GPU index, "cpu" or "mps")."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, size = (s.strip() for s in part.partition("="))
        _check(
            bool(sep) and (key.isdigit() or key in ("cpu", "mps")) and bool(MEMORY.match(size)),
            f"max memory is DEVICE=SIZE pairs such as 0=20GiB,cpu=64GiB; {part!r} is not one",
        )
        size = size.replace(" ", "")
        bytes_only = re.fullmatch(r"[\d.]+[bB]?", size)  # accelerate takes bytes as an integer, units as text
        out[int(key) if key.isdigit() else key] = (
            int(float(size.rstrip("bB"))) if bytes_only else size.upper().replace("IB", "iB")
        )
    _check(bool(out), "max memory is empty: give DEVICE=SIZE pairs such as 0=20GiB,cpu=64GiB")
    return out
