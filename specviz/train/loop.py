"""The optimisation loop the draft and EAGLE trainers share: AdamW steps under a warm-up + cosine learning
rate, gradient clipping, a smoothed loss on the progress bar, and every `checkpoint_every` steps a held-out
evaluation plus a resumable checkpoint (weights and Adam moments in safetensors, history in its metadata).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tqdm import tqdm


def lr_at(step: int, cfg) -> float:
    """Linear warm-up over `cfg.warmup` steps, then cosine from `cfg.lr` down to a tenth of it at `cfg.steps`."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def adamw(params: dict, cfg) -> torch.optim.AdamW:
    return torch.optim.AdamW(params.values(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.0)


def save_checkpoint(path: Path, params: dict, opt, step: int, history: list[dict]) -> None:
    t = {f"w.{n}": p.detach().contiguous() for n, p in params.items()}
    for n, p in params.items():
        st = opt.state.get(p, {})
        for k in ("exp_avg", "exp_avg_sq"):
            if k in st:
                t[f"{k}.{n}"] = st[k].contiguous()
    tmp = path.with_suffix(".tmp")
    save_file(t, str(tmp), metadata={"step": str(step), "history": json.dumps(history)})
    tmp.rename(path)


def resume(path: Path, params: dict, opt) -> tuple[int, list[dict]]:
    """(step, history) of the checkpoint at `path`, its weights and moments loaded; (0, []) if there is none."""
    if not path.exists():
        return 0, []
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
    return int(meta["step"]), json.loads(meta["history"])


def optimise(
    model,
    params: dict,
    opt,
    cfg,
    start: int,
    history: list[dict],
    ckpt: Path,
    step_loss: Callable[[int], tuple[torch.Tensor, dict]],
    evaluate: Callable[[], dict],
    desc: str,
    on_checkpoint: Callable[[], object] | None = None,
) -> list[dict]:
    """Steps `start` .. cfg.steps - 1. step_loss(step) -> (loss, extra progress-bar fields); evaluate() -> the
    held-out figures recorded (in eval mode) at every checkpoint. Returns the history, model left in eval mode."""
    bar = tqdm(range(start, cfg.steps), desc=desc, initial=start, total=cfg.steps)
    model.train()
    t0, ema = time.perf_counter(), None
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        loss, extra = step_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        bar.set_postfix(loss=f"{ema:.3f}", **extra)
        done = step + 1
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            model.eval()
            figures = evaluate()
            model.train()
            history.append(
                {"step": done, "loss": round(ema, 4), **figures, "seconds": round(time.perf_counter() - t0, 1)}
            )
            bar.write(json.dumps(history[-1]))
            save_checkpoint(ckpt, params, opt, done, history)
            if on_checkpoint:
                on_checkpoint()
    model.eval()
    return history
