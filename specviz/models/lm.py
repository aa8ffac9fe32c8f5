"""A thin, stateful wrapper over a Hugging Face causal LM: its KV cache and the verbs on it.

With `kvcache` (the caches and their verbs) and `direct` (a Llama stack run layer by layer), the only inference module
that knows how transformers caches and attention masks work.
`LM.forward` feeds new tokens on top of the cached prefix; the new tokens may form a tree
(``parents`` local to the new tokens, -1 = hangs off the cached prefix), which is run with a
4-D attention mask and depth-based position ids. `keep` then gathers the positions that
survived verification into contiguous cache slots.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specviz import kernels
from specviz.core.device import dispatched, execution_device, to_device
from specviz.models import direct, family, graphs, kvcache
from specviz.models.support import Support


@dataclass
class Forward:
    """Result of one forward: post-norm hidden states (n, H) and logits (n, V) of the requested rows (None where
    none were asked for), and the features a feature drafter reads (n, H (1 + m)): the hidden states and the LM's
    `taps` beside them."""

    hidden: torch.Tensor
    logits: torch.Tensor | None
    features: torch.Tensor | None = None

    def __post_init__(self):
        if self.features is None:
            self.features = self.hidden


def checked_taps(layers: Sequence[int], n_layers: int | None = None) -> tuple[int, ...]:
    """`layers` as the ascending tuple of target layers a feature drafter taps (`LM.tap`), each k in 1 .. n_layers - 1
    (>= 1 where the target is not known yet); ValueError otherwise."""
    taps = tuple(layers)
    top = "" if n_layers is None else f" < {n_layers}"
    ok = all(isinstance(k, int) and k >= 1 and (n_layers is None or k < n_layers) for k in taps)
    if not ok or list(taps) != sorted(set(taps)):
        raise ValueError(f"taps are ascending distinct target layers k, 1 <= k{top}, got {list(taps)}")
    return taps


def leading_run(positions: Sequence[int]) -> int:
    """m such that positions[:m] == 0, 1, ..., m-1 (binary search: ascending distinct ids have positions[i] >= i)."""
    lo, hi = 0, len(positions)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if positions[mid] == mid else (lo, mid)
    return lo


class LM:
    """A causal LM plus its KV cache.

    `head_ids` (optional, sorted LongTensor) restricts the output layer to a vocabulary subset:
    logits outside it are -inf, so the softmax is exactly zero there (this keeps a reduced-vocabulary
    draft lossless: the q it proposes from is the q the verifier sees). With `context_vocab`, every token
    fed since the last `reset` joins that subset (`support`): a draft can then propose the names and rare
    words of its prompt, which a frequency-ranked head lacks, for a few extra rows of the output layer.
    """

    def __init__(
        self,
        model,
        head_ids: torch.Tensor | None = None,
        name: str = "",
        context_vocab: bool = False,
        half_rows: bool = False,
        kv_cache: str = "growing",
        cuda_graphs: bool = False,
    ):
        self.model = model.eval()
        # few-row matmuls as tall-skinny gemms (CPU fp32; see specviz.kernels.linear); `half_rows`, for a draft whose
        # model no target shares: its one-row steps over fp16 weights (the reduced head's rows mirrored in
        # `Support.half`)
        skinny = kernels.install(model, half_rows) > 0
        self._linear = kernels.skinny_linear if skinny else torch.nn.functional.linear
        self.name = name
        self.config = model.config
        # placed by accelerate's device map (layers over devices, offloaded): every module runs through its own call,
        # whose hooks move tensors and load weights; the outputs come back to the inputs' device
        self.dispatched = dispatched(model)
        self.device = execution_device(model)
        self.dtype = next(model.parameters()).dtype
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.base = model.get_decoder()
        # a plain Llama stack on one device: run it layer by layer (models.direct)
        self.direct = direct.serves(self.base) and not self.dispatched
        self.head = model.get_output_embeddings()
        self.layout = family.layout(model)  # each layer's attention window (ValueError: a model not verifiable)
        (self.logit_mul, self.logit_div), self.softcap = family.logit_scale(model.config), family.softcap(model.config)
        self.context_vocab = context_vocab and head_ids is not None
        ids = None if head_ids is None else head_ids.to(self.device).long()
        self.reduced = None if ids is None else Support(self.head, ids, self.context_vocab)  # the head's rows
        self.head_ids = ids
        self.taps: tuple[int, ...] = ()  # layers whose normed outputs `features` carries (`tap`)
        self._set_cache(kv_cache, cuda_graphs)
        self.forwards = 0
        self.forward_ms = 0.0  # wall time spent in forward() (model body + output layer); CPU-exact

    # -- cache verbs -------------------------------------------------------------------------
    @property
    def length(self) -> int:
        return kvcache.length(self.cache)

    def use_cache(self, kind: str = "growing", cuda_graphs: bool = False) -> None:
        """Run on a cache of this kind from now on ("growing" or "fixed": specviz.models.kvcache), with
        `cuda_graphs` (the fixed cache only) forwards at bucketed widths (specviz.models.graphs), replayed from
        CUDA graphs on a GPU and run eagerly on a CPU. Starts empty, as after `reset`."""
        self._set_cache(kind, cuda_graphs)
        self.reset()

    def _set_cache(self, kind: str, cuda_graphs: bool) -> None:
        if cuda_graphs and kind != "fixed":
            raise ValueError("CUDA graphs need the fixed cache (kv_cache='fixed')")
        if cuda_graphs and self.dispatched:
            raise ValueError("CUDA graphs need a model on one device, not one spread by a device map")
        self.kv_cache = kind
        self.cache = kvcache.new_cache(self.config, kind)
        self.graphs = graphs.Graphs(self.base, self.taps) if cuda_graphs else None

    def tap(self, layers: Sequence[int]) -> None:
        """From now on, return beside each forward's hidden states the final norm over the output of its first k
        layers, k in `layers` (ascending, 1 .. L - 1), as `Forward.features`: what a feature
        drafter that taps them reads (models.eagle.add_feature_taps)."""
        layers = checked_taps(layers, self.config.num_hidden_layers)
        if layers != self.taps:
            self.taps = layers
            if self.graphs is not None:
                self.graphs = graphs.Graphs(self.base, layers)

    def reset(self) -> None:
        self.cache = kvcache.emptied(self.cache, self.config, self.kv_cache)
        if self.reduced is not None:
            self.reduced.reset()

    @property
    def half_rows(self) -> bool:
        """Whether this LM's few-row steps run over reduced weights now: fp16 one-row steps of an fp32 draft, int8
        1-4-row steps of a bf16 one (specviz.kernels.linear; `kernels.full_rows` turns them off)."""
        return kernels.halves(self.head) or kernels.int8s(self.head)

    # -- output vocabulary -------------------------------------------------------------------
    @property
    def support(self) -> torch.Tensor | None:
        """Token ids outside which this LM's q is zero (None: the whole vocabulary); only grows until `reset`."""
        return None if self.reduced is None else self.reduced.ids[: self.reduced.n]

    def crop(self, n: int) -> None:
        """Keep the first n cached positions."""
        if n < self.length:
            self.keep(range(n))

    @torch.inference_mode()
    def keep(self, positions: Sequence[int]) -> None:
        """Keep only these cached positions (ascending), packed to the front.

        The leading run 0, 1, ..., m-1 stays where it is (a view, no copy); only the few tail
        positions are moved, in place, into slots m, m+1, ...: a round costs O(accepted), not O(context).
        """
        positions = list(positions)
        n = len(positions)
        m = leading_run(positions)
        if m == n == self.length:
            return
        tail = positions[m:]
        if any(a >= b for a, b in zip(tail, tail[1:])):
            raise ValueError("LM.keep needs ascending, distinct positions")
        idx = to_device(torch.tensor(tail, dtype=torch.long), self.device) if tail else None
        kvcache.keep(self.cache, m, n, idx)

    # -- forward -----------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(
        self,
        ids: Sequence[int],
        parents: Sequence[int] | None = None,
        rows: slice | Sequence[int] | None = None,
        visible: torch.Tensor | None = None,
        with_logits: bool = True,
    ) -> Forward:
        """Run `ids` on top of the cache and append them to it.

        ids: the n new tokens; parents: local parent of each (-1 = the cached prefix), None = a plain
        sequence; rows: which rows to return logits for (default all); visible: (n, past) bool, the cached
        positions each token with local parent -1 attends to (default all). A tree drafter whose cache holds
        several branches uses it to show a node only the prefix and its own ancestors; a token's position
        id is then the number of positions it attends to, minus one. Without `with_logits`, the rows' hidden states
        and features alone (a prefill whose features a drafter reads).
        """
        t0 = time.perf_counter()
        ids = [int(t) for t in ids]
        if self.context_vocab:
            self.reduced.grow(ids)  # the context's tokens join the support
        n, past = len(ids), self.length
        b = graphs.bucket(n) if self.graphs is not None else n  # rows run: n, or n padded to its bucket
        self.cache = kvcache.reserve(self.cache, past + b)
        pos, mask = self._placement(n, b, parents, past, visible)
        input_ids = to_device(torch.tensor([ids], dtype=torch.long), self.device)  # (1, n)
        inputs, state = self._inputs(ids, input_ids, parents, visible, past)
        h = self._body(graphs.pad(inputs, b) if b > n else inputs, pos, mask)  # (b, H (1 + m))
        if self.graphs is not None:  # the pad rows' slots are dropped (and a replayed graph moved no host length)
            h = h[:n]
            self.cache.set_length(past + n)
        self.forwards += 1
        feats = h
        if self.taps:
            h = h[:, : self.config.hidden_size]
        self._after_forward(h, state)
        if rows is not None:  # without taps the features are the hidden states: one gather
            h = h[rows]
            feats = feats[rows] if self.taps else h
        fwd = Forward(hidden=h, logits=self.logits(h) if with_logits else None, features=feats)
        self.forward_ms += (time.perf_counter() - t0) * 1e3
        return fwd

    def _placement(self, n: int, b: int, parents, past: int, visible) -> tuple[torch.Tensor, object]:
        """The position ids (1, b) of `b` rows (n new tokens, then pads) and their attention mask(s): None for a
        chain on a growing cache of full-attention layers (the model's own causal mask), else from the tree."""
        is_chain = parents is None or all(p == i - 1 for i, p in enumerate(parents))
        width = kvcache.capacity(self.cache)  # a fixed cache is read whole: its mask hides the unfilled slots
        if is_chain and visible is None and width is None and not self.layout.slides:
            return torch.arange(past, past + n, device=self.device)[None], None
        allow = self._tree_allow(parents or list(range(-1, n - 1)), past, visible, width, b)  # (b, width)
        return to_device((allow.sum(-1) - 1)[None], self.device), self._masks(allow)

    def _body(self, inputs: dict, pos: torch.Tensor, mask) -> torch.Tensor:
        """The model body over the cache: (b, H (1 + m)) normed hidden states and taps, on this LM's device. One of
        three paths: a CUDA graph's replay, the layer-by-layer Llama stack (models.direct), the model's own call."""
        if self.graphs is not None and pos.shape[1] <= graphs.MAX_WIDTH and self.device.type == "cuda":
            return self.graphs(self.cache, inputs, pos, mask)[0]
        if self.direct and not self.base.training:
            return direct.forward(self.base, pos, mask, self.cache, taps=self.taps, **inputs)[0]
        out = self.base(
            **inputs,
            position_ids=pos,
            attention_mask=mask,
            cache=self.cache,
            use_cache=True,
            output_hidden_states=bool(self.taps),
        )
        h = direct.with_taps(self.base, out, self.taps)[0]
        return h.to(self.device) if self.dispatched else h  # a dispatched body ends on its last layer's device

    # -- hooks for drafters that read more than token ids (models.eagle.EagleLM) ---------------------
    wants_target_features = False

    def add_target_features(self, start: int, hidden: torch.Tensor) -> None:
        """The target's post-norm hidden states of committed positions start, start+1, ... (ignored here)."""

    def _inputs(self, ids: list[int], input_ids: torch.Tensor, parents, visible, past: int) -> tuple[dict, object]:
        """The model's inputs for the new tokens `ids` ((1, n) `input_ids` on the device), and what `_after_forward`
        needs of this forward besides its hidden states."""
        return {"input_ids": input_ids}, None

    def _after_forward(self, hidden: torch.Tensor, state: object) -> None:
        """Every row's hidden states (n, H) of the forward just run, and what its `_inputs` returned beside them."""

    def logits(self, h: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """(n, H) hidden -> (n, V) fp32 logits over the full vocabulary, -inf outside the support. `context` (n, V)
        bool, for rows run in a batch outside `forward` (training data): with `context_vocab`, each row's own
        context tokens join head_ids in place of the fed ones."""
        if self.head_ids is None:
            x = self.head(h).float()
        elif context is not None and self.context_vocab:
            x = self.head(h).float().masked_fill(~(context.to(h.device) | self.reduced.mask), float("-inf"))
        else:
            r, n = self.reduced, self.reduced.n
            if r.half is not None and kernels.halves(self.head) and kernels.one_row(h):
                sub = kernels.half_row_linear(h, r.weight[:n], r.half[:n]).float()
            elif r.int8 is not None and kernels.int8s(self.head) and kernels.few_rows(h):
                w8, sc = r.int8
                sub = kernels.int8_linear(h, r.weight[:n], w8[:n], sc[:n]).float()
            else:
                sub = self._linear(h, r.weight[:n]).float()  # (n, Vsub)
            x = torch.full((h.shape[0], self.vocab_size), float("-inf"), device=h.device)
            x[:, r.ids[:n]] = sub
        if self.logit_mul != 1.0:  # the family's own scales, in its order (models.family)
            x = x * self.logit_mul
        if self.logit_div != 1.0:
            x = x / self.logit_div
        if self.softcap:
            x = torch.tanh(x / self.softcap) * self.softcap
        return x.to(self.device) if self.dispatched else x  # a dispatched output layer may sit on another device

    def _additive(self, allow: torch.Tensor) -> torch.Tensor:
        """(rows, width) bool -> the (1, 1, rows, width) additive mask of this LM's dtype, on its device."""
        mask = torch.zeros(allow.shape, dtype=self.dtype)
        mask.masked_fill_(~allow, torch.finfo(self.dtype).min)
        return to_device(mask[None, None], self.device)

    def _masks(self, allow: torch.Tensor):
        """The attention mask(s) for `allow`: one tensor, each layer's window applied where the layers slide
        (models.family.windowed), and a mapping by layer kind for a model that takes one."""
        lay = self.layout
        by_kind = {
            kind: self._additive(allow if w is None else family.windowed(allow, w)) for kind, w in lay.windows.items()
        }
        return by_kind if lay.mapping else by_kind[lay.kinds[0]]

    @staticmethod
    def _tree_allow(
        parents: Sequence[int], past: int, visible: torch.Tensor | None, width: int | None = None, rows: int = 0
    ) -> torch.Tensor:
        """(max(n, rows), width) bool, width past+n by default: row i < n attends to its visible cached positions,
        its local ancestors and itself; a pad row i >= n (a bucketed width) to its own slot alone."""
        n = len(parents)
        allow = torch.zeros(max(n, rows), width or past + max(n, rows), dtype=torch.bool)
        for i in range(n, rows):
            allow[i, past + i] = True
        allow[:n, :past] = True if visible is None else visible.cpu()
        for i, p in enumerate(parents):
            if p >= 0:
                allow[i] = allow[p]
            allow[i, past + i] = True
        return allow
