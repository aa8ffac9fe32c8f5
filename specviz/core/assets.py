"""Where every shipped file lives: the repository's assets/ and models/, and the user cache.

specviz runs from its repository (an editable install, or a Space's checkout), so the shipped files
sit beside the package.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "assets"
SPEC_BENCH = ASSETS / "spec_bench_questions.jsonl"  # Spec-Bench's 480 questions (spec_bench_LICENSE.md)
VERIFY_CURVES = ASSETS / "verify_curve.json"  # `specviz budget`: verify cost by tree size, per dtype
ACCEPTANCE = ASSETS / "acceptance.json"  # `specviz acceptance`: Sequoia's P[k] per pair
TRACES = ASSETS / "traces"  # recorded traces for the no-model mode
LESSONS = ASSETS / "lessons"  # curated rounds of recorded traces (index.json; `specviz lessons` records them)
TRAIN_ANSWERS = ASSETS / "train-answers"  # the target's answers as token ids, read by `specviz.train`
SCREENSHOT = ASSETS / "screenshot.png"
TREE_SHOTS = ASSETS / "screenshots"  # the tree view: a budget-32 tree, the inspector at a rejection, its growth
REPORT_SHOT = TREE_SHOTS / "report.png"  # the top of `specviz report` over 24 Spec-Bench prompts
DEFAULT_DRAFT = str(REPO / "models" / "smollm2-draft")
DEFAULT_EAGLE = str(REPO / "models" / "smollm2-eagle")
SHIPPED_NAMES = {
    "specviz default draft": DEFAULT_DRAFT,
    "specviz default EAGLE drafter": DEFAULT_EAGLE,
}  # info name -> folder


def head_cache(draft: str) -> Path:
    """Where the SpecDec++ head for a hub draft (a hub id, not a folder) is kept: the user cache, one folder a draft
    (`python -m specviz.train head --draft HUB_ID` writes it there; copy it in to use a head trained elsewhere)."""
    return cache_dir() / "heads" / draft.replace("/", "--")


def cache_dir() -> Path:
    """The user cache: the dequantized default target and training data (SPECVIZ_CACHE overrides it)."""
    root = os.environ.get("SPECVIZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "specviz"
    )
    return Path(root)
