"""The target's features for the EAGLE-style drafter: its post-norm last hidden state f at every token of the
distillation sequences (and the tapped blocks u^k), computed in padded batches and cached as safetensors, and the
short digests of data and files that name caches and checkpoints.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from specviz.models import direct
from specviz.train.data import Distill, batches


@torch.inference_mode()
def target_features(
    target_model, data: Distill, path: Path, batch_tokens: int = 4096, taps: tuple[int, ...] = ()
) -> torch.Tensor:
    """(N, H (1 + m)) bf16: the target's post-norm last hidden state f at every token of `data` and, for each tap
    k, u^k = its final norm over the output of its first k layers (`models.eagle.add_feature_taps`); each block
    cached at its own path (`path`, then `path` with `-u<k>`), so drafters with other taps share f."""
    paths = [path] + [path.with_name(f"{path.stem}-u{k}{path.suffix}") for k in taps]
    if all(p.exists() for p in paths):
        return torch.cat([load_file(str(p))["features"] for p in paths], 1)
    base = target_model.get_decoder()
    lens = (data.starts[1:] - data.starts[:-1]).tolist()
    H = target_model.config.hidden_size
    out = torch.zeros(len(data.tokens), H * len(paths), dtype=torch.bfloat16)
    for g in tqdm(batches(lens, len(lens), batch_tokens), desc="target features (batches)"):
        L = max(lens[s] for s in g)
        x = torch.zeros(len(g), L, dtype=torch.long)
        for b, s in enumerate(g):
            x[b, : lens[s]] = data.sequence(s)[0]
        h = direct.with_taps(base, base(input_ids=x, output_hidden_states=bool(taps)), taps)  # right padding: unseen
        for b, s in enumerate(g):
            out[data.starts[s] : data.starts[s + 1]] = h[b, : lens[s]].to(torch.bfloat16)
    path.parent.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(paths):
        if not p.exists():
            save_file({"features": out[:, i * H : (i + 1) * H].contiguous()}, str(p.with_suffix(".tmp")))
            p.with_suffix(".tmp").rename(p)
    return out


def digest_file(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()[:8]


def digest(data: Distill) -> str:
    return hashlib.sha1(data.tokens.numpy().tobytes() + data.starts.numpy().tobytes()).hexdigest()[:10]
