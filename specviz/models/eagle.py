"""An EAGLE-style feature drafter (Li et al. 2024, arXiv 2401.15077) behind the `LM` interface.

Notation: f_t is the target's post-norm last hidden state at position t (the input of its output
layer, so p_{t+1} = softmax(W f_t)); e(x) the target's token embedding. The drafter reads token x_t
together with the feature of the position before it and predicts that position's feature:

    g_t = fc([e(x_t), f_{t-1}])          (fc: 2H -> H)
    f^_t = norm(decoder_layer(g_<=t))    (one Llama layer over the drafter's own KV cache)
    q_{t+1} = softmax(W' f^_t)           (the target's tied output layer, reduced to `head_ids`)

A drafter with the copy input (`add_copy_input`; its weights hold `eagle_copy_gain`) reads a third block,
what prompt lookup (specviz.methods.lookup) proposes after x_<=t, scaled by a learned gain per match length n:

    g_t = fc([e(x_t), f_{t-1}, a_n e(y_t)])   (fc: 3H -> H; y_t, n: the lookup's token and match length, a_0 = 0)

One attention layer over [e(x_t), f_{t-1}] cannot form an induction head (a key holds x_(j+1) and f_j, not
x_j), so without it the drafter misses most of the target's copies (assets/bench/experiments/eagle-copy-input).
The lookup reads the n-grams of the tokens the target has run (whole sequences in training, every
position's own prefix) and the newest `len(a) - 1` tokens of the token's own path, drafted ones included.

A drafter with taps (`add_feature_taps`; multi-layer features as in EAGLE-3, Li et al. 2025, arXiv 2503.01840)
reads, last, the target's final norm over the output of its first k layers, u^k = norm(h^k), for each tapped k:

    g_t = fc([e(x_t), f_{t-1}, a_n e(y_t), u^k1_{t-1}, ..., u^km_{t-1}])

where the target has run position t - 1, and zeros in their place after a drafted parent (the target's
`LM.tap` hands them over beside f; training's second pass reads zeros too).

Where f_{t-1} is known (a committed position the target has run), the drafter uses it; otherwise
(a drafted token whose parent the target has not seen yet) it uses its own prediction f^_{t-1}.
The decode loop hands over the target's features after the prefill and after every verification
(`add_target_features`); committed tokens are then always run with exact features, so `keep` drops
the accepted draft positions (computed from predicted features) and the drafter re-reads them next
round, as EAGLE does. Which parent a new token hangs off follows `LM.forward`'s arguments: its local
parent, else the last cached position it can see (a tree node's parent is its newest ancestor).

Only the drafter's own weights are stored (fc, the layer, the norm): embeddings and output layer are
the target's. The q the engine proposes from is exactly `LM.logits` of f^, so every method stays
lossless whatever the features are.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaForCausalLM

from specviz.core.device import execution_device, to_device, weight_of
from specviz.core.ngram import NgramIndex
from specviz.models.lm import LM, checked_taps, leading_run

FC_KEY = "eagle_fc.weight"
COPY_KEY = "eagle_copy_gain"
TAPS_KEY = "eagle_feature_layers"  # the config field naming the target layers a drafter taps (add_feature_taps)


MAX_LAYERS = 8


def eagle_config(target_config, layers: int = 1):
    """The drafter's LlamaConfig: the target's, with `layers` decoder layers (one by default)."""
    if not 1 <= layers <= MAX_LAYERS:
        raise ValueError(f"an EAGLE drafter has 1 to {MAX_LAYERS} decoder layers, got {layers}")
    cfg = copy.deepcopy(target_config)
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = ["full_attention"] * layers
    return cfg


def build_eagle(target_model, init_layer: int | None = 0, dtype=torch.float32, layers: int = 1):
    """A fresh drafter for `target_model`: `layers` Llama layers, the target's final norm, the target's embeddings
    and output layer (shared, frozen), and `eagle_fc` = [I | 0] (it starts as the token path). With `init_layer`,
    the first layer is a copy of that target layer and each later one a copy of the target layer after it with
    its two output projections zeroed (an identity: the drafter starts as the one-layer drafter); else random."""
    cfg = eagle_config(target_model.config, layers)
    device = execution_device(target_model)  # built where the target's inputs go (CPU or CUDA)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype)
    src = target_model.get_decoder()
    H = cfg.hidden_size
    with torch.no_grad():
        if init_layer is not None:
            for i, layer in enumerate(model.model.layers):
                j = min(init_layer + i, len(src.layers) - 1)
                layer.load_state_dict({k: v.to(dtype) for k, v in src.layers[j].state_dict().items()})
                if i:
                    layer.self_attn.o_proj.weight.zero_()
                    layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.copy_(weight_of(src.norm).to(device=device, dtype=dtype))
    share_target_weights(model, target_model)
    model.eagle_fc = nn.Linear(2 * H, H, bias=False).to(device=device, dtype=dtype)
    with torch.no_grad():
        model.eagle_fc.weight.zero_()
        model.eagle_fc.weight[:, :H].copy_(torch.eye(H))
    return model


def share_target_weights(model, target_model) -> None:
    """Point the drafter's embeddings and output layer at the target's (frozen, not stored)."""
    dtype = next(model.model.layers[0].parameters()).dtype
    device = model.model.embed_tokens.weight.device
    emb = weight_of(target_model.get_input_embeddings()).detach()
    model.model.embed_tokens.weight = nn.Parameter(emb.to(device=device, dtype=dtype), requires_grad=False)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    else:
        head = weight_of(target_model.get_output_embeddings()).detach()
        model.lm_head.weight = nn.Parameter(head.to(device=device, dtype=dtype), requires_grad=False)


def add_copy_input(model, max_ngram: int, gain: float = 1.0) -> None:
    """Widen fc to [e(x), f, a_n e(y)] with a zero third block (the drafter computes what it did before) and add
    the gain a_1..a_max_ngram, all starting at `gain` (a larger start makes Adam move the new block faster)."""
    if uses_copy(model):
        return
    if feature_taps(model):
        raise ValueError("add the copy input before the taps (fc's blocks: e, f, the copy input, then the taps)")
    old, H = model.eagle_fc, model.config.hidden_size
    p = old.weight
    model.eagle_fc = nn.Linear(3 * H, H, bias=False).to(device=p.device, dtype=p.dtype)
    with torch.no_grad():
        model.eagle_fc.weight.zero_()
        model.eagle_fc.weight[:, : 2 * H].copy_(p)
    model.eagle_copy_gain = nn.Parameter(torch.full((max_ngram + 1,), float(gain), device=p.device, dtype=p.dtype))


def add_feature_taps(model, layers: Sequence[int]) -> None:
    """Widen fc with a zero block per target layer k in `layers` (each in 1 .. L - 1): the drafter then also reads
    u^k_(t-1) = norm(h^k_(t-1)), the target's final norm over the output of its first k layers, where the target
    has run position t - 1 (zeros after a drafted parent). Step 0 computes what the drafter did before."""
    layers = checked_taps(layers)
    if not layers:
        return
    if feature_taps(model):
        raise ValueError(f"this drafter already taps the target's layers {feature_taps(model)}")
    old, H = model.eagle_fc, model.config.hidden_size
    p = old.weight
    model.eagle_fc = nn.Linear(p.shape[1] + len(layers) * H, H, bias=False).to(device=p.device, dtype=p.dtype)
    with torch.no_grad():
        model.eagle_fc.weight.zero_()
        model.eagle_fc.weight[:, : p.shape[1]].copy_(p)
    setattr(model.config, TAPS_KEY, list(layers))


def feature_taps(model) -> tuple[int, ...]:
    """The target layers whose normed outputs the drafter reads beside f (() for a drafter without taps)."""
    return tuple(getattr(model.config, TAPS_KEY, None) or ())


def uses_copy(model) -> bool:
    return isinstance(getattr(model, COPY_KEY, None), nn.Parameter)


def copy_ngram(model) -> int:
    """The longest n-gram the drafter's lookup matches (0: no copy input)."""
    return len(model.eagle_copy_gain) - 1 if uses_copy(model) else 0


def sequence_lookups(tokens: Sequence[int], max_ngram: int) -> tuple[list[int], list[int]]:
    """For every position t of a sequence the training way: the lookup's token y_t after tokens[:t + 1]
    (-1: none) and its match length n_t (0: none), over the n-grams of that prefix."""
    index, ys, ns = NgramIndex(max_ngram), [], []
    for t in tokens:
        index.extend([t])
        n, y = lookup_next(index, index.ctx[-max_ngram:])
        ys.append(y)
        ns.append(n)
    return ys, ns


def lookup_next(index: NgramIndex, suffix: Sequence[int]) -> tuple[int, int]:
    """(n, y): the token after the most recent indexed occurrence of the longest suffix of `suffix`, or (0, -1)."""
    n, start = index.match(suffix)
    return (n, index.ctx[start]) if n else (0, -1)


def lookup_tensors(
    rows: Sequence[Sequence[int]], max_ngram: int, width: int | None = None, left: bool = False, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`sequence_lookups` of each row -> (y, n), (B, width) long, padded with (-1, 0) on the right (or the left)."""
    width = max(map(len, rows)) if width is None else width
    y = torch.full((len(rows), width), -1, dtype=torch.long)
    n = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        if not len(row):
            continue
        ys, ns = sequence_lookups([int(t) for t in row], max_ngram)
        sl = slice(width - len(row), width) if left else slice(0, len(row))
        y[b, sl], n[b, sl] = torch.tensor(ys), torch.tensor(ns)
    return y.to(device), n.to(device)


def eagle_inputs(
    model, input_ids: torch.Tensor, feats: torch.Tensor, copy: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """g = fc([e(x), f]) or fc([e(x), f, a_n e(y)]): (B, n) ids, (B, n, H) features and, for a drafter with the
    copy input, the lookups `copy` = (y, n), (B, n) each -> (B, n, H) inputs_embeds. A drafter with m taps reads
    (B, n, H (1 + m)) features [f, u^k1, ..., u^km] (its fc's last blocks; `with_zero_taps` after a drafted
    parent); any other drafter reads the first H."""
    emb = model.get_input_embeddings()
    e = emb(input_ids)
    H = e.shape[-1]
    feats = feats.to(e.dtype)
    parts = [e, feats[..., :H]]
    if uses_copy(model):
        if copy is None:
            raise ValueError("this EAGLE drafter reads prompt-lookup proposals: pass copy=(y, n)")
        y, n = copy
        gain = model.eagle_copy_gain[n] * (n > 0)
        parts.append(emb(y.clamp(min=0)) * gain[..., None].to(e.dtype))
    m = len(feature_taps(model))
    if m:
        if feats.shape[-1] != H * (1 + m):
            raise ValueError(f"this EAGLE drafter reads {m} taps beside f: pass (..., {H * (1 + m)}) features")
        parts.append(feats[..., H:])
    return model.eagle_fc(torch.cat(parts, -1))


def with_zero_taps(f_hat: torch.Tensor, width: int) -> torch.Tensor:
    """The features a token after a drafted parent reads: the drafter's own f^ (..., H) and zeros for the taps, up to
    `width` (the drafter's feature width; f^ alone for a drafter without taps)."""
    return f_hat if width == f_hat.shape[-1] else F.pad(f_hat, (0, width - f_hat.shape[-1]))


def previous_features(f: torch.Tensor) -> torch.Tensor:
    """(B, L, H) features f_t -> the inputs f_(t-1) at each t (zeros at t = 0)."""
    return torch.cat([torch.zeros_like(f[:, :1]), f[:, :-1]], 1)


def _fit(buf: torch.Tensor, n: int) -> torch.Tensor:
    """`buf` if it holds n rows, else a copy grown to max(n, 2 x its size) (amortised O(1) appends)."""
    if n <= len(buf):
        return buf
    return torch.cat([buf, buf.new_zeros(max(n, 2 * len(buf)) - len(buf), *buf.shape[1:])])


class EagleLM(LM):
    """`LM` over an EAGLE drafter: same verbs, plus the target's features (see the module docstring)."""

    wants_target_features = True

    def __init__(
        self,
        model,
        head_ids: torch.Tensor | None = None,
        name: str = "eagle",
        context_vocab: bool = False,
        half_rows: bool = False,
        kv_cache: str = "growing",
        cuda_graphs: bool = False,
    ):
        if not isinstance(getattr(model, "eagle_fc", None), nn.Linear):
            raise ValueError(
                "an EAGLE drafter needs its eagle_fc layer (build_eagle / specviz.models.loading.load_eagle)"
            )
        super().__init__(
            model,
            head_ids=head_ids,
            name=name,
            context_vocab=context_vocab,
            half_rows=half_rows,
            kv_cache=kv_cache,
            cuda_graphs=cuda_graphs,
        )
        self.hidden_size = model.config.hidden_size
        self.max_ngram = copy_ngram(model)
        self.taps = feature_taps(model)  # the target layers it reads beside f: the target must `tap` them
        self.reset()

    def reset(self) -> None:
        super().reset()
        H = self.hidden_size
        W = H * (1 + len(self.taps))  # [f_t, u^k_t ...]
        self.tfeat = torch.zeros(256, W, dtype=self.dtype, device=self.device)  # target's, t < n_target (grown x2)
        self.n_target = 0
        self._out = torch.zeros(64, H, dtype=self.dtype, device=self.device)  # f^ per cache slot (grown x2)
        self._exact = torch.zeros(64, dtype=torch.bool)  # slot read an exact feature
        self._tok: list[int] = []  # token per cache slot (copy input)
        self._par: list[int] = []  # the slot it hangs off (-1: none)
        self.index = NgramIndex(max(1, self.max_ngram))  # n-grams of slots < n_target

    def add_target_features(self, start: int, hidden: torch.Tensor) -> None:
        if start > self.n_target:
            raise ValueError(f"target features must be contiguous: have {self.n_target}, got a block at {start}")
        end = start + len(hidden)
        if hidden.shape[-1] != self.tfeat.shape[1]:
            raise ValueError(
                f"this drafter reads {self.tfeat.shape[1]} target features a position (its taps {self.taps}), "
                f"got {hidden.shape[-1]}: tap the target's layers (LM.tap)"
            )
        if end < len(self.index.ctx):  # fewer committed positions: re-index
            self.index = NgramIndex(self.index.max_ngram)
        self.tfeat = _fit(self.tfeat, end)
        self.tfeat[start:end] = hidden.detach()
        self.n_target = end

    def target_hidden(self, t: int) -> torch.Tensor:
        """The target's f_t (H,) of a position it has run (without the taps beside it)."""
        return self.tfeat[t, : self.hidden_size]

    def _inputs(self, ids, input_ids, parents, visible, past) -> tuple[dict, torch.Tensor]:
        """Also: which new slots read an exact feature (the target's, or none before the first token), for
        `_after_forward`."""
        n, n_t = input_ids.shape[1], self.n_target
        if parents is None and visible is None:  # a chain on top of the cache
            src = torch.arange(past - 1, past + n - 1)
        else:  # the slot each new token hangs off
            src = torch.tensor(
                [
                    past + p
                    if p >= 0
                    else int(visible[i].nonzero()[-1])
                    if visible is not None and bool(visible[i].any())
                    else past - 1
                    for i, p in enumerate(parents or range(-1, n - 1))
                ]
            )
        # exact target feature where the target has run that position; the drafter's own f^ for a drafted
        # parent; zeros for the very first token (nothing before it) and for a token after an uncommitted
        # one of the same call (never in the engine; e.g. timing a prompt with no features)
        # (selected on the host and gathered on the device: nothing here waits for the device)
        use_t = (src >= 0) & (src < n_t)
        use_o = (src >= n_t) & (src < past)
        exact = (src < 0) | use_t
        dev = self.device
        feats = torch.where(
            to_device(use_t, dev)[:, None],
            self.tfeat[to_device(src.clamp(0, len(self.tfeat) - 1), dev)],
            torch.where(
                to_device(use_o, dev)[:, None],
                with_zero_taps(self._out[to_device(src.clamp(0, len(self._out) - 1), dev)], self.tfeat.shape[1]),
                torch.zeros((), dtype=self.dtype, device=dev),
            ),
        )
        copy = self._lookups(ids, src.tolist(), past) if self.max_ngram else None  # host lists
        return {"inputs_embeds": eagle_inputs(self.model, input_ids, feats[None], copy)}, exact

    def _lookups(self, ids: list[int], src: list[int], past: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The copy input of each new token: the lookup over the n-grams of the committed tokens the target has
        run (those before it only, for such a token itself: as in training) and the newest tokens of its path."""
        del self._tok[past:], self._par[past:]
        self._tok += ids
        self._par += src
        ys, ns, m = [], [], self.max_ngram
        for i in range(len(ids)):
            s = past + i
            upto = min(s + 1, self.n_target)  # slots < n_target are committed, in order
            if len(self.index.ctx) < upto:
                self.index.extend(self._tok[len(self.index.ctx) : upto])
            suffix, a = [], s
            while a >= 0 and len(suffix) < m:
                suffix.append(self._tok[a])
                a = self._par[a]
            n, y = lookup_next(self.index, suffix[::-1])
            ys.append(y)
            ns.append(n)
        return (
            to_device(torch.tensor([ys], dtype=torch.long), self.device),
            to_device(torch.tensor([ns], dtype=torch.long), self.device),
        )

    def _after_forward(self, hidden, exact) -> None:
        n, end = len(hidden), self.length
        start = end - n
        self._out, self._exact = _fit(self._out, end), _fit(self._exact, end)
        self._out[start:end] = hidden
        self._exact[start:end] = exact

    def keep(self, positions: Sequence[int]) -> None:
        """After a round: keep the leading run of `positions` that read exact features, drop the rest.

        The dropped committed tokens are fed again next round (`DraftLMDrafter.feed_pending`), now with
        the target's features, so the drafter's cache never holds a committed token seen through f^."""
        m = leading_run(list(positions))
        inexact = (~self._exact[:m]).nonzero()
        self.crop(int(inexact[0]) if len(inexact) else m)

    def crop(self, n: int) -> None:
        """Keep the first n cached positions as they are (exact or not)."""
        if n < self.length:
            super().keep(range(n))
            del self._tok[n:], self._par[n:]
            if len(self.index.ctx) > n:  # never in the engine: committed slots stay
                self.index = NgramIndex(self.index.max_ngram)
