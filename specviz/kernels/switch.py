"""A kernel's switch for the benchmark's ablations: `off(state)` turns a kernel off for a block, then restores it."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def off(state: dict):
    """Run the block with `state["enabled"]` False (the kernel that reads it falls back to torch's), then restore."""
    before = state["enabled"]
    state["enabled"] = False
    try:
        yield
    finally:
        state["enabled"] = before
