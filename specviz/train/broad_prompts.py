"""Prompts over real text (`--broad-prompts`): templates around the words, German sentences and code that
`corpus.py` finds on the machine, so a drafter sees requests its templated prompts (`prompts.py`) never make.
All randomness comes from one `random.Random(seed)`.
"""

from __future__ import annotations

import random

from specviz.train.wordlists import COUNTRIES, LANGS, PEOPLE, PERSONAS

WORD_TEMPLATES = [
    "Tell me about {a}.",
    "What is {a}? Explain it to a beginner.",
    "Write a short story that uses the words {a}, {b} and {c}.",
    "Write a poem about {a}.",
    "Explain the difference between {a} and {b}.",
    "Give me five facts about {a}.",
    "Write a blog post about {a} and {b}.",
    "Why does {a} matter in everyday life?",
    "Describe {a} in three sentences.",
    "Write a dialogue between two friends arguing about {a}.",
    "How would you explain {a} to a child?",
    "List the pros and cons of {a}.",
    "Write a news report about {a} in {k}.",
    "What is the history of {a}?",
    "Give me practical advice about {a}.",
    "Write a product description that mentions {a} and {b}.",
    "Pretend you are {p}. Tell me what you think about {a}.",
    "Write an email to a colleague about {a}.",
    "Create a quiz with three questions about {a}.",
    "What are common misconceptions about {a}?",
    "Compare {a}, {b} and {c}.",
    "Write a paragraph describing a place full of {a}.",
    "What might happen if {a} disappeared from the world?",
    "Write a speech about {a} for a graduation ceremony.",
    "Summarize what people usually mean by {a}.",
    "Write a recipe inspired by {a}.",
    "Use the word {a} in five sentences.",
    "Write a diary entry of {p} who is thinking about {a}.",
    "What questions should I ask an expert on {a}?",
]
CODE_TEMPLATES = [
    "Explain what this Python function does:\n\n{src}",
    "Write unit tests for this function:\n\n{src}",
    "Rewrite this Python function in {lang}:\n\n{src}",
    "Add comments to this code:\n\n{src}",
    "Is there a bug in this function? Explain.\n\n{src}",
    "How could this function be made faster?\n\n{src}",
    "{src}\n\nWhat does this code return for a typical input? Walk through it.",
]
GERMAN_TEMPLATES = [
    "Translate German to English: {s}",
    "Translate the following sentence into English:\n{s}",
    "What does this German text mean in English? {s}",
    "Übersetze ins Englische: {s}",
]
BROAD_WEIGHTS = {"words": 6, "code": 2, "german": 2}


def broad(n: int, seed: int, words: list[str], german: list[str], code: list[str]) -> list[tuple[str, str]]:
    """n distinct prompts over real text (`corpus.py`): topics from vocabulary words, German sentences to
    translate, standard-library functions to explain; a source that is empty is skipped."""
    r = random.Random(seed)
    kinds = [k for k, pool in (("words", words), ("german", german), ("code", code)) if pool]
    out, seen = [], set()
    while kinds and len(out) < n:
        kind = r.choices(kinds, weights=[BROAD_WEIGHTS[k] for k in kinds])[0]
        if kind == "words":
            a, b, c = r.sample(words, 3)
            text = r.choice(WORD_TEMPLATES).format(a=a, b=b, c=c, k=r.choice(COUNTRIES), p=r.choice(PEOPLE + PERSONAS))
        elif kind == "german":
            text = r.choice(GERMAN_TEMPLATES).format(s=r.choice(german))
        else:
            text = r.choice(CODE_TEMPLATES).format(src=r.choice(code), lang=r.choice(LANGS))
        if text not in seen:
            seen.add(text)
            out.append(("broad_" + kind, text))
    return out
