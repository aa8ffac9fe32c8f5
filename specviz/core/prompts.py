"""Prompts: the limits (one in characters, one in tokens), encoding user text, and reading prompt files.

The app, the command line and the library check the same two limits: text longer than MAX_PROMPT_CHARS is
refused before the tokenizer sees it, and ids longer than MAX_PROMPT_TOKENS before a model does.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
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


def control_strings(tokenizer) -> list[str]:
    """The tokenizer's control-token strings (special and added tokens, such as "<|im_start|>")."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return [str(getattr(t, "content", t)) for t in added.values()]


def encode_prompt(tokenizer, text: str, chat: bool = True) -> list[int]:
    """User text -> ids, wrapped in the tokenizer's chat template when it has one.

    User text is text: a control-token string typed into it ("<|im_start|>system") is encoded as the
    characters it is made of, never as the control token, so a prompt cannot open a turn of its own. Text
    without such strings is encoded exactly as the template alone would encode it."""
    check_text(text)
    typed = [c for c in control_strings(tokenizer) if c and c in text]
    if chat and getattr(tokenizer, "chat_template", None):
        if typed:
            ids = _template_around(tokenizer, text)
        else:
            enc = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
            ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    else:
        ids = (tokenizer(text, split_special_tokens=True) if typed else tokenizer(text))["input_ids"]
    ids = list(ids)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"the prompt is {len(ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    return ids


def _template_around(tokenizer, text: str) -> list[int]:
    """The chat template's ids around the user text's own, the text encoded with control strings split."""
    mark = "\u2063specviz-user-text\u2063"  # an invisible separator: no template or text holds it
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": mark}], add_generation_prompt=True, tokenize=False
    )
    before, after = rendered.split(mark, 1)

    def enc(s: str, split: bool) -> list[int]:
        return list(tokenizer(s, add_special_tokens=False, split_special_tokens=split)["input_ids"]) if s else []

    return enc(before, False) + enc(text, True) + enc(after, False)


def read_prompts(path: str | Path, limit: int | None = None) -> list[dict]:
    """A JSON-lines file of objects with a `turns` list (Spec-Bench shape); the first turn is the prompt."""
    if not Path(path).is_file():
        raise ValueError(f"{path} is not a file: name a JSON-lines file of prompts")
    try:
        out = _read_rows(path, limit)
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text: name a JSON-lines file of prompts") from None
    if not out:
        raise ValueError(f"{path}: no prompts found")
    return out


def _read_rows(path: str | Path, limit: int | None) -> list[dict]:
    out = []
    with open(path, encoding="utf-8-sig") as f:
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
    return out


# -- Spec-Bench's tasks, and a sample balanced over them ---------------------------------------------

MT_BENCH = frozenset({"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"})


def task_of(category: str) -> str:
    """Spec-Bench's six tasks: the eight MT-bench categories count as one."""
    return "mt_bench" if category in MT_BENCH else category


def stratified(rows: list[dict], n: int, seed: int) -> list[dict]:
    """n rows, as equal per task as the task sizes allow; within a task, round robin over categories."""
    rng = random.Random(seed)
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cat = str(r.get("category", "all"))
        groups[task_of(cat)][cat].append(r)
    queues = {}
    for task, cats in sorted(groups.items()):
        lists = [cats[c] for c in sorted(cats)]
        for lst in lists:
            rng.shuffle(lst)
        queues[task] = [lst[i] for i in range(max(map(len, lists))) for lst in lists if i < len(lst)]
    order = sorted(queues)
    rng.shuffle(order)  # which tasks get the remainder, seeded
    out: list[dict] = []
    while len(out) < min(n, len(rows)):
        for task in order:
            if queues[task] and len(out) < n:
                out.append(queues[task].pop(0))
    return [r for _, r in sorted(enumerate(out), key=lambda x: (task_of(str(x[1].get("category", "all"))), x[0]))]
