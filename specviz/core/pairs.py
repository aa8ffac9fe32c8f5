"""The model pairs the dashboard offers: the offline default, and hub pairs of one family for a GPU Space.

Each pair says what it needs; `app.policy` offers a pair only where those needs are met (the hub reachable, a
token for gated models, a GPU with the memory). Every hub pair's draft and target share one tokenizer (one
family, the same vocabulary), which `models.loading.check_tokenizers` checks again when it loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.config import ModelConfig

DEFAULT_PAIR = "SmolLM2-135M-Instruct + specviz draft (offline)"


@dataclass(frozen=True)
class PairSpec:
    name: str
    model: ModelConfig
    needs: str  # what the pair dropdown says it needs
    gpu_gb: float = 0.0  # GPU memory it needs; 0: it runs on a CPU too
    hub: bool = False  # its weights come from the model hub
    gated: bool = False  # the hub asks for an accepted licence and a token (HF_TOKEN)

    @property
    def label(self) -> str:
        return f"{self.name} · {self.needs}"


def _hub(target: str, draft: str) -> ModelConfig:
    """A hub pair: no EAGLE drafter (the standalone draft drafts), on the GPU, bf16 where the GPU has it."""
    return ModelConfig(target=target, draft=draft, eagle="none", device="cuda")


PAIRS = {  # name -> PairSpec: the public allow-list, the default first
    p.name: p
    for p in (
        PairSpec(DEFAULT_PAIR, ModelConfig(), "offline, CPU or GPU"),
        PairSpec(
            "Qwen2.5-1.5B-Instruct + Qwen2.5-0.5B-Instruct",
            _hub("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
            "model hub, a GPU with 8 GB",
            gpu_gb=8,
            hub=True,
        ),
        PairSpec(
            "Qwen2.5-3B-Instruct + Qwen2.5-0.5B-Instruct",
            _hub("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
            "model hub, a GPU with 16 GB",
            gpu_gb=16,
            hub=True,
        ),
        PairSpec(
            "Llama-3.2-3B-Instruct + Llama-3.2-1B-Instruct",
            _hub("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
            "model hub with a token for Meta's gated models, a GPU with 16 GB",
            gpu_gb=16,
            hub=True,
            gated=True,
        ),
        PairSpec(
            "Llama-3.1-8B-Instruct + Llama-3.2-1B-Instruct",
            _hub("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
            "model hub with a token for Meta's gated models, a GPU with 24 GB",
            gpu_gb=24,
            hub=True,
            gated=True,
        ),
    )
}
