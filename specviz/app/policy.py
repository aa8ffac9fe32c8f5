"""The environment's policy: whether the page is public (Hugging Face Space) or local, whether it serves MCP, and
which model pairs it may load and how (`model_config`). No gradio here."""

from __future__ import annotations

import os
from dataclasses import replace

import torch

from specviz.core.config import ModelConfig
from specviz.core.pairs import PAIRS, PairSpec
from specviz.models.loading import on_space


def public() -> bool:
    """Public mode: only the allow-listed pairs, never a path or hub id typed in the page. SPECVIZ_PUBLIC=1 turns
    it on, 0 off; unset, it is on where the page is a Hugging Face Space (SPACE_ID set) and off elsewhere."""
    return os.environ.get("SPECVIZ_PUBLIC", "1" if on_space() else "0") == "1"


def mcp() -> bool:
    """Serve the page's endpoints as MCP tools too (at /gradio_api/mcp/): SPECVIZ_MCP=1 turns it on, 0 off; unset,
    on for a local page and off on a public one."""
    return os.environ.get("SPECVIZ_MCP", "0" if public() else "1") == "1"


def pair_status(spec: PairSpec, gpu_gb: float | None = None) -> str | None:
    """Why `spec` cannot load here, or None where it can: the hub switched off, no token for a gated model, or no
    GPU with its memory (`gpu_gb`: the GPU's memory in GB, default: measured; a ZeroGPU Space counts as large)."""
    if spec.hub and os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return "the model hub is switched off here (HF_HUB_OFFLINE)"
    if spec.gated and not (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")):
        return "its models are gated: set HF_TOKEN to a token with access"
    if spec.gpu_gb:
        have = gpu_memory_gb() if gpu_gb is None else gpu_gb
        if have < spec.gpu_gb:
            return f"it needs a GPU with {spec.gpu_gb:g} GB" + (f" (this one has {have:.0f} GB)" if have else "")
    return None


def gpu_memory_gb() -> float:
    """The GPU's memory in GB: 0 without one; a ZeroGPU Space lends large slices (SPACES_ZERO_GPU set)."""
    if os.environ.get("SPACES_ZERO_GPU"):
        return 40.0
    if not torch.cuda.is_available():
        return 0.0
    return torch.cuda.get_device_properties(0).total_memory / 1e9


def offered_pairs() -> list[tuple[str, str]]:
    """(label, name) of every pair that can load here (the offline default always can), the default first; each
    label says what the pair needs."""
    return [(s.label, s.name) for s in PAIRS.values() if pair_status(s) is None]


def model_config(
    pair: str, dtype: str, target: str = "", draft: str = "", device_map: str = "", max_memory: str = ""
) -> ModelConfig:
    """The ModelConfig for the page's model choice; custom target / draft and a device map only outside public
    mode."""
    if pair not in PAIRS:
        raise ValueError(f"unknown model pair {pair!r}; choose one of: {', '.join(PAIRS)}")
    why = pair_status(PAIRS[pair])
    if why:
        raise ValueError(f"the pair {pair} cannot load here: {why}")
    target, draft = (target or "").strip(), (draft or "").strip()
    device_map, max_memory = (device_map or "").strip() or None, (max_memory or "").strip() or None
    if (target or draft) and public():
        raise ValueError("this is a public deployment: only the listed model pairs can be loaded")
    if device_map and public():
        raise ValueError("this is a public deployment: the pairs load as listed, without a device map")
    base = PAIRS[pair].model
    return replace(
        base,
        target=target or base.target,
        draft=draft or base.draft,
        dtype=dtype,
        device_map=device_map or base.device_map,
        max_memory=max_memory or base.max_memory,
    )
