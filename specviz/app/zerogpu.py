"""ZeroGPU: Hugging Face's shared GPUs lend a GPU to each call of a function marked `@spaces.GPU`.

`gpu(duration)` marks a decode so. The `spaces` package (in requirements.txt) makes that mark a no-op wherever no
ZeroGPU is, on a CPU or a dedicated GPU alike; where the package is not installed at all, `gpu` returns the
function unchanged. `duration` is a function of the decode's own arguments, giving the seconds of GPU it asks for.
"""

from __future__ import annotations

from collections.abc import Callable

from specviz.core.config import RunConfig

try:
    import spaces  # optional: Hugging Face Spaces' ZeroGPU decorator
except ImportError:  # pragma: no cover - exercised by a test that hides the package
    spaces = None

BASE_S = 20.0  # a ZeroGPU allocation's start: a pair's first call moves it to the GPU
PER_TOKEN_S = 0.15  # seconds a new token is given: the slowest rate an allocation is sized for (docs/deploy.md)
MAX_S = 240.0  # the longest allocation a run asks for


def seconds_for(run: RunConfig) -> int:
    """The GPU seconds one decode asks for: a start, and a slow pace per token, capped."""
    return int(min(MAX_S, BASE_S + PER_TOKEN_S * run.max_new_tokens))


def gpu(duration: Callable[..., int]) -> Callable[[Callable], Callable]:
    """`spaces.GPU(duration=duration)` where the package is installed, else nothing."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)
