"""`specviz lessons`: record the page's lessons from real runs of the shipped pair (run it again when the drafter
changes). Each lesson is a method and its settings; its prompts are tried in turn until a round shows the lesson
(`analysis.lessons`), and that run is kept as a trace file in assets/lessons/ with an index the page reads."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from specviz.analysis.lessons import KINDS, find
from specviz.app.files import dump
from specviz.app.policy import model_config
from specviz.app.runs import run_to_end
from specviz.core.assets import LESSONS as LESSON_DIR
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import ModelConfig, RunConfig, SamplingConfig
from specviz.core.output import replacing
from specviz.core.pairs import DEFAULT_PAIR
from specviz.core.prompts import read_prompts
from specviz.methods.catalog import with_knobs
from specviz.viz.verification import BARS

TRIES = 12  # prompts a lesson tries before it is reported missing
# prompts that quote their own context: a copy from the context happens early
QUOTING = (
    "Repeat this list exactly, then sort it: apples, pears, plums, cherries, apricots, figs, dates.",
    "Correct the spelling in this sentence and write it out again: The quick brwn fox jumpd over the lazzy dog.",
)


@dataclass(frozen=True)
class Lesson:
    id: str
    kind: str  # analysis.lessons.KINDS
    title: str
    text: str  # two or three sentences; {round} is filled in
    method: str
    temperature: float = 0.0
    knobs: dict = field(default_factory=dict)
    copy: bool = False
    quoting: bool = False  # try the QUOTING prompts first


LESSONS = (
    Lesson(
        "full-accept", "full-accept", "A greedy chain, fully accepted, plus a free token",
        "In round {round} the draft proposed a chain and the target agreed with every token: each drafted token "
        "equals the target's own greedy choice at its position. The same target forward also gives the token after "
        "the chain, so the round emits one more token than was drafted.",
        "chain", 0.0, {"k": 4},
    ),
    Lesson(
        "resampled", "resampled", "A sampled rejection, resampled from the residual",
        "In round {round} (T = 1) a drafted token's draw u was above min(1, p/q): rejected. The token emitted in its "
        "place is drawn from the residual norm(max(0, p − q)), the probability the draft under-proposed; that "
        "correction is why the output follows the target's distribution exactly.",
        "chain", 1.0, {"k": 4},
    ),
    Lesson(
        "second-sibling", "second-sibling", "A tree: the second sibling accepted after the first is rejected",
        "In round {round} the first child of a node was rejected, and its sibling was then judged against the "
        "residual the rejection left, not against p, and accepted. Multi-branch verification gives a tree several "
        "chances at each node while keeping the target's distribution.",
        "dyspec", 1.0, {"budget": 16},
    ),
    Lesson(
        "threshold-stop", "threshold-stop", "SpecDec++ stops when P(a rejection) crosses h",
        "In round {round} the acceptance head's predicted probability that at least one drafted token will be "
        "rejected rose past the threshold h, so drafting stopped there instead of at a fixed K. The panel beside "
        "the tree shows the head's estimate after each step against h.",
        "specdecpp", 0.0,
    ),
    Lesson(
        "grew-toward", "grew-toward", "DySpec grows its tree toward the branch the target takes",
        "In round {round} DySpec added nodes one at a time, each time the one with the highest draft probability "
        "along its path, and the target's accepted path ran down a branch other than the draft's first guess. "
        "Replay the growth to watch the budget go where the probability was.",
        "dyspec", 0.0, {"budget": 16},
    ),
    Lesson(
        "copied", "copied", "A token copied from the context",
        "In round {round} a token was proposed by copying what followed the same words earlier in the context "
        "(prompt lookup), with no draft forward, and the target accepted it. Copies are verified like drafted "
        "tokens, so they cost nothing in exactness.",
        "chain", 0.0, {"k": 4}, copy=True, quoting=True,
    ),
)  # fmt: skip
assert {x.kind for x in LESSONS} <= set(KINDS)


def prompts_for(lesson: Lesson) -> list[str]:
    spec = [r["turns"][0] for r in read_prompts(SPEC_BENCH)[::37]]
    return [*(QUOTING if lesson.quoting else ()), *spec][:TRIES]


def record(lesson: Lesson, model: ModelConfig, tokens: int, out: Path) -> dict | None:
    """The lesson's first run with a round that shows it, written to `out`/ID.json; its index entry, or None."""
    run = RunConfig(
        method=lesson.method,
        max_new_tokens=tokens,
        sampling=SamplingConfig(temperature=lesson.temperature, seed=0),
        copy=lesson.copy,
        record_top=BARS,  # the replay draws this many bars of each distribution
    )
    run = with_knobs(run, lesson.method, lesson.knobs)
    for prompt in prompts_for(lesson):
        trace = run_to_end(prompt, run, model)
        i = find(trace, lesson.kind)
        if i is None:
            continue
        (out / f"{lesson.id}.json").write_text(dump(trace, None), encoding="utf-8")
        return {
            "id": lesson.id,
            "title": lesson.title,
            "text": lesson.text.format(round=trace.rounds[i].index),
            "file": f"{lesson.id}.json",
            "round": i,
            "view": KINDS[lesson.kind][1],
        }
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz lessons", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default=ModelConfig().dtype)
    ap.add_argument("--tokens", type=int, default=48, help="new tokens a lesson's run decodes")
    ap.add_argument("--out", type=Path, default=LESSON_DIR)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    model = model_config(DEFAULT_PAIR, a.dtype)
    index = []
    for lesson in LESSONS:
        entry = record(lesson, model, a.tokens, a.out)
        print(f"{lesson.id}: " + (f"round {entry['round']}" if entry else f"no round in {TRIES} prompts"), flush=True)
        if entry:
            index.append(entry)
    with replacing(a.out / "index.json") as f:
        f.write(json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return 0 if len(index) == len(LESSONS) else 1
