"""The EAGLE-style drafter's own weights (fc, its layers and norm; the embeddings stay the target's): shipping them
as a folder (config.json + eagle.safetensors) and starting them from the standalone draft's layer and norm.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specviz.models.eagle import FC_KEY
from specviz.train.draft import HEAD_KEY


def own_params(model) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save_eagle(model, ids_v: torch.Tensor, folder: Path) -> Path:
    """config.json + eagle.safetensors (fc, layer, norm in bf16; head ids); embeddings stay the target's."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.config.__class__.from_dict(model.config.to_dict())
    cfg.dtype = "bfloat16"
    cfg.save_pretrained(folder)
    t = {n: p.detach().to(torch.bfloat16).contiguous() for n, p in own_params(model).items()}
    H = model.config.hidden_size
    fc = own_params(model)[FC_KEY].detach().clone()
    fc[:, H : 2 * H] *= getattr(model, "eagle_feature_scale", 1.0)  # fold the training-time input scale
    t[FC_KEY] = fc.to(torch.bfloat16).contiguous()
    t[HEAD_KEY] = ids_v.long().contiguous()
    tmp = folder / "eagle.safetensors.tmp"
    save_file(t, str(tmp), metadata={"format": "specviz-eagle"})
    tmp.rename(folder / "eagle.safetensors")
    return folder / "eagle.safetensors"


def init_from_draft(model, draft_folder: Path) -> torch.Tensor:
    """Copy the standalone draft's layer and norm into the drafter; return its head ids."""
    state = load_file(str(Path(draft_folder) / "draft.safetensors"))
    ids_v = state.pop(HEAD_KEY)
    own = {k: v.float() for k, v in state.items() if k.startswith("model.layers.0.") or k == "model.norm.weight"}
    wanted = {n for n in own_params(model) if n == "model.norm.weight" or n.startswith("model.layers.0.")}
    missing = wanted - set(own)  # a drafter's later layers start as identities (build_eagle)
    if missing:
        raise ValueError(f"the draft in {draft_folder} lacks {sorted(missing)}")
    model.load_state_dict(own, strict=False)
    return ids_v
