"""Prompts: the limits (one in characters, one in tokens), encoding user text, and reading prompt files.

The app, the command line and the library check the same two limits: text longer than MAX_PROMPT_CHARS is
refused before the tokenizer sees it, and ids longer than MAX_PROMPT_TOKENS before a model does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

MAX_PROMPT_CHARS = 20_000
MAX_PROMPT_TOKENS = 4096


def check_prompt(prompt_ids: Sequence[int], vocab_size: int) -> None:
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty: type something for the model to continue")
    if len(prompt_ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"the prompt is {len(prompt_ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    if any(not (0 <= t < vocab_size) for t in prompt_ids):
        raise ValueError(f"prompt ids must lie in [0, {vocab_size})")


def check_text(text: str) -> str:
    """User text that the tokenizer can take: non-empty, within MAX_PROMPT_CHARS, valid Unicode."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the prompt is empty: type something for the model to continue")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"the prompt is {len(text):,} characters long; the limit is {MAX_PROMPT_CHARS:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"the prompt holds a character that is not valid Unicode text at position {e.start}; remove it"
        ) from None
    return text


def encode_prompt(tokenizer, text: str, chat: bool = True) -> list[int]:
    """User text -> ids, wrapped in the tokenizer's chat template when it has one."""
    check_text(text)
    if chat and getattr(tokenizer, "chat_template", None):
        enc = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    else:
        ids = tokenizer(text)["input_ids"]
    ids = list(ids)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"the prompt is {len(ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    return ids


def read_prompts(path: str | Path, limit: int | None = None) -> list[dict]:
    """A JSON-lines file of objects with a `turns` list (Spec-Bench shape); the first turn is the prompt."""
    if not Path(path).is_file():
        raise ValueError(f"{path} is not a file: name a JSON-lines file of prompts")
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                turns = obj["turns"]
                if not (isinstance(turns, list) and turns and isinstance(turns[0], str)):
                    raise KeyError("turns")
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(
                    f"{path}:{n}: expected a JSON object with a non-empty 'turns' list of strings"
                ) from None
            out.append(obj)
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no prompts found")
    return out
