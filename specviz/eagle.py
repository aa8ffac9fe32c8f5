"""An EAGLE-style feature drafter (Li et al. 2024, arXiv 2401.15077) behind the `LM` interface.

Notation: f_t is the target's post-norm last hidden state at position t (the input of its output
layer, so p_{t+1} = softmax(W f_t)); e(x) the target's token embedding. The drafter reads token x_t
together with the feature of the position before it and predicts that position's feature:

    g_t = fc([e(x_t), f_{t-1}])          (fc: 2H -> H)
    f^_t = norm(decoder_layer(g_<=t))    (one Llama layer over the drafter's own KV cache)
    q_{t+1} = softmax(W' f^_t)           (the target's tied output layer, reduced to `head_ids`)

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
from torch import nn

from .lm import LM

FC_KEY = "eagle_fc.weight"


def eagle_config(target_config):
    """The drafter's LlamaConfig: the target's, with one decoder layer."""
    cfg = copy.deepcopy(target_config)
    cfg.num_hidden_layers = 1
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = ["full_attention"]
    return cfg


def build_eagle(target_model, init_layer: int | None = 0, dtype=torch.float32):
    """A fresh drafter for `target_model`: one Llama layer (a copy of target layer `init_layer`, or random),
    the target's final norm, the target's embeddings and output layer (shared, frozen), and `eagle_fc` =
    [I | 0] (it starts as the token path)."""
    from transformers import LlamaForCausalLM
    cfg = eagle_config(target_model.config)
    model = LlamaForCausalLM(cfg).to(dtype)
    src = target_model.get_decoder()
    H = cfg.hidden_size
    with torch.no_grad():
        if init_layer is not None:
            model.model.layers[0].load_state_dict({k: v.to(dtype) for k, v in src.layers[init_layer].state_dict().items()})
        model.model.norm.weight.copy_(src.norm.weight.to(dtype))
    share_target_weights(model, target_model)
    model.eagle_fc = nn.Linear(2 * H, H, bias=False).to(dtype)
    with torch.no_grad():
        model.eagle_fc.weight.zero_()
        model.eagle_fc.weight[:, :H].copy_(torch.eye(H))
    return model


def share_target_weights(model, target_model) -> None:
    """Point the drafter's embeddings and output layer at the target's (frozen, not stored)."""
    dtype = next(model.model.layers[0].parameters()).dtype
    emb = target_model.get_input_embeddings().weight.detach()
    model.model.embed_tokens.weight = nn.Parameter(emb.to(dtype), requires_grad=False)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    else:
        head = target_model.get_output_embeddings().weight.detach()
        model.lm_head.weight = nn.Parameter(head.to(dtype), requires_grad=False)


def eagle_inputs(model, input_ids: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
    """g = fc([e(x), f]): (B, n) ids and (B, n, H) features -> (B, n, H) inputs_embeds."""
    e = model.get_input_embeddings()(input_ids)
    return model.eagle_fc(torch.cat([e, feats.to(e.dtype)], -1))


class EagleLM(LM):
    """`LM` over an EAGLE drafter: same verbs, plus the target's features (see the module docstring)."""

    wants_target_features = True

    def __init__(self, model, head_ids: torch.Tensor | None = None, name: str = "eagle"):
        if not isinstance(getattr(model, "eagle_fc", None), nn.Linear):
            raise ValueError("an EAGLE drafter needs its eagle_fc layer (build_eagle / loading.load_eagle)")
        super().__init__(model, head_ids=head_ids, name=name)
        self.hidden_size = model.config.hidden_size
        self.reset()

    def reset(self) -> None:
        super().reset()
        H = self.hidden_size
        self.tfeat = torch.zeros(0, H, dtype=self.dtype, device=self.device)     # target f_t, committed t < n_t
        self._out = torch.zeros(64, H, dtype=self.dtype, device=self.device)     # f^ per cache slot (grown x2)
        self._exact = torch.zeros(64, dtype=torch.bool)                          # slot read an exact feature

    def add_target_features(self, start: int, hidden: torch.Tensor) -> None:
        if start > len(self.tfeat):
            raise ValueError(f"target features must be contiguous: have {len(self.tfeat)}, got a block at {start}")
        self.tfeat = torch.cat([self.tfeat[:start], hidden.detach().to(self.dtype)])

    @property
    def n_target(self) -> int:
        return len(self.tfeat)

    def _inputs(self, input_ids, parents, visible, past) -> dict:
        n, n_t = input_ids.shape[1], self.n_target
        src = []                                                    # the slot each new token hangs off
        for i in range(n):
            p = (i - 1) if parents is None else parents[i]
            if p >= 0:
                src.append(past + p)
            elif visible is not None and bool(visible[i].any()):
                src.append(int(visible[i].nonzero()[-1]))
            else:
                src.append(past - 1)
        feats = torch.zeros(n, self.hidden_size, dtype=self.dtype, device=self.device)
        exact = []
        for i, s in enumerate(src):
            if s < 0:
                exact.append(True)                                  # the very first token: nothing before it
            elif s < n_t:
                feats[i] = self.tfeat[s]
                exact.append(True)
            elif s < past:
                feats[i] = self._out[s]
                exact.append(False)
            else:
                raise ValueError("an EAGLE drafter runs a token after an uncommitted token of the same call "
                                 "only one forward at a time")
        self._pending_exact = exact
        return {"inputs_embeds": eagle_inputs(self.model, input_ids, feats[None])}

    def _after_forward(self, hidden) -> None:
        super()._after_forward(hidden)
        n, end = len(hidden), self.length
        start = end - n
        if end > len(self._out):
            cap = max(end, 2 * len(self._out))
            self._out = torch.cat([self._out, self._out.new_zeros(cap - len(self._out), self.hidden_size)])
            self._exact = torch.cat([self._exact, self._exact.new_zeros(cap - len(self._exact))])
        self._out[start:end] = hidden
        self._exact[start:end] = torch.tensor(self._pending_exact, dtype=torch.bool)

    def keep(self, positions: Sequence[int]) -> None:
        """After a round: keep the leading run of `positions` that read exact features, drop the rest.

        The dropped committed tokens are fed again next round (`DraftLMDrafter.feed_pending`), now with
        the target's features, so the drafter's cache never holds a committed token seen through f^."""
        positions = list(positions)
        m = 0
        while m < len(positions) and positions[m] == m and bool(self._exact[m]):
            m += 1
        self.crop(m)

    def crop(self, n: int) -> None:
        """Keep the first n cached positions as they are (exact or not)."""
        if n < self.length:
            super().keep(range(n))
