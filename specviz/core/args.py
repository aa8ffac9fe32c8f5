"""Argument types for the command lines: every count is checked where it is parsed, before a model loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from specviz.core.config import KV_CACHES, ModelConfig
from specviz.core.output import check_output


def positive(kind: type, zero: bool = False):
    """An argparse type: a number of `kind` that is at least 1 (a zero is refused, never taken for the default);
    with `zero`, 0 is allowed too (a count where 0 turns something off)."""

    def parse(text: str):
        try:
            x = kind(text)
        except ValueError:
            noun = "whole number" if kind is int else "number"
            raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None
        if not (x >= 0 if zero else x > 0):
            raise argparse.ArgumentTypeError(f"must be {'0 or more' if zero else 'positive'}, got {text}")
        return x

    parse.__name__ = f"{'non-negative' if zero else 'positive'} {kind.__name__}"
    return parse


def output_file(text: str) -> Path:
    """An argparse type: a result file that can be written (`core.output.check_output`), checked before any work."""
    try:
        return check_output(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_holding_flags(p: argparse.ArgumentParser) -> None:
    """How the models are held: --kv-cache, --cuda-graphs, --device-map and --max-memory (ModelConfig's fields of
    those names; `holding_options` reads them back)."""
    p.add_argument(
        "--kv-cache",
        choices=KV_CACHES,
        default=ModelConfig.kv_cache,
        help="growing: appends into spare room (the fastest on a CPU); fixed: a static cache read whole, every "
        "forward's shapes independent of the context (default: %(default)s)",
    )
    p.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="forwards of up to 64 tokens at power-of-two widths, replayed from CUDA graphs on a GPU (needs "
        "--kv-cache fixed; on a CPU the padded forwards run eagerly)",
    )
    p.add_argument(
        "--device-map",
        default=None,
        help="place the target with accelerate: auto, balanced, sequential or a JSON file of module -> device (a GPU "
        'index, "cpu" or "disk"); for targets larger than one device (docs/deploy.md)',
    )
    p.add_argument(
        "--max-memory",
        default=None,
        help="with --device-map: the most each device may hold, e.g. 0=20GiB,1=20GiB,cpu=64GiB (the rest offloads)",
    )


def holding_options(a: argparse.Namespace) -> dict:
    """The ModelConfig fields `add_holding_flags` set."""
    return {
        "kv_cache": a.kv_cache,
        "cuda_graphs": a.cuda_graphs,
        "device_map": a.device_map,
        "max_memory": a.max_memory,
    }
