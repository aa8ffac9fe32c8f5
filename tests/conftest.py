import os

import pytest
import torch
from tiny import TEST_DEVICE, tiny_llama, tiny_llama_cpu

from specviz.models.lm import LM
from specviz.models.pair import Pair

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def make_pair(draft: str = "same", vocab: int = 64, seed: int = 0) -> Pair:
    """A tiny random pair. draft: 'same' (the target itself), 'random' (another init), 'near' (a perturbed copy)."""
    target = tiny_llama(vocab=vocab, seed=seed)
    if draft == "same":
        d = target
    elif draft == "random":
        d = tiny_llama(vocab=vocab, seed=seed + 1000)
    else:
        d = tiny_llama_cpu(vocab=vocab, seed=seed)
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed + 7)
            for prm in d.parameters():
                prm.add_(0.5 * prm.std() * torch.randn(prm.shape, generator=g))
        d = d.to(TEST_DEVICE)
    # a separate draft runs its one-row steps in fp16, as the loaded drafts do (kernels.linear); the target never does
    return Pair(
        LM(target, name="target"),
        LM(d, name="draft", half_rows=d is not target),
        None,
        {"target": "tiny", "draft": draft},
    )


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread (no synchronisation between two on a shared CPU)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny_pair():
    return make_pair
