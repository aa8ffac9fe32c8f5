import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

from specviz.lm import LM  # noqa: E402
from specviz.loading import Pair, tiny_llama  # noqa: E402


def make_pair(draft: str = "same", vocab: int = 64, seed: int = 0) -> Pair:
    """A tiny random pair. draft: 'same' (the target itself), 'random' (another init), 'near' (a perturbed copy)."""
    target = tiny_llama(vocab=vocab, seed=seed)
    if draft == "same":
        d = target
    elif draft == "random":
        d = tiny_llama(vocab=vocab, seed=seed + 1000)
    else:
        d = tiny_llama(vocab=vocab, seed=seed)
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed + 7)
            for prm in d.parameters():
                prm.add_(0.5 * prm.std() * torch.randn(prm.shape, generator=g))
    return Pair(LM(target, name="target"), LM(d, name="draft"), None, {"target": "tiny", "draft": draft})


@pytest.fixture
def tiny_pair():
    return make_pair
