"""Where a target's modules go under a device map: accelerate places them (`from_pretrained(device_map=...)`, its
hooks moving tensors between devices and loading offloaded weights), never specviz. `placement` turns a
`ModelConfig`'s device map into `from_pretrained`'s arguments; `placed_on` says where a loaded model went."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from specviz.core.assets import cache_dir
from specviz.core.config import ModelConfig, max_memory


def placed_on(model) -> dict:
    """How many of `model`'s mapped modules each device holds ({"cpu": 12, "disk": 18}, GPU indices as "cuda:N")."""
    placed = (getattr(model, "hf_device_map", None) or {}).values()
    return dict(Counter(f"cuda:{w}" if isinstance(w, int) else str(w) for w in placed))


def placement(cfg: ModelConfig, name: str) -> dict:
    """`from_pretrained`'s placement arguments for a target under `cfg.device_map` ({} without one): accelerate's
    strategy or the map read from a JSON file, `max_memory`, and an offload folder in the user cache for what it
    puts on disk."""
    if cfg.device_map is None:
        return {}
    where = cfg.device_map
    if where.endswith(".json"):
        try:
            where = json.loads(Path(where).read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read the device map {cfg.device_map}: {e}") from None
        if not isinstance(where, dict) or not all(
            isinstance(k, str) and (isinstance(v, int) or v in ("cpu", "disk") or str(v).startswith("cuda"))
            for k, v in where.items()
        ):
            raise ValueError(
                f"the device map {cfg.device_map} must be a JSON object of module name -> device "
                '(a GPU index, "cuda:N", "cpu" or "disk")'
            )
    slug = "".join(c if c.isalnum() else "-" for c in name)[-80:]
    out = {"device_map": where, "offload_folder": str(cache_dir() / "offload" / slug)}
    if cfg.max_memory:
        out["max_memory"] = max_memory(cfg.max_memory)
    return out
