"""A thin, stateful wrapper over a Hugging Face causal LM: its KV cache and the verbs on it.

This is the only module that knows how transformers caches and attention masks work.
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
from transformers import DynamicCache

from . import kernels


@dataclass
class Forward:
    """Result of one forward: post-norm hidden states (n, H) and logits (n, V) of the requested rows."""

    hidden: torch.Tensor
    logits: torch.Tensor


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
    draft lossless: the q it proposes from is the q the verifier sees).
    """

    def __init__(self, model, head_ids: torch.Tensor | None = None, name: str = ""):
        self.model = model.eval()
        skinny = kernels.install(model) > 0    # few-row matmuls as tall-skinny gemms (CPU fp32; see kernels.py)
        self._linear = kernels.skinny_linear if skinny else torch.nn.functional.linear
        self.name = name
        self.config = model.config
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.base = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.softcap = getattr(model.config, "final_logit_softcapping", None)
        self.head_ids = None
        if head_ids is not None:
            self.head_ids = head_ids.to(self.device).long()
            self.head_weight = self.head.weight.index_select(0, self.head_ids).contiguous()   # (Vsub, H)
        self.cache = DynamicCache(config=model.config)
        self.forwards = 0
        self.forward_ms = 0.0              # wall time spent in forward() (model body + output layer); CPU-exact

    # -- cache verbs -------------------------------------------------------------------------
    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    def reset(self) -> None:
        self.cache = DynamicCache(config=self.config)

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
        idx = torch.tensor(tail, dtype=torch.long, device=self.device) if tail else None
        for layer in self.cache.layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                if idx is not None:                      # index_select copies first, so the overlap is safe
                    layer.keys[..., m:n, :] = layer.keys.index_select(-2, idx)
                    layer.values[..., m:n, :] = layer.values.index_select(-2, idx)
                layer.keys = layer.keys[..., :n, :]
                layer.values = layer.values[..., :n, :]

    # -- forward -----------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, ids: Sequence[int], parents: Sequence[int] | None = None, rows: slice | Sequence[int] | None = None,
                visible: torch.Tensor | None = None) -> Forward:
        """Run `ids` on top of the cache and append them to it.

        ids: the n new tokens; parents: local parent of each (-1 = the cached prefix), None = a plain
        sequence; rows: which rows to return logits for (default all); visible: (n, past) bool, the cached
        positions each token with local parent -1 attends to (default all). A tree drafter whose cache holds
        several branches uses it to show a node only the prefix and its own ancestors; a token's position
        id is then the number of positions it attends to, minus one.
        """
        t0 = time.perf_counter()
        n, past = len(ids), self.length
        input_ids = torch.tensor([list(ids)], dtype=torch.long, device=self.device)          # (1, n)
        is_chain = parents is None or all(p == i - 1 for i, p in enumerate(parents))
        if is_chain and visible is None:
            pos = torch.arange(past, past + n, device=self.device)[None]                      # (1, n)
            mask = None
        else:
            allow = self._tree_allow(parents or list(range(-1, n - 1)), past, visible)        # (n, past+n)
            pos = (allow.sum(-1) - 1)[None].to(self.device)                                   # (1, n)
            mask = torch.zeros(n, past + n, dtype=self.dtype)
            mask.masked_fill_(~allow, torch.finfo(self.dtype).min)
            mask = mask[None, None].to(self.device)                                           # (1, 1, n, past+n)
        out = self.base(**self._inputs(input_ids, parents, visible, past), position_ids=pos, attention_mask=mask,
                        cache=self.cache, use_cache=True)
        self.forwards += 1
        h = out.last_hidden_state[0]                                                          # (n, H)
        self._after_forward(h)
        if rows is not None:
            h = h[rows]
        fwd = Forward(hidden=h, logits=self.logits(h))
        self.forward_ms += (time.perf_counter() - t0) * 1e3
        return fwd

    # -- hooks for drafters that read more than token ids (eagle.EagleLM) ------------------------
    wants_target_features = False

    def add_target_features(self, start: int, hidden: torch.Tensor) -> None:
        """The target's post-norm hidden states of committed positions start, start+1, ... (ignored here)."""

    def _inputs(self, input_ids: torch.Tensor, parents, visible, past: int) -> dict:
        return {"input_ids": input_ids}

    def _after_forward(self, hidden: torch.Tensor) -> None:
        self.last_hidden = hidden             # every row of the last forward (the prefill's, for feature drafters)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """(n, H) hidden -> (n, V) fp32 logits over the full vocabulary."""
        if self.head_ids is None:
            x = self.head(h).float()
        else:
            sub = self._linear(h, self.head_weight).float()                     # (n, Vsub)
            x = torch.full((h.shape[0], self.vocab_size), float("-inf"), device=h.device)
            x[:, self.head_ids] = sub
        if self.softcap:
            x = torch.tanh(x / self.softcap) * self.softcap
        return x

    @staticmethod
    def _tree_allow(parents: Sequence[int], past: int, visible: torch.Tensor | None) -> torch.Tensor:
        """(n, past+n) bool: row i attends to its visible cached positions, its local ancestors and itself."""
        n = len(parents)
        allow = torch.zeros(n, past + n, dtype=torch.bool)
        allow[:, :past] = True if visible is None else visible.cpu()
        for i, p in enumerate(parents):
            if p >= 0:
                allow[i] = allow[p]
            allow[i, past + i] = True
        return allow
