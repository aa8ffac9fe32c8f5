"""Devices and dtypes: which device and dtype a run gets, what the machine is, and the one step timer.

dtype names are `core.config.DTYPES`; `TORCH_DTYPES` maps the concrete ones to torch.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from specviz.core.config import DTYPES

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
assert set(DTYPES) == {"auto", *TORCH_DTYPES}


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for, but CUDA is not available on this machine")
    return torch.device(device)


def _cpu_flags() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no cheap probe, so the safe choice (fp32)
        return ""


def native_bf16(device: torch.device) -> bool:
    """Does this device multiply bf16 in hardware (rather than emulating it through fp32)?"""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    flags = _cpu_flags()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(dtype: str, device: torch.device) -> str:
    """ "auto" -> bf16 on a device that multiplies it natively (a GPU that has it, a CPU with AMX or AVX-512 BF16),
    fp32 elsewhere (see ModelConfig); explicit names pass through. On a CPU `load_pair` still checks that bf16 is
    batch-invariant there, else takes fp32."""
    if dtype != "auto":
        return dtype
    return "bf16" if native_bf16(device) else "fp32"


def machine_info() -> dict:
    """What a measurement ran on: CPU model and SIMD flags, cores, threads, GPU, library versions."""
    flags = _cpu_flags().splitlines()
    cpu = next((x.split(":", 1)[1].strip() for x in flags if x.startswith("model name")), "") or platform.processor()
    simd = next((x.split(":", 1)[1].split() for x in flags if x.startswith("flags")), [])
    return {
        "cpu": cpu,
        "simd": sorted(f for f in simd if f.startswith(("avx", "amx"))),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
    }


def machine_name() -> str:
    """The machine a measurement belongs to, in one line: its CPU model, its GPU where it has one, its torch threads."""
    m = machine_info()
    return f"{m['cpu']}, {m['gpu'] or 'no GPU'}, {m['torch_threads']} threads"


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so a host clock reads the work's end (a no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def dispatched(model: torch.nn.Module) -> bool:
    """Whether accelerate placed `model` by a device map with hooks (layers over several devices, or offloaded to
    the CPU or disk): its modules' own calls then move tensors and load weights, so nothing may bypass them."""
    return any(hasattr(mod, "_hf_hook") for mod in model.modules())


def execution_device(model: torch.nn.Module) -> torch.device:
    """Where `model`'s inputs go: its parameters' device, or for a dispatched model the first device its map runs on
    (offloaded weights, "cpu" or "disk" in the map, run on it too)."""
    placed = getattr(model, "hf_device_map", None)
    if not placed or not dispatched(model):
        return next(model.parameters()).device
    gpus = [v for v in placed.values() if v not in ("cpu", "disk")]
    if not gpus:
        return torch.device("cpu")
    first = gpus[0]
    return torch.device(f"cuda:{first}" if isinstance(first, int) else first)


def weight_of(mod: torch.nn.Module) -> torch.Tensor:
    """`mod.weight`, or where a device map offloaded it (a meta tensor between calls) the copy its hook loads from."""
    w = mod.weight
    hook = getattr(mod, "_hf_hook", None)
    if w.is_meta and getattr(hook, "weights_map", None) is not None:
        return hook.weights_map["weight"]
    return w


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device` without waiting for the device's queued work: on CUDA it is copied from pinned
    memory, asynchronously (a copy from pageable memory waits for the stream); elsewhere it is `t` itself."""
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


class PhaseClock:
    """The boundaries of a round's phases, read once the round is over: `mark()` at each boundary, `spans_ms()`
    for the time between consecutive marks. On a CPU a mark is the host clock. On CUDA it is an event recorded in
    the stream, so marking waits for nothing: the spans are the GPU's timeline between the marks, read after
    the round's own sync (its verdict reaching the host), and the host's timing adds no sync of its own."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def spans_ms(self) -> list[float]:
        """Milliseconds between consecutive marks; clears them."""
        marks, self.marks = self.marks, []
        if self.cuda:
            marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]


def median_ms(
    fn: Callable[[], object],
    repeats: int,
    device: torch.device | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median milliseconds of `fn()` over `repeats` calls, each closed by a device sync."""
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        if device is not None:
            sync(device)
        times.append((clock() - t0) * 1e3)
    return statistics.median(times)
