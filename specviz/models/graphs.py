"""Fixed-shape forwards for CUDA graphs: bucketed widths over a fixed cache, and the graphs captured at them.

A round's forwards are short (a drafting step of 1 token, a tree level, a verify of up to a budget's nodes) and on
a GPU a small model's forward is bound by kernel launches, not arithmetic. Over a fixed cache
(`specviz.models.kvcache.FixedCache`) a forward's shapes depend only on its width, so `LM` pads every forward of
at most `MAX_WIDTH` tokens to the next power of two (`bucket`) and, on CUDA, replays one captured graph per width
(`Graphs`): one launch instead of a few hundred. The padding is exact: a pad row sees only its own slot, its keys
and values land past the cache's length (masked for every real token, overwritten later), and `LM` cuts the rows
and the length back to the real tokens. On a CPU the same padded forward runs eagerly (`LM(cuda_graphs=True)`),
which is how the tests hold it to the unpadded one.
"""

from __future__ import annotations

import torch

from specviz.models import direct

MAX_WIDTH = 64  # wider forwards (prefills) run as they are, neither padded nor captured
WARMUP = 2  # eager runs on a side stream before a capture, as CUDA graphs ask


def bucket(n: int) -> int:
    """The width a forward of n tokens runs at: the next power of two up to MAX_WIDTH, else n."""
    return n if n > MAX_WIDTH else 1 << (n - 1).bit_length()


def pad(inputs: dict, width: int) -> dict:
    """The model inputs ("input_ids" (1, n) or "inputs_embeds" (1, n, H)) padded with zeros to `width` rows."""
    out = {}
    for name, x in inputs.items():
        extra = x.new_zeros(x.shape[0], width - x.shape[1], *x.shape[2:])
        out[name] = torch.cat([x, extra], 1)
    return out


def _tensors(mask) -> list[torch.Tensor]:
    """A forward's mask as a list: one tensor, or one a kind of layer (models.family.Layout.mapping)."""
    return [mask[k] for k in sorted(mask)] if isinstance(mask, dict) else [mask]


class _Captured:
    def __init__(self, graph, inputs: dict, pos, mask, out):
        self.graph, self.inputs, self.pos, self.mask, self.out = graph, inputs, pos, mask, out


class Graphs:
    """The CUDA graphs of one LM's decoder body over one fixed cache, one per input kind and width.

    A graph holds the addresses of its cache, inputs and output, so a new cache (`kvcache.reserve` grew it)
    drops them all. The cache's device-side write position is read and advanced inside the graph, as in an eager
    forward; the warm-up runs before a capture advance it too and are undone (`FixedCache.set_length`)."""

    def __init__(self, base: torch.nn.Module, taps: tuple[int, ...] = ()):
        self.base, self.taps = base, taps
        self.cache = None
        self.graphs: dict = {}
        self.pool = None

    def __call__(self, cache, inputs: dict, pos: torch.Tensor, mask) -> torch.Tensor:
        """The body's last hidden state (1, width, H) for these padded inputs (with its taps: `direct.forward`),
        replayed from a graph."""
        if cache is not self.cache:
            self.cache, self.graphs, self.pool = cache, {}, None
        ((name, x),) = inputs.items()
        key = (name, x.shape[1])
        g = self.graphs.get(key) or self._capture(key, cache, inputs, pos, mask)
        g.inputs[name].copy_(x)
        g.pos.copy_(pos)
        for dst, src in zip(_tensors(g.mask), _tensors(mask)):
            dst.copy_(src)
        g.graph.replay()
        return g.out.clone()

    def _run(self, cache, inputs, pos, mask) -> torch.Tensor:
        out = self.base(
            **inputs,
            position_ids=pos,
            attention_mask=mask,
            cache=cache,
            use_cache=True,
            output_hidden_states=bool(self.taps),
        )
        return direct.with_taps(self.base, out, self.taps)

    def _capture(self, key, cache, inputs, pos, mask) -> _Captured:
        inputs = {k: v.clone() for k, v in inputs.items()}
        pos, n = pos.clone(), cache.n
        mask = {k: m.clone() for k, m in mask.items()} if isinstance(mask, dict) else mask.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self._run(cache, inputs, pos, mask)
                cache.set_length(n)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = self._run(cache, inputs, pos, mask)
        cache.set_length(n)
        self.pool = graph.pool()
        self.graphs[key] = g = _Captured(graph, inputs, pos, mask, out)
        return g
