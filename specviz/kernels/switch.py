"""A numba kernel's state: its code imported once (`load`), and the switch the benchmark's ablations use (`off`)."""

from __future__ import annotations

import contextlib
import importlib


def load(state: dict, module: str):
    """`specviz.kernels.<module>` (a kernel's numba code), imported on first use and kept in `state["kernel"]`; None
    where it cannot be (numba missing or failing to compile), and from then on (`state["failed"]`)."""
    if state["kernel"] is None and not state["failed"]:
        try:
            state["kernel"] = importlib.import_module(f"specviz.kernels.{module}")
        except Exception:
            state["failed"] = True
    return state["kernel"]


@contextlib.contextmanager
def off(state: dict):
    """Run the block with `state["enabled"]` False (the kernel that reads it falls back to torch's), then restore."""
    before = state["enabled"]
    state["enabled"] = False
    try:
        yield
    finally:
        state["enabled"] = before
