import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

import specviz.loading as _loading  # noqa: E402
from specviz.lm import LM  # noqa: E402
from specviz.loading import Pair  # noqa: E402

# SPECVIZ_TEST_DEVICE=cuda runs the tiny-model tests on a GPU: every tiny model is built on the CPU (same
# weights as there) and then moved. Tests that are about the CPU itself (the skinny kernels) stay CPU-only.
TEST_DEVICE = os.environ.get("SPECVIZ_TEST_DEVICE", "cpu")
_tiny_on_cpu = _loading.tiny_llama


def tiny_llama(*args, **kwargs):
    return _tiny_on_cpu(*args, **kwargs).to(TEST_DEVICE)


_loading.tiny_llama = tiny_llama          # test modules import it after this file


def make_pair(draft: str = "same", vocab: int = 64, seed: int = 0) -> Pair:
    """A tiny random pair. draft: 'same' (the target itself), 'random' (another init), 'near' (a perturbed copy)."""
    target = tiny_llama(vocab=vocab, seed=seed)
    if draft == "same":
        d = target
    elif draft == "random":
        d = tiny_llama(vocab=vocab, seed=seed + 1000)
    else:
        d = _tiny_on_cpu(vocab=vocab, seed=seed)
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed + 7)
            for prm in d.parameters():
                prm.add_(0.5 * prm.std() * torch.randn(prm.shape, generator=g))
        d = d.to(TEST_DEVICE)
    # a separate draft runs its one-row steps in fp16, as the loaded drafts do (kernels.py); the target never does
    return Pair(LM(target, name="target"), LM(d, name="draft", half_rows=d is not target), None, {"target": "tiny", "draft": draft})


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
