"""Stored verify curves (assets/verify_curve.json): the measured ms of one target forward per number of tree tokens,
beside the drafters' curves (`DRAFTER_CURVES`) and the tree budgets they pick (`pick_key`)."""

from __future__ import annotations

import json
from pathlib import Path

from specviz.core.assets import VERIFY_CURVES

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


def device_curve(info: dict, path: Path = VERIFY_CURVES) -> dict | None:
    """The stored target verify curve for this pair's target, dtype and device type (`Pair.info`), else None.

    Measured on one machine; on another it is a guess of the same shape until `specviz budget`
    re-measures it there."""
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
