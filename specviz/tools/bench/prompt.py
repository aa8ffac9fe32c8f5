"""One prompt of a bench: decoding it with one setting, timed, and the greedy audit of its outputs against
autoregressive decoding."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from specviz import kernels
from specviz.core.config import RunConfig, SamplingConfig
from specviz.core.prompts import task_of
from specviz.core.tree import depths
from specviz.engine.loop import iter_rounds, prepare
from specviz.engine.record import collect
from specviz.kernels import rowkernel
from specviz.tools.bench.engine import engine_one
from specviz.tools.bench.hf import HFSetting, hf_generate
from specviz.tools.bench.specs import Setting, method_knobs


@dataclass(frozen=True)
class Prompt:
    qid: str
    category: str
    ids: tuple[int, ...]
    text: str = ""

    @property
    def task(self) -> str:
        return task_of(self.category)


# -- one run -----------------------------------------------------------------------------------
def run_one(
    pair, prompt: Prompt, s: Setting, temperature: float, max_new_tokens: int, seed: int, keep: bool = False
) -> dict:
    """Decode one prompt with one setting; a record of plain values (`keep`: with the whole trace as a dict under
    "trace", for specviz's own methods)."""
    if s.kind == "engine":  # served elsewhere: none of specviz's kernels or heads apply
        return engine_one(s, prompt.ids, prompt.text, temperature, max_new_tokens, seed)
    stock = s.kernels == "stock" or (s.kind == "hf" and not s.kernels)
    models = [lm.model for lm in pair.lms]
    with (
        kernels.stock(*models) if stock else contextlib.nullcontext(),
        kernels.full_rows(*models) if s.kernels == "fp32draft" else contextlib.nullcontext(),
        rowkernel.off() if s.kernels == "mkl" else contextlib.nullcontext(),
        head_only(pair.lms) if s.static else contextlib.nullcontext(),
    ):
        return _run_one(pair, prompt, s, temperature, max_new_tokens, seed, keep)


@contextlib.contextmanager
def head_only(lms):
    """The drafters' reduced heads without their context vocabulary (`ModelConfig.context_vocab`) for one run."""
    was = [lm.context_vocab for lm in lms]
    for lm in lms:
        lm.context_vocab = False
    try:
        yield
    finally:
        for lm, w in zip(lms, was):
            lm.context_vocab = w


def _run_one(pair, prompt: Prompt, s: Setting, temperature: float, max_new_tokens: int, seed: int, keep: bool) -> dict:
    if s.kind == "hf":
        r = hf_generate(
            pair.target.model,
            list(prompt.ids),
            max_new_tokens,
            temperature,
            seed,
            HFSetting(s.method, s.k),
            pair.draft.model,
        )
        made, depth = 0, []
        for n in r.rounds:  # a constant-K draft offers min(K, tokens left - 1)
            depth.append(min(s.k, max_new_tokens - made - 1) if s.method == "constant" else None)
            made += n
        return dict(
            output_ids=r.output_ids,
            tokens=len(r.output_ids),
            total_ms=r.total_ms,
            rounds=len(r.rounds),
            accepted=[n - 1 for n in r.rounds],
            depth=depth,
        )
    run = RunConfig(
        method=s.method,
        max_new_tokens=max_new_tokens,
        sampling=SamplingConfig(temperature=temperature, seed=seed),
        drafter=s.drafter,
        copy=s.copy,
        record_top=RunConfig().record_top if s.record else 0,
        **method_knobs(s),
    )
    f0 = sum(lm.forward_ms for lm in pair.lms)
    t0 = time.perf_counter()
    drafter, rng = prepare(pair, run)  # built inside the timed call, as a run builds it
    rounds = list(iter_rounds(pair, list(prompt.ids), run, drafter, rng))
    ms = (time.perf_counter() - t0) * 1e3
    out = [t for r in rounds for t in r.emitted]
    kept = {"trace": collect(pair, prompt.ids, run, rounds, ms, prompt.text, drafter).to_dict()} if keep else {}
    return dict(
        **kept,
        output_ids=out,
        tokens=len(out),
        total_ms=ms,
        rounds=len(rounds),
        forward_ms=sum(lm.forward_ms for lm in pair.lms) - f0,
        accepted=[r.n_accepted for r in rounds],
        depth=[max(depths(r.tree.parents)) for r in rounds],
        draft_ms=sum(r.draft_ms for r in rounds),
        verify_ms=sum(r.verify_ms for r in rounds),
        overhead_ms=sum(r.overhead_ms for r in rounds),
        draft_forwards=sum(r.draft_forwards for r in rounds),
    )


def logit_margin(pair, ids: list[int]) -> dict:
    """The target's logits after `ids` (a fresh forward over the whole prefix): top1, top2, margin."""
    lm = pair.target
    lm.reset()
    x = lm.forward(ids, rows=slice(-1, None)).logits[0]  # (V,)
    lm.reset()
    v, i = torch.topk(x, 2)
    return {"top1": int(i[0]), "top2": int(i[1]), "margin": float(v[0] - v[1])}


def audit(pair, prompt: Prompt, ref: list[int], outputs: dict[str, list[int]]) -> list[dict]:
    """One record per setting whose greedy output differs from the autoregressive `ref`."""
    found = []
    for key, got in outputs.items():
        if got == ref:
            continue
        pos = next((i for i, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
        m = logit_margin(pair, list(prompt.ids) + ref[:pos])
        found.append(
            {
                "prompt": prompt.qid,
                "task": prompt.task,
                "setting": key,
                "position": pos,
                "ref_token": ref[pos] if pos < len(ref) else None,
                "got_token": got[pos] if pos < len(got) else None,
                **m,
            }
        )
    return found
