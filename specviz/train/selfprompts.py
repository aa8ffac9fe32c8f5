"""Prompts the target writes itself: an instruct model, given its chat template up to an open user turn, samples
a user message from the distribution it was tuned on (the idea of Magpie, Xu et al. 2024).

This is the offline stand-in for real chat logs. The composed templates (`prompts.py`) and the real text of
`corpus.py` are narrow; the target's own user turns cover what its tuning data covered (requests to plan, write,
code, explain, edit), which is what held-out chat benchmarks ask.

A sampled message is kept when the target closed the turn itself (it emitted end-of-turn within the token
limit), it has `MIN_WORDS` words or more, and it is not a repeat. Sampling uses the generator passed in, so a
seed gives the same prompts on the same machine.
"""

from __future__ import annotations

import torch

from specviz.train.data import continue_batch

MIN_WORDS = 4
MARK = "\x00specviz-user\x00"


def user_prefix(tokenizer) -> list[int]:
    """Ids of the chat template up to where a user's message starts (system turn included)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the target's tokenizer has no chat template: it cannot write user turns")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": MARK}], tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text[: text.index(MARK)], add_special_tokens=False)["input_ids"])


def keep(text: str, finished: bool) -> str | None:
    """The message to keep, stripped, or None."""
    text = text.strip()
    return text if finished and len(text.split()) >= MIN_WORDS else None


def write_prompts(
    model,
    tokenizer,
    n: int,
    rng: torch.Generator,
    *,
    max_new: int = 80,
    batch: int = 64,
    temperature: float = 1.0,
    max_tries: int = 8,
    progress=None,
) -> list[tuple[str, str]]:
    """n distinct ("self", message) pairs sampled from the target's user turn; fewer if `max_tries` x n
    samples do not yield n."""
    prefix = user_prefix(tokenizer)
    end = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end
    out, seen, tried = [], set(), 0
    while len(out) < n and tried < max_tries * n:
        got = continue_batch(model, [prefix] * batch, max_new, 1, {end}, pad, temperature, rng)
        tried += batch
        for g in got:
            ids = g["tokens"][g["prompt_len"] :].tolist()
            finished = bool(ids) and ids[-1] == end
            text = keep(tokenizer.decode(ids[:-1] if finished else ids, skip_special_tokens=True), finished)
            if text and text not in seen and len(out) < n:
                seen.add(text)
                out.append(("self", text))
        if progress:
            progress(len(out))
    return out
