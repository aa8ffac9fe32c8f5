"""Hugging Face assisted generation, seen as specviz traces: `generate(assistant_model=...)` round by round.

Only the library's public hooks are used, none of its internals is patched:

- ``assistant_model=`` takes a stand-in that forwards every attribute to the draft model and wraps its
  ``generate()``: assisted generation asks the draft for each round's candidates through that call, with the scores
  of every step, so the stand-in sees the candidates and the draft's q (after the same warpers);
- ``logits_processor=`` gets one more processor, last in the user's list: the target runs it at every position of
  the round's verify, so it sees the target's distribution p at each candidate (the sampling warpers that the
  library appends after user processors, temperature, top-k and top-p, are applied to a copy first);
- ``streamer=`` gets a streamer (chained to the user's own) whose ``put()`` receives the tokens each round appended:
  the accepted candidates and the target's own token.

Each round becomes a chain `RoundTrace`: the candidates with their q and p, the accepted prefix, the rejected
candidate, the bonus or corrected token, the top of q and p at each position, and, when sampling, the top of the
residual the correction was drawn from. HF does not expose the uniform draws, so ``u`` stays empty; draft_ms is the
draft's generate() call and verify_ms the rest of the round (the target's forward and HF's bookkeeping). Batch size 1.

    rec = AssistedRecorder(draft)
    out = target.generate(ids, max_new_tokens=64, **rec.hooks())
    trace = rec.trace(ids[0].tolist(), tokenizer)
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import transformers
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.generation.streamers import BaseStreamer

from specviz.core.config import RunConfig, SamplingConfig
from specviz.core.sampling import residual
from specviz.core.text import Detokenizer
from specviz.core.trace import ACCEPTED, BONUS, REJECTED, RESAMPLE, ROOT, UNVISITED, GenerationTrace, RoundTrace
from specviz.core.tree import chain
from specviz.engine.record import ids_in, token_texts
from specviz.engine.tops import entropies, top_pairs

SOURCE = f"Hugging Face assisted generation (transformers {transformers.__version__})"


class _Round:
    def __init__(self, prefix_len: int, root: int, candidates: list[int], q: torch.Tensor | None, t0: float):
        self.prefix_len, self.root, self.candidates, self.q = prefix_len, root, candidates, q  # q: (L, V) or None
        self.p: dict[int, torch.Tensor] = {}  # position -> the target's warped distribution there
        self.t0, self.t1 = t0, time.perf_counter()


class _Draft:
    """The draft model, unchanged, whose generate() is watched (every other attribute is the model's own)."""

    def __init__(self, model, rec: AssistedRecorder):
        self._model, self._rec = model, rec

    def __getattr__(self, name):
        return getattr(self._model, name)

    def generate(self, *args, **kwargs):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        if ids.shape[0] != 1:
            raise ValueError("specviz records assisted generation for one prompt at a time (batch size 1)")
        t0 = time.perf_counter()
        self._rec.in_draft = True
        try:
            out = self._model.generate(*args, **kwargs)
        finally:
            self._rec.in_draft = False
        n = ids.shape[1]
        cands = out.sequences[0, n:].tolist()
        q = torch.stack(out.scores, 1)[0].float().softmax(-1) if cands else None
        self._rec.open(_Round(n, int(ids[0, -1]), cands, q, t0))
        return out


class _Target(LogitsProcessor):
    """Reads the target's distribution at each position of a round's verify; changes nothing."""

    def __init__(self, rec: AssistedRecorder):
        self.rec = rec

    def __call__(self, input_ids, scores):
        if self.rec.in_draft:  # the same processors also run inside the draft's generate()
            return scores
        rnd = self.rec.current
        if rnd is None:  # a round without a draft call (no room left to draft): the target alone
            n = input_ids.shape[1]
            rnd = self.rec.open(_Round(n, int(input_ids[0, -1]), [], None, time.perf_counter()))
        s = self.rec.warpers(input_ids, scores.clone()) if self.rec.warpers else scores
        rnd.p[input_ids.shape[1] - rnd.prefix_len] = s[0].float().softmax(-1)
        return scores


class _Streamer(BaseStreamer):
    """Closes a round at each put() after the prompt's; passes everything on to the user's streamer."""

    def __init__(self, rec: AssistedRecorder, inner: BaseStreamer | None):
        self.rec, self.inner, self.prompt_seen = rec, inner, False

    def put(self, value):
        if self.inner is not None:
            self.inner.put(value)
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.rec.close(value.reshape(-1).tolist())

    def end(self):
        if self.inner is not None:
            self.inner.end()


class AssistedRecorder:
    """Hooks for one `generate(assistant_model=...)` call, and the trace of its rounds afterwards."""

    def __init__(self, draft, record_top: int = 8):
        self.draft, self.record_top = draft, record_top
        self.rounds: list[RoundTrace] = []
        self.current: _Round | None = None
        self.in_draft = False
        self.warpers: LogitsProcessorList | None = None
        self.sampling = SamplingConfig()
        self.t_start = 0.0

    def hooks(
        self,
        logits_processor: Sequence[LogitsProcessor] | None = None,
        streamer: BaseStreamer | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int = 50,
        top_p: float = 1.0,
    ) -> dict:
        """Keyword arguments for `target.generate`: assistant_model, logits_processor, streamer and the sampling
        settings (give the same values the call would use; HF's defaults are temperature 1, top-k 50, top-p 1)."""
        self.rounds, self.current, self.t_start = [], None, time.perf_counter()
        out = {"do_sample": do_sample}
        if do_sample:
            self.sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
            self.warpers = LogitsProcessorList(
                [
                    *([TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []),
                    *([TopKLogitsWarper(top_k)] if top_k else []),
                    *([TopPLogitsWarper(top_p)] if top_p < 1.0 else []),
                ]
            )
            out.update(temperature=temperature, top_k=top_k, top_p=top_p)
        else:
            self.sampling, self.warpers = SamplingConfig(), None
        out["assistant_model"] = _Draft(self.draft, self)
        out["logits_processor"] = LogitsProcessorList([*(logits_processor or []), _Target(self)])
        out["streamer"] = _Streamer(self, streamer)
        return out

    def open(self, rnd: _Round) -> _Round:
        self.current = rnd
        return rnd

    def close(self, appended: list[int]) -> None:
        rnd, self.current = self.current, None
        if rnd is None:
            raise RuntimeError("a round ended that specviz did not see begin: was generate() given these hooks?")
        self.rounds.append(self._round(rnd, appended, (time.perf_counter() - rnd.t1) * 1e3))

    def _round(self, rnd: _Round, appended: list[int], verify_ms: float) -> RoundTrace:
        c = rnd.candidates
        n = 0
        while n < min(len(c), len(appended)) and appended[n] == c[n]:
            n += 1
        q = [1.0] + ([float(rnd.q[i, t]) for i, t in enumerate(c)] if c else [])
        tree = chain(rnd.root, c, q[1:])
        status = [ROOT] + [ACCEPTED] * n + ([REJECTED] if n < len(c) else []) + [UNVISITED] * max(0, len(c) - n - 1)
        p = [None] + [float(rnd.p[i][t]) if i in rnd.p else None for i, t in enumerate(c)]
        tops = {}
        if self.record_top and c:
            have = [i for i in range(len(c)) if i in rnd.p]  # positions the target judged
            ptop, pent = {}, {}
            if have:
                rows = torch.stack([rnd.p[i] for i in have])
                ptop, pent = dict(zip(have, top_pairs(rows, self.record_top))), dict(zip(have, entropies(rows)))
            tops = {
                "q_top": (None, *top_pairs(rnd.q, self.record_top)),
                "p_top": (None, *(ptop.get(i) for i in range(len(c)))),
                "p_entropy": (None, *(pent.get(i) for i in range(len(c)))),
            }
            if not self.sampling.greedy and n < len(c) and n in rnd.p:
                left = top_pairs(residual(rnd.p[n], rnd.q[n])[None], self.record_top)[0]
                tops["residual_top"] = tuple(left if i == n + 1 else None for i in range(len(c) + 1))
        return RoundTrace(
            index=len(self.rounds),
            context_len=rnd.prefix_len,
            tree=tree,
            status=tuple(status),
            p=tuple(p),
            accepted_path=tuple(range(1, n + 1)),
            emitted=tuple(appended),
            correction=BONUS if n == len(c) else RESAMPLE,
            draft_ms=(rnd.t1 - rnd.t0) * 1e3,
            verify_ms=verify_ms,
            draft_forwards=len(c),
            **tops,
        )

    def trace(self, prompt_ids: Sequence[int], tokenizer=None, prompt_text: str = "", eos_ids=()) -> GenerationTrace:
        """The recorded rounds as one GenerationTrace (method "chain": every round is a chain)."""
        if self.current is not None:
            raise RuntimeError("the last round never ended: did generate() finish?")
        out = [t for r in self.rounds for t in r.emitted]
        run = RunConfig(method="chain", max_new_tokens=max(1, len(out)), sampling=self.sampling, record_top=0)
        model = getattr(self.draft, "name_or_path", None) or getattr(self.draft.config, "_name_or_path", "")
        return GenerationTrace(
            method="chain",
            config={**run.to_dict(), "source": SOURCE},
            prompt_ids=tuple(prompt_ids),
            output_ids=tuple(out),
            rounds=tuple(self.rounds),
            token_text=token_texts(tokenizer, ids_in(prompt_ids, self.rounds)),
            total_ms=(time.perf_counter() - self.t_start) * 1e3,
            prompt_text=prompt_text,
            models={"source": SOURCE, "draft": str(model), "drafter": "hf-assisted"},
            stop="eos" if out and out[-1] in set(eos_ids) else "length",
            pieces=None if tokenizer is None else tuple(Detokenizer(tokenizer).pieces(out)),
        )
