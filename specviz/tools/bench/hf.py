"""The Hugging Face side of the benchmark: `generate()` with and without an assistant model.

Nothing in transformers is patched. The knobs of assisted generation are set on the assistant's
`generation_config` (where the candidate generator reads them) and restored afterwards, so the
"heuristic" schedule's persisted K never leaks from one run into the next. Per-round accepted
lengths come from a streamer: after the prompt, every `put()` carries the tokens one round
emitted (n accepted draft tokens + 1 target token), so tau = emitted tokens / rounds for HF too.

Settings (`HFSetting.mode`): "plain" (target alone), "dynamic" (the library defaults, knobs left
unset; in transformers 5: constant schedule, K = 20, confidence threshold 0.4, adapted by ROC
when scikit-learn is importable),
"constant" (fixed K, threshold 0: classic speculative decoding), "heuristic" (+2 / -1, start K),
"lookup" (prompt lookup decoding, no assistant: `prompt_lookup_num_tokens` = K, library default n-gram size).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers.generation.streamers import BaseStreamer

KNOBS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


@dataclass(frozen=True)
class HFSetting:
    mode: str  # plain | dynamic | constant | heuristic | lookup
    k: int | None = None  # constant / heuristic: draft tokens per round (heuristic: the start value)

    def knobs(self) -> dict | None:
        """Values for the assistant's generation_config, or None where no assistant runs."""
        if self.mode in ("plain", "lookup"):
            return None
        if self.mode == "dynamic":  # unset: the candidate generator fills in the library defaults
            return dict.fromkeys(KNOBS)
        if self.mode == "constant":
            return {
                "num_assistant_tokens": self.k,
                "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": 0.0,
            }
        if self.mode == "heuristic":
            return {
                "num_assistant_tokens": self.k or 5,
                "num_assistant_tokens_schedule": "heuristic",
                "assistant_confidence_threshold": 0.0,
            }
        raise ValueError(f"unknown Hugging Face setting {self.mode!r}")


class RoundRecorder(BaseStreamer):
    """Counts the tokens of every `put()` after the first one (the prompt): one entry per round."""

    def __init__(self):
        self.rounds: list[int] = []
        self._seen_prompt = False

    def put(self, value):
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        self.rounds.append(int(value.numel()))

    def end(self):
        pass


@dataclass
class HFRun:
    output_ids: list[int]
    rounds: list[int]  # tokens emitted per round (accepted drafts + 1)
    total_ms: float


def _set_knobs(model, knobs: dict) -> dict:
    gc = model.generation_config
    old = {k: getattr(gc, k, None) for k in KNOBS}
    for k, v in knobs.items():
        setattr(gc, k, v)
    return old


def hf_generate(
    target_model,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float,
    seed: int,
    setting: HFSetting,
    assistant_model=None,
) -> HFRun:
    """One `target_model.generate()` call, timed; greedy at temperature 0, pure sampling otherwise."""
    device = next(target_model.parameters()).device
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)  # (1, n)
    kw = dict(
        max_new_tokens=max_new_tokens, min_new_tokens=0, repetition_penalty=1.0, attention_mask=torch.ones_like(ids)
    )
    if temperature > 0:
        kw.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
    else:
        kw.update(do_sample=False)
    knobs = setting.knobs()
    if setting.mode == "lookup":
        kw["prompt_lookup_num_tokens"] = setting.k or 10
    if knobs is not None:
        if assistant_model is None:
            raise ValueError("an assisted Hugging Face setting needs an assistant model")
        kw["assistant_model"] = assistant_model
    rec = RoundRecorder()
    old = _set_knobs(assistant_model, knobs) if knobs is not None else None
    try:
        torch.manual_seed(seed)  # HF samples from the global generator
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = target_model.generate(ids, streamer=rec, **kw)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ms = (time.perf_counter() - t0) * 1e3
    finally:
        if old is not None:
            _set_knobs(assistant_model, old)  # also resets the heuristic schedule's persisted K
    return HFRun(output_ids=out[0, len(prompt_ids) :].tolist(), rounds=rec.rounds, total_ms=ms)
