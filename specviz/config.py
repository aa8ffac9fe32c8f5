"""Configuration dataclasses: the single home of every default in specviz.

The app's widgets, the command line and the library all read their defaults from here.
Every dataclass validates itself in ``__post_init__`` and raises ``ValueError`` with a
message a user can act on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

METHODS = ("ar", "chain", "heuristic", "specdecpp", "dyspec", "kary", "sequoia")
METHOD_LABELS = {
    "ar": "Autoregressive (target only)",
    "chain": "Speculative sampling, fixed K",
    "heuristic": "HF heuristic K (+2 / -1)",
    "specdecpp": "SpecDec++ (acceptance head)",
    "dyspec": "DySpec dynamic tree",
    "kary": "Fixed k-ary tree (SpecInfer-style)",
    "sequoia": "Sequoia DP tree",
}
DTYPES = ("bf16", "fp32")
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
    """SpecDec++: stop drafting once the predicted P(at least one rejection) exceeds `threshold` (h)."""

    threshold: float = 0.5
    k_min: int = 1
    k_max: int = 8

    def __post_init__(self):
        _check(0 < self.threshold < 1, f"threshold h must lie in (0, 1), got {self.threshold}")
        _check(1 <= self.k_min <= self.k_max <= 64, f"need 1 <= k_min <= k_max <= 64, got {self.k_min}, {self.k_max}")


@dataclass(frozen=True)
class DySpecConfig:
    """DySpec: grow a token tree greedily by estimated value until `budget` draft nodes.

    `level_threshold` > 0 selects the layer-by-layer variant (one draft forward per depth);
    0 selects the exact heap variant (one draft forward per expanded node).
    """

    budget: int = 16
    level_threshold: float = 0.0
    max_depth: int = 8
    draft_temperature: float = 0.6

    def __post_init__(self):
        _check(int(self.budget) == self.budget and 1 <= self.budget <= 256, f"tree budget must be an integer in [1, 256], got {self.budget}")
        _check(0 <= self.level_threshold < 1, f"level threshold must lie in [0, 1), got {self.level_threshold}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")
        _check(0 < self.draft_temperature <= 10, f"draft temperature must lie in (0, 10], got {self.draft_temperature}")


@dataclass(frozen=True)
class TreeConfig:
    """Static trees. `kary`: `width` children per node down to `depth`; `sequoia`: DP tree of `budget` nodes."""

    width: int = 2
    depth: int = 3
    budget: int = 16
    max_depth: int = 8

    def __post_init__(self):
        _check(1 <= self.width <= 16, f"tree width must lie in [1, 16], got {self.width}")
        _check(1 <= self.depth <= 16, f"tree depth must lie in [1, 16], got {self.depth}")
        _check(1 <= self.budget <= 256, f"tree budget must lie in [1, 256], got {self.budget}")
        _check(1 <= self.max_depth <= 64, f"max depth must lie in [1, 64], got {self.max_depth}")


@dataclass(frozen=True)
class RunConfig:
    """One generation: which method, how long, and the per-method knobs."""

    method: str = "chain"
    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    chain: ChainConfig = field(default_factory=ChainConfig)
    heuristic: HeuristicConfig = field(default_factory=HeuristicConfig)
    specdecpp: SpecDecPPConfig = field(default_factory=SpecDecPPConfig)
    dyspec: DySpecConfig = field(default_factory=DySpecConfig)
    tree: TreeConfig = field(default_factory=TreeConfig)

    def __post_init__(self):
        _check(self.method in METHODS, f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        _check(int(self.max_new_tokens) == self.max_new_tokens and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT,
               f"max new tokens must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        sub = {f.name: f.type for f in fields(cls)}
        kinds = {"sampling": SamplingConfig, "chain": ChainConfig, "heuristic": HeuristicConfig,
                 "specdecpp": SpecDecPPConfig, "dyspec": DySpecConfig, "tree": TreeConfig}
        kw = {}
        for k, v in d.items():
            if k not in sub:
                continue
            kw[k] = kinds[k](**v) if k in kinds else v
        return cls(**kw)


@dataclass(frozen=True)
class ModelConfig:
    """Which pair to load. None means the shipped offline default."""

    target: str | None = None
    draft: str | None = None
    dtype: str = "bf16"
    device: str = "auto"

    def __post_init__(self):
        _check(self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        _check(self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
               f"device must be auto, cpu or cuda[:N], got {self.device!r}")
