"""The optimisation loop the draft and EAGLE trainers share: AdamW steps under a warm-up + cosine learning
rate, gradient clipping, a smoothed loss on the progress bar, every `checkpoint_every` steps a held-out evaluation,
and a resumable checkpoint then and every `checkpoint_minutes` of wall time in between. With `cfg.bf16` a step's
forward and backward run under bf16 autocast (a CPU's bf16 matmul path); weights and Adam stay fp32.

A checkpoint keeps everything the next step reads: the weights and Adam moments (safetensors), the step, the
history, the smoothed loss, the time spent so far, and the states of the run's random generators (the noise
generator of the EAGLE trainer, torch's global one). The data order is a pure function of the seed and the step
(`draft.batch_plan`), so a run stopped anywhere and resumed from its last checkpoint goes on exactly as if it had
never stopped: the same weights to the bit, on the same machine and thread count (tested). One long run can thus
be split across machines: copy its work folder (docs/training.md#a-long-run-across-machines).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tqdm import tqdm


@dataclass
class Progress:
    """Where a run stands: what a checkpoint keeps beside the weights, moments and generator states."""

    step: int = 0
    history: list[dict] = field(default_factory=list)
    ema: float | None = None  # the smoothed loss
    seconds: float = 0.0  # wall time spent training so far, across resumes


def lr_at(step: int, cfg) -> float:
    """Linear warm-up over `cfg.warmup` steps, then cosine from `cfg.lr` down to a tenth of it at `cfg.steps`."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def adamw(params: dict, cfg) -> torch.optim.AdamW:
    return torch.optim.AdamW(params.values(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.0)


def save_checkpoint(
    path: Path, params: dict, opt, progress: Progress, rngs: Mapping[str, torch.Generator] | None = None
) -> None:
    """Weights, Adam moments, generator states and `progress`, written beside `path` and moved onto it."""
    t = {f"w.{n}": p.detach().contiguous() for n, p in params.items()}
    for n, p in params.items():
        st = opt.state.get(p, {})
        for k in ("exp_avg", "exp_avg_sq"):
            if k in st:
                t[f"{k}.{n}"] = st[k].contiguous()
    t["rng.torch"] = torch.get_rng_state()
    for name, gen in (rngs or {}).items():
        t[f"rng.{name}"] = gen.get_state()
    meta = {"step": str(progress.step), "history": json.dumps(progress.history)}
    meta["progress"] = json.dumps({"ema": progress.ema, "seconds": progress.seconds})
    tmp = path.with_suffix(".tmp")
    save_file(t, str(tmp), metadata=meta)
    tmp.rename(path)


def resume(path: Path, params: dict, opt, rngs: Mapping[str, torch.Generator] | None = None) -> Progress:
    """The checkpoint at `path` loaded into `params`, `opt` and the generators `rngs` (and torch's global one);
    its Progress, or a fresh one where there is none. Older checkpoints without generator states load their
    weights and moments."""
    if not path.exists():
        return Progress()
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    t = load_file(str(path))
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(t[f"w.{n}"])
            if f"exp_avg.{n}" in t:
                opt.state[p] = {
                    "step": torch.tensor(float(meta["step"])),
                    "exp_avg": t[f"exp_avg.{n}"].clone(),
                    "exp_avg_sq": t[f"exp_avg_sq.{n}"].clone(),
                }
    if "rng.torch" in t:
        torch.set_rng_state(t["rng.torch"])
    for name, gen in (rngs or {}).items():
        if f"rng.{name}" in t:
            gen.set_state(t[f"rng.{name}"])
    extra = json.loads(meta.get("progress", "{}"))
    return Progress(int(meta["step"]), json.loads(meta["history"]), extra.get("ema"), extra.get("seconds", 0.0))


def optimise(
    model,
    params: dict,
    opt,
    cfg,
    progress: Progress,
    ckpt: Path,
    step_loss: Callable[[int], tuple[torch.Tensor, dict]],
    evaluate: Callable[[], dict],
    desc: str,
    on_checkpoint: Callable[[], object] | None = None,
    rngs: Mapping[str, torch.Generator] | None = None,
) -> list[dict]:
    """Steps `progress.step` .. cfg.steps - 1. step_loss(step) -> (loss, extra progress-bar fields); evaluate() ->
    the held-out figures recorded (in eval mode) at every `checkpoint_every` steps; between those, a checkpoint
    without an evaluation every `cfg.checkpoint_minutes`. `rngs`: the generators step_loss draws from, kept in
    every checkpoint. Returns the history, model left in eval mode."""
    bar = tqdm(range(progress.step, cfg.steps), desc=desc, initial=progress.step, total=cfg.steps)
    model.train()
    t0, spent = time.perf_counter(), progress.seconds
    saved = time.monotonic()
    every_s = 60 * cfg.checkpoint_minutes
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, extra = step_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        ema = progress.ema
        progress.ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        progress.step = done = step + 1
        progress.seconds = spent + time.perf_counter() - t0
        bar.set_postfix(loss=f"{progress.ema:.3f}", **extra)
        evaluated = done % cfg.checkpoint_every == 0 or done == cfg.steps
        if evaluated:
            model.eval()
            figures = evaluate()
            model.train()
            progress.history.append(
                {"step": done, "loss": round(progress.ema, 4), **figures, "seconds": round(progress.seconds, 1)}
            )
            bar.write(json.dumps(progress.history[-1]))
        if evaluated or time.monotonic() - saved >= every_s:
            save_checkpoint(ckpt, params, opt, progress, rngs)
            saved = time.monotonic()
            if on_checkpoint:
                on_checkpoint()
    model.eval()
    return progress.history
