"""Chat prompts for draft distillation, composed from templates and word lists (never from Spec-Bench).

The categories mirror the kinds of requests a chat model meets (writing, role play, reasoning, math,
coding, extraction, science, humanities, translation, summarization, short questions, word
problems, reading comprehension). Long-context kinds (summarize / answer from a passage / extract)
need documents: `with_documents` builds them from texts the target wrote itself in a first wave
(the first wave's prompts of category 'doc' ask for texts that make good documents). `broad_prompts.py` draws
prompts from real text instead (`corpus.py`): the templated ones alone let a drafter memorise the target's answers
to them (measured on the EAGLE drafter: models/smollm2-eagle/README.md).
All randomness comes from one `random.Random(seed)`.
"""

from __future__ import annotations

import random

from specviz.train.wordlists import (
    CONCEPTS,
    COUNTRIES,
    DE_OBJ,
    DE_SUBJ,
    DE_TAIL,
    DE_VERB,
    ITEMS,
    LANGS,
    NAMES,
    PEOPLE,
    PERSONAS,
    QUESTIONS,
    TASKS,
    TOPICS,
)

# first-wave prompts whose answers are used as documents in the second wave
DOC_TEMPLATES = [
    "Write a news article about {t}.",
    "Write an encyclopedia entry about {t}.",
    "Write a detailed report on recent developments in {t}.",
    "Write a magazine feature about {t}.",
]


def _num(r: random.Random, lo: int, hi: int) -> int:
    return r.randint(lo, hi)


def _writing(r):
    t, p = r.choice(TOPICS), r.choice(PEOPLE)
    return r.choice(
        [
            f"Write a blog post about {t}.",
            f"Compose a short poem about {t}.",
            f"Write a short story about {p}.",
            f"Write a professional email to your manager about {t}.",
            f"Write a persuasive essay on {t}.",
            f"Draft a short speech about {t} for a school event.",
            f"Write a product description for a new gadget related to {t}.",
            f"Compose an engaging travel blog post about a trip to {r.choice(COUNTRIES)}.",
            f"Write a letter to a friend describing {t}.",
            f"Write a short story about {p} who discovers {t}.",
            f"Write a haiku about {t}.",
            f"Write a motivational message for someone learning about {t}.",
            f"Write a cover letter for a job as {p.split(' ', 1)[1]}.",
            f"Write a dialogue between {p} and {r.choice(PEOPLE)}.",
        ]
    )


def _roleplay(r):
    return r.choice(
        [
            f"Pretend you are {r.choice(PERSONAS)}. {r.choice(QUESTIONS)}",
            f"Act as {r.choice(PERSONAS)} and answer: {r.choice(QUESTIONS)}",
            f"Imagine you are {r.choice(PERSONAS)}. Explain {r.choice(TOPICS)} in your own style.",
            f"You are {r.choice(PERSONAS)}. Give me advice about {r.choice(TOPICS)}.",
        ]
    )


def _reasoning(r):
    a, b, c = r.sample(NAMES, 3)
    return r.choice(
        [
            f"{a} is taller than {b}, and {b} is taller than {c}. Who is the shortest? Explain your reasoning.",
            f"If {a} is older than {b} and {c} is younger than {b}, who is the oldest?",
            f"There are {_num(r, 3, 9)} birds on a tree. A hunter shoots one. How many are left on the tree? Think step by step.",
            f"{a} has {_num(r, 2, 6)} sisters. Each sister has one brother. How many brothers does {a} have?",
            f"In a race, you overtake the person in position {_num(r, 2, 9)}. What position are you in now?",
            f"Which is heavier, a kilogram of {r.choice(['feathers', 'iron', 'cotton', 'sand'])} or a kilogram of "
            f"{r.choice(['bricks', 'water', 'gold', 'paper'])}? Explain.",
            f"If all {r.choice(['cats', 'birds', 'cars'])} are {r.choice(['blue', 'fast', 'small'])} and {a} owns one, "
            "what can we conclude? Explain the logic.",
        ]
    )


def _math(r):
    x, y, z = _num(r, 2, 99), _num(r, 2, 99), _num(r, 2, 20)
    return r.choice(
        [
            f"What is {x} times {y}?",
            f"Solve for x: {z}x + {x} = {x + z * y}.",
            f"What is {x}% of {y * 10}?",
            f"The vertices of a triangle are at (0, 0), ({z}, 0) and (0, {y % 15 + 2}). What is its area?",
            f"Find the derivative of f(x) = {z}x^2 + {x}x - {y}.",
            f"What is the sum of the integers from 1 to {x}?",
            f"A rectangle has a length of {x} cm and a width of {z} cm. What are its area and perimeter?",
            f"Simplify the fraction {x * z}/{y * z}.",
            f"What is the square root of {z * z}? Explain.",
            f"If a car travels at {x} km per hour, how far does it go in {z} hours?",
        ]
    )


def _coding(r):
    lang, task = r.choice(LANGS), r.choice(TASKS)
    return r.choice(
        [
            f"Write a {lang} function that {task}.",
            f"Develop a {lang} program that {task}.",
            f"How do I write code in {lang} that {task}? Include an example.",
            f"Explain how a function that {task} works, with code in {lang}.",
            f"Write a {lang} script that {task}, and add comments.",
        ]
    )


def _explain(r):
    c, t = r.choice(CONCEPTS), r.choice(TOPICS)
    return r.choice(
        [
            f"Explain {c} in simple terms.",
            f"What is {c}, and why does it matter?",
            f"How does {c} relate to {r.choice(CONCEPTS)}?",
            f"Describe the history of {t}.",
            f"What are the pros and cons of {t}?",
            f"Give me five interesting facts about {t}.",
            f"How does {t} affect everyday life?",
            f"What are the main causes and effects of {t}?",
            f"Compare {t} and {r.choice(TOPICS)}.",
            f"Provide insights into {c} and give an example.",
            f"What can students learn from studying {t}?",
            f"Give me some tips for {r.choice(TOPICS)}.",
        ]
    )


def _translation(r):
    s = f"{r.choice(DE_SUBJ)} {r.choice(DE_VERB)} , {r.choice(DE_OBJ)}{r.choice(DE_TAIL)} ."
    return "Translate German to English: " + s


def _qa(r):
    t, k = r.choice(TOPICS), r.choice(COUNTRIES)
    return r.choice(
        [
            f"What is the capital of {k}?",
            f"Who invented {r.choice(['the telephone', 'the light bulb', 'the printing press', 'the airplane', 'the computer'])}?",
            f"When did {r.choice(['World War II', 'the French Revolution', 'the Cold War', 'the Moon landing'])} happen?",
            f"Where is {r.choice(['Mount Everest', 'the Amazon river', 'the Sahara', 'Lake Victoria', 'the Great Barrier Reef'])} located?",
            f"What language is spoken in {k}?",
            f"Why is {t} important?",
            f"Who is famous for {t}?",
            f"What is the population of {k}?",
            f"How many {r.choice(['planets', 'continents', 'oceans', 'bones in the human body'])} are there?",
            f"What is {t}?",
        ]
    )


def _word_problem(r):
    a, b = r.sample(NAMES, 2)
    item, lo, hi = r.choice(ITEMS)
    n, m, price = _num(r, 3, 40), _num(r, 2, 12), round(r.uniform(lo, hi), 2)
    return r.choice(
        [
            f"{a} buys {n} {item} for ${price} each and pays with a ${int(n * price) + _num(r, 1, 50)} bill. How much change does {a} get?",
            f"{a} has {n} {item}. {b} has {m} times as many. How many {item} do they have together?",
            f"{a} works {m} hours a day for {_num(r, 3, 6)} days a week and earns ${_num(r, 8, 40)} per hour. How much does {a} earn in a week?",
            f"A store sells {item} at ${price} each. {a} buys {n} and gets a {r.choice([10, 20, 25, 50])}% discount. What does {a} pay?",
            f"{a} read {n} pages on Monday and {m} more pages on Tuesday than on Monday. How many pages did {a} read in total?",
            f"{a} had {n * m} {item} and shared them equally among {m} friends. How many did each friend get?",
        ]
    )


MAKERS = {
    "writing": _writing,
    "roleplay": _roleplay,
    "reasoning": _reasoning,
    "math": _math,
    "coding": _coding,
    "explain": _explain,
    "translation": _translation,
    "qa": _qa,
    "math_reasoning": _word_problem,
}
WEIGHTS = {
    "writing": 3,
    "roleplay": 1,
    "reasoning": 1,
    "math": 1,
    "coding": 2,
    "explain": 3,
    "translation": 2,
    "qa": 2,
    "math_reasoning": 2,
}


def compose(n: int, seed: int) -> list[tuple[str, str]]:
    """n distinct (category, prompt) pairs; a share of them are document-writing prompts (category 'doc')."""
    r = random.Random(seed)
    cats = list(WEIGHTS)
    out, seen = [], set()
    while len(out) < n:
        if r.random() < 0.12:
            cat, text = "doc", r.choice(DOC_TEMPLATES).format(t=r.choice(TOPICS))
        else:
            cat = r.choices(cats, weights=[WEIGHTS[c] for c in cats])[0]
            text = MAKERS[cat](r)
        if text not in seen:
            seen.add(text)
            out.append((cat, text))
    return out


def with_documents(docs: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """n long-context prompts over documents the target wrote: summarize, answer from a passage, extract."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        doc = "\n".join(r.sample(docs, min(len(docs), r.randint(1, 3))))
        kind = r.choice(["summarize", "summarize", "rag", "rag", "extract"])
        if kind == "summarize":
            text = "Summarize: " + doc.replace("\n", " ")
        elif kind == "rag":
            q = r.choice(
                [
                    f"What does the text say about {r.choice(TOPICS)}?",
                    "What is the main idea of this passage?",
                    "Who or what is described in the text?",
                    "Why is this topic important according to the text?",
                    "Describe the main points mentioned above?",
                    "When did the described events happen?",
                ]
            )
            text = doc + "\n" + q
        else:
            text = (
                r.choice(
                    [
                        "Extract the key facts from the following text as a bulleted list:\n",
                        "List all the names, places and numbers mentioned in the following text:\n",
                        "Read the text below and write three questions it answers, with their answers:\n",
                        "Classify the tone of the following text and explain why:\n",
                    ]
                )
                + doc
            )
        out.append(("doc_" + kind, text))
    return out
