"""Forms of a module's weights made once and kept on it (packed for oneDNN, stacked, bf16 bits for numba): the box
they live in (`Kept`) and what tells a changed tensor (`version`)."""

from __future__ import annotations

import torch


class Kept:
    """Where a module keeps a form of its weights, with the key it was made for; a copy (deepcopy, pickle) starts
    empty and makes it again (oneDNN's opaque tensors cannot be copied, and a copy's weights are other tensors)."""

    __slots__ = ("key", "value")

    def __init__(self):
        self.key, self.value = None, None

    def __deepcopy__(self, memo):
        return Kept()

    def __reduce__(self):
        return (Kept, ())


def box(owner: torch.nn.Module, name: str) -> Kept:
    """`owner`'s box `name`, made empty on first use."""
    found = owner.__dict__.get(name)
    if found is None:
        found = owner.__dict__[name] = Kept()
    return found


def version(t: torch.Tensor):
    """`t`'s in-place change counter; None for an inference tensor, which cannot change in place."""
    return None if t.is_inference() else t._version
