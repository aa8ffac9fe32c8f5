"""specviz: see speculative decoding, round by round."""

from specviz.core.config import (
    ChainConfig,
    DySpecConfig,
    HeuristicConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    SpecDecPPConfig,
    TreeConfig,
)
from specviz.core.trace import DraftTree, GenerationTrace, RoundTrace

__all__ = [
    "ChainConfig",
    "DySpecConfig",
    "HeuristicConfig",
    "ModelConfig",
    "RunConfig",
    "SamplingConfig",
    "SpecDecPPConfig",
    "TreeConfig",
    "DraftTree",
    "GenerationTrace",
    "RoundTrace",
]
