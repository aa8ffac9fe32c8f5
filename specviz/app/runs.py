"""What the page decodes: one method round by round, the cached autoregressive baseline of the same prompt, a race
of methods and a prompt set, each yielding after every round so a caller can stop between any two. A decode yields
its `TraceBuilder`: a caller builds a trace (`.trace()`) only when it draws one. Runs are timed inside the decode
loop only, so tokens/s excludes the time a caller spends drawing between rounds."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from specviz.analysis.runset import PromptRun
from specviz.app import held
from specviz.app.zerogpu import gpu, seconds_for
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import ModelConfig, RunConfig
from specviz.core.prompts import encode_prompt, read_prompts, stratified
from specviz.core.trace import GenerationTrace
from specviz.engine.loop import iter_rounds, prepare
from specviz.engine.record import TraceBuilder

BASELINE_CACHE = 32

MAX_SET = 20  # prompts one Prompt set run may decode (a public page shares one CPU)

_baselines: OrderedDict[tuple, GenerationTrace] = OrderedDict()


@gpu(duration=lambda prompt, run, model: seconds_for(run))
def stream(prompt: str, run: RunConfig, model: ModelConfig) -> Iterator[TraceBuilder]:
    """Decode `prompt` with `run.method`, yielding the run's builder after every verified round (its `trace()` is
    the rounds so far, timed by the decode alone)."""
    pair = held.loaded(model)
    with held.hold():
        ids = encode_prompt(pair.tokenizer, prompt)
        t0 = time.perf_counter()
        drafter, rng = prepare(pair, run)
        build = TraceBuilder(pair, drafter, ids, run, prompt)
        build.ms = (time.perf_counter() - t0) * 1e3
        it = iter_rounds(pair, ids, run, drafter, rng)
        while True:
            t0 = time.perf_counter()
            with held.no_collector():
                rnd = next(it, None)
            build.ms += (time.perf_counter() - t0) * 1e3
            if rnd is None:
                return
            build.add(rnd)
            yield build


def last(items: Iterable):
    """The last item of `items` (None when empty): a stream's last builder holds the whole run."""
    out = None
    for item in items:
        out = item
    return out


def run_to_end(prompt: str, run: RunConfig, model: ModelConfig) -> GenerationTrace:
    return last(stream(prompt, run, model)).trace()


def baseline_stream(prompt: str, run: RunConfig, model: ModelConfig) -> Iterator[GenerationTrace | None]:
    """Autoregressive decoding of the same prompt with the same sampling and length: None after every round (so a
    caller can stop it between any two), then the whole run's trace, which is cached."""
    key = (model, prompt, run.sampling, run.max_new_tokens)
    if key not in _baselines:
        build = yield from _pacing(stream(prompt, replace(run, method="ar"), model), None)
        _baselines[key] = build.trace()
        while len(_baselines) > BASELINE_CACHE:
            _baselines.popitem(last=False)
    _baselines.move_to_end(key)
    yield _baselines[key]


def baseline(prompt: str, run: RunConfig, model: ModelConfig) -> GenerationTrace:
    """The autoregressive run of the same prompt (`baseline_stream`'s last trace)."""
    return last(baseline_stream(prompt, run, model))


def race(prompt: str, runs: Sequence[RunConfig], model: ModelConfig) -> Iterator[tuple[list[GenerationTrace], bool]]:
    """Each method in turn on the same prompt (timed alone). Yields (the finished traces so far, whether one just
    finished) after every round, so a caller can stop the race between any two rounds."""
    done = []
    for run in runs:
        build = yield from _pacing(stream(prompt, run, model), (done, False))
        done.append(build.trace())
        yield list(done), True


def _pacing(items: Iterator, step):
    """Yield `step` after every item of a stream (a caller can stop between any two rounds); return the last."""
    out = None
    for item in items:
        out = item
        yield step
    return out


def set_prompts(n: int, path: str | None = None) -> list[dict]:
    """The prompts of a set run: the first n of an uploaded JSON-lines file, or n of the shipped Spec-Bench sample
    balanced over its tasks (seed 0, as the bench draws them)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SET:
        raise ValueError(f"a prompt set holds 1 to {MAX_SET} prompts here, got {n!r}")
    if path:
        return read_prompts(path, n)
    if not SPEC_BENCH.exists():
        raise ValueError("the Spec-Bench sample does not ship with this copy: upload a JSON-lines file of prompts")
    return stratified(read_prompts(SPEC_BENCH), n, 0)


def run_set(rows: Sequence[dict], run: RunConfig, model: ModelConfig) -> Iterator[tuple[list[PromptRun], int]]:
    """Each prompt in turn with one method. Yields (the finished runs, the prompt now decoding) after every round,
    so a caller can stop between any two rounds."""
    done: list[PromptRun] = []
    for i, row in enumerate(rows):
        build = yield from _pacing(stream(row["turns"][0], run, model), (done, i))
        qid, cat = row.get("question_id", i + 1), row.get("category", "all")
        done.append(PromptRun(str(qid)[:64], str(cat)[:64], build.trace()))
    yield done, len(rows)
