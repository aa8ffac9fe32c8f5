"""Stored verify curves: the measured ms of one target forward per number of tree tokens, beside the drafters' curves
(`DRAFTER_CURVES`) and the tree budgets they pick (`pick_key`). The shipped ones (assets/verify_curve.json, the
default pair on the machine named in each record) and this machine's own, one record per pair (`hardware_file`, in
the user cache: `specviz budget` and the page's Hardware tab write them)."""

from __future__ import annotations

import json
from pathlib import Path

from specviz.core.assets import VERIFY_CURVES, cache_dir
from specviz.core.output import replacing

DRAFTER_CURVES = {"draft": "standalone draft", "eagle": "EAGLE drafter"}  # a record's drafter curves: key -> label


def interpolate(curve: dict, n: float) -> float:
    """t(n) in ms, linear between measured sizes and beyond the last two."""
    xs, ys = curve["n"], curve["ms"]
    if n <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if n <= x1:
            return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = (xs[-2], ys[-2]), (xs[-1], ys[-1])
    return y1 + (y1 - y0) * (n - x1) / (x1 - x0)


def load_curves(path: Path = VERIFY_CURVES) -> dict[str, dict]:
    """Stored measurements by dtype: {dtype: {"target": curve, "draft": curve, "machine": ..., ...}}."""
    return json.loads(path.read_text()) if path.exists() else {}


def hardware_file() -> Path:
    """This machine's measurements, by `pair_key` (the user cache)."""
    return cache_dir() / "hardware.json"


def pair_key(info: dict) -> str:
    """A loaded pair as measurements know it (`Pair.info`): its models, dtype, device, placement and the machine it
    loaded on (`core.device.machine_name`)."""
    parts = [info.get(k) for k in ("target", "draft", "eagle", "dtype", "device")]
    return " | ".join(map(str, [*parts, json.dumps(info.get("device_map"), sort_keys=True), info.get("machine")]))


def local_record(info: dict, path: Path | None = None) -> dict | None:
    """This machine's measurement of the pair `info` describes, or None."""
    path = path or hardware_file()
    try:
        return json.loads(path.read_text()).get(pair_key(info)) if path.exists() else None
    except ValueError:
        return None  # a damaged cache file: measured again


def save_local(record: dict, path: Path | None = None) -> Path:
    """Keep `record` (for the pair in its "models") as this machine's measurement of it."""
    path = path or hardware_file()
    try:
        table = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        table = {}
    table[pair_key(record["models"])] = record
    with replacing(path) as f:
        f.write(json.dumps(table, indent=1) + "\n")
    return path


def device_curve(info: dict, path: Path = VERIFY_CURVES) -> dict | None:
    """The target verify curve for this pair (`Pair.info`): this machine's own measurement where there is one, else
    the shipped one of the same target, dtype and device type (measured on another machine: a guess of the same
    shape until `specviz budget` measures it here), else None."""
    own = local_record(info)
    if own is not None:
        return own["target"]
    rec = load_curves(path).get(info.get("dtype"))
    if not rec or rec.get("models", {}).get("target") != info.get("target"):
        return None
    if str(rec["models"].get("device", "cpu")).split(":")[0] != str(info.get("device", "cpu")).split(":")[0]:
        return None
    return rec["target"]


def pick_key(drafter: str, temperature: float) -> str:
    """A pick's key in a record: "T=0" for the standalone draft (as records have always named it), "eagle T=0"."""
    return f"T={temperature:g}" if drafter == "draft" else f"{drafter} T={temperature:g}"


def pick_label(key: str) -> tuple[str, str]:
    """(drafter label, "T=...") of a pick's key."""
    who, _, t = key.rpartition(" ")
    return DRAFTER_CURVES.get(who or "draft", who), t
