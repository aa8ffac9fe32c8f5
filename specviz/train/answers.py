"""The target's answers kept compactly: token ids only, so a fresh machine rebuilds a shard by prefill, not generation.

Generating the target's answers is the slow part of the training data (about 1.3 s a prompt on a 2-core CPU); a
shard's soft labels (the top-k of p at every response position) and the EAGLE features are then one teacher-forced
pass over the same tokens. An answers file holds one shard's responses as uint16 ids (the default vocabulary has
49,152 tokens), their lengths, whether each was greedy, and a digest of the prompts they answer, compressed with
numpy's zip (about 1 byte a token): the whole stage-8 mix is a few MB, small enough to commit beside a drafter.

`train.data.build_shards` reads an answers file where one matches its prompts (by default in ANSWERS, in the
repository) and writes one for every shard it generates; `train.data.soft_labels` rebuilds the shard from it. The
rebuilt top-k comes from a full forward over each sequence rather than the step-by-step decode that wrote it: the
same distributions up to rounding, so near ties can swap places (tested on tiny models: the top-1 of every greedy
position is the answer's token).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from specviz.core.assets import TRAIN_ANSWERS
from specviz.core.output import replacing

ANSWERS = TRAIN_ANSWERS
FORMAT = "specviz-answers/1"
ANSWERS_HELP = (
    "where the target's answers are kept as token ids (default: assets/train-answers in the repository): a shard "
    "whose answers are there is rebuilt by prefill instead of generation; 'none': keep none"
)


def prompts_digest(prompts: list[str]) -> str:
    return hashlib.sha256(json.dumps(prompts, ensure_ascii=False).encode()).hexdigest()[:16]


def save(path: Path, prompts: list[str], responses: list[list[int]], greedy: list[bool]) -> Path:
    """One shard's answers to `prompts` (in order), written beside `path` and moved onto it."""
    flat = np.fromiter((t for r in responses for t in r), dtype=np.int64, count=sum(map(len, responses)))
    if flat.size and (flat.min() < 0 or flat.max() > np.iinfo(np.uint16).max):
        raise ValueError("answers files hold token ids below 65,536")
    meta = {"format": FORMAT, "prompts": prompts_digest(prompts), "n": len(prompts)}
    with replacing(path, "wb") as f:
        np.savez_compressed(
            f,
            tokens=flat.astype(np.uint16),
            lengths=np.array([len(r) for r in responses], dtype=np.int32),
            greedy=np.array(greedy, dtype=bool),
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        )
    return path


def load(path: Path, prompts: list[str]) -> tuple[list[list[int]], list[bool]] | None:
    """(responses, greedy flags) stored at `path` for exactly these prompts, or None (no file, other prompts, or a
    file that is not an answers file)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("format") != FORMAT or meta.get("prompts") != prompts_digest(prompts):
                return None
            lengths, flat, greedy = z["lengths"].tolist(), z["tokens"].astype(np.int64), z["greedy"].tolist()
    except (OSError, ValueError, KeyError):
        return None
    ends = np.cumsum([0, *lengths])
    return [flat[a:b].tolist() for a, b in zip(ends, ends[1:])], greedy
