"""`specviz lookup-priors`: measure prompt lookup's prior acceptance (core.priors) on the target's own continuations."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence

from specviz.core.args import positive
from specviz.core.assets import cache_dir
from specviz.core.config import LookupConfig
from specviz.core.ngram import NgramIndex
from specviz.core.priors import LOOKUP_ACCEPTANCE
from specviz.methods.lookup.plan import accepted_prefix
from specviz.train.data import load


def measure(sequences: Iterable[tuple[Sequence[int], Sequence[int]]], max_ngram: int, depth: int) -> dict:
    """Prior acceptance of copied tokens along the target's continuations, at every position.

    sequences: (prompt ids, the target's continuation: greedy, or sampled for the sampled table).
    Returns {"offered": {n: count},
    "alpha": {n: [P(first j copied tokens all match the continuation), j = 1..depth]}}.
    """
    offered: dict[int, list[int]] = defaultdict(lambda: [0] * depth)
    hits: dict[int, list[int]] = defaultdict(lambda: [0] * depth)
    for prompt, cont in sequences:
        idx = NgramIndex(max_ngram)
        idx.extend(prompt)
        for t in range(len(cont)):
            n, prop = idx.propose(min(depth, len(cont) - t))
            if n:
                a = accepted_prefix(prop, cont[t:])
                for j in range(len(prop)):
                    offered[n][j] += 1
                    hits[n][j] += a > j
            idx.extend(cont[t : t + 1])
    return {
        "offered": {n: offered[n][0] for n in sorted(offered)},
        "alpha": {n: [round(h / o, 3) if o else 0.0 for h, o in zip(hits[n], offered[n])] for n in sorted(offered)},
    }


def _training_sequences(limit: int, kind: str = "greedy"):
    """Greedy (or sampled) continuations of the training prompts (cached by `python -m specviz.train draft`)."""
    folder = cache_dir() / "train" / "draft-data"
    shards = sorted(folder.glob(f"{kind}-*.safetensors"))
    if not shards:
        raise SystemExit(f"no {kind} distillation shards under {folder}: run `python -m specviz.train draft` first")
    got = 0
    for path in shards:
        d = load(path)
        for s in range(len(d)):
            ids, plen, _ = d.sequence(s)
            ids = ids.tolist()
            yield ids[:plen], ids[plen:]
            got += 1
            if got >= limit:
                return


def main(argv=None) -> None:
    d = LookupConfig()
    p = argparse.ArgumentParser(
        prog="specviz lookup-priors",
        description="Measure prompt lookup's prior acceptance on the target's greedy "
        "continuations of the training prompts (never the Spec-Bench ones).",
    )
    p.add_argument("--max-ngram", type=positive(int), default=d.max_ngram)
    p.add_argument("--depth", type=positive(int), default=len(LOOKUP_ACCEPTANCE[0]))
    p.add_argument("--limit", type=positive(int), default=100_000, help="at most this many sequences")
    p.add_argument("--sampled", action="store_true", help="continuations sampled at T = 0.7 instead of greedy ones")
    a = p.parse_args(argv)
    out = measure(_training_sequences(a.limit, "sampled-t0.7" if a.sampled else "greedy"), a.max_ngram, a.depth)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
