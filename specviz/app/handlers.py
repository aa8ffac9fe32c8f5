"""The dashboard's event handlers, at module level: each takes the `Page` and the values of the controls its
parameters name (`Page.inputs` wires them by name), and returns updates keyed by component. The endpoints a client
or an assistant calls (/run, /race, /run_set, /import_trace, /measure) carry typed parameters and a docstring,
which Gradio shows in the API page and serves as MCP tools. What the page draws, and how often a live run redraws,
is `app.render`'s.
"""

from __future__ import annotations

import functools
import html
import inspect
import json
import time
from contextlib import closing
from dataclasses import replace

import gradio as gr

from specviz.analysis.metrics import acceptance_by_position, summarize, time_split
from specviz.app import engine, exports, files, knobs, promptset, runs
from specviz.app.inputs import ERRORS, make_configs, make_prompt
from specviz.app.render import STREAM_EVERY_S, Pacer, done_note, render, render_live, render_start
from specviz.app.settings import Settings, endpoint
from specviz.methods.catalog import label
from specviz.viz.run import race_figure
from specviz.viz.style import counted


def bind(fn, page):
    """`fn` with its first parameter (the page) bound, keeping its name, docstring and the rest of its signature
    (what Gradio's API page and MCP tools read)."""

    @functools.wraps(fn)
    def bound(*args, **kwargs):
        return fn(page, *args, **kwargs)

    sig = inspect.signature(fn)
    bound.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(*args, **kwargs):
            yield from fn(page, *args, **kwargs)

        gen.__signature__ = bound.__signature__
        return gen
    return bound


def _ticking(page, items):
    """Consume `items`, yielding a no-op update every STREAM_EVERY_S (where Stop can end the run); return the last."""
    shown, last = time.monotonic(), None
    for item in items:
        last = item
        if time.monotonic() - shown >= STREAM_EVERY_S:
            shown = time.monotonic()
            yield {page.views["status"]: gr.skip()}
    return last


@endpoint()
def run(page, prompt: str, settings: Settings, compare: bool):
    """Decode `prompt` with `method` on the loaded draft / target pair, round by round, and return every view of the
    run: the status, summary cards, the output coloured by how each token was produced, each round's draft tree
    and stop chart, the speedup over autoregressive decoding (with `compare`), acceptance per draft position, the
    accepted lengths, the stop head's calibration, the trace file and the trace itself (JSON).

    Args:
        prompt: one user message, wrapped in the target's chat template.
        compare: also time autoregressive decoding of the same prompt, for the speedup.
    """
    method = settings.method
    try:
        text = make_prompt(prompt)
        run_cfg, model = make_configs(settings)
        yield render_start(page, f"Running **{label(method)}** … (the first round includes the prompt's prefill)")
        build, pace, path = None, Pacer(), exports.path(method)
        with closing(runs.stream(text, run_cfg, model)) as builds:  # Stop closes it: frees the model
            for build in builds:
                if not pace.due():
                    continue
                pace.drawing()
                note = f"Running **{label(method)}**: round {len(build.rounds)}, {counted(build.output, 'token')}"
                yield render_live(page, build.trace(live=True), note)
                pace.drawn()
        trace = build.trace()
        base = None
        if compare:
            yield {
                page.views["status"]: f"Done: {counted(trace.output_ids, 'token')} in "
                f"{counted(trace.rounds, 'round')}. Timing autoregressive decoding of the same prompt for the speedup …"
            }
            base = trace if method == "ar" else (yield from _ticking(page, runs.baseline_stream(text, run_cfg, model)))
        data = files.as_dict(trace, base)
        path.write_text(files.dumps(data), encoding="utf-8")
        yield render(page, trace, base, done_note(trace), path, data)
    except ERRORS as e:
        raise gr.Error(str(e)) from None


@endpoint(omit=("method",))
def race(page, prompt: str, methods: list[str], settings: Settings):
    """Run 2 to 4 methods in turn on the same prompt and pair and return the race figure: each method's tokens
    over wall-clock time.

    Args:
        prompt: one user message, wrapped in the target's chat template.
        methods: the methods to race, 2 to 4.
    """
    try:
        text = make_prompt(prompt)
        if not isinstance(methods, list) or not 2 <= len(methods) <= 4:
            raise ValueError("pick 2 to 4 methods to race")
        configs = [make_configs(replace(settings, method=m)) for m in methods]
        with closing(
            runs.race(text, [r for r, _ in configs], configs[0][1])
        ) as steps:  # Stop ends it between any two rounds
            for finished, just in steps:
                yield race_figure(finished) if just else gr.skip()
    except ERRORS as e:
        raise gr.Error(str(e)) from None


@endpoint()
def run_set(page, n: int, prompts_file: str | None, settings: Settings, progress=gr.Progress()):
    """Run `method` over n prompts (an uploaded JSON-lines file's first n, or n of the Spec-Bench sample balanced
    over its tasks) and return the set's views: a summary, a table a prompt a row (τ, tokens/s, acceptance),
    acceptance per position, τ per prompt, whether q or the target's certainty predicts acceptance, and where the
    draft and the target part.

    Args:
        n: how many prompts.
        prompts_file: a JSON-lines file of prompts ({"turns": [text]} a line); empty: the Spec-Bench sample.
    """
    views = list(page.set_tab.views)
    try:
        run_cfg, model = make_configs(settings)
        for out in promptset.run(n, prompts_file, run_cfg, model, progress):  # Stop ends it between two rounds
            if isinstance(out, str):
                yield {views[0]: out}
            else:
                yield dict(zip([page.views["st_set"], *views], [out, *promptset.views(out)]))
    except ERRORS as e:
        raise gr.Error(str(e)) from None


def numbers(trace) -> dict:
    """A run's numbers as plain JSON: what an assistant reads back from /measure."""
    summary, split = summarize(trace), time_split(trace)
    return {
        "method": trace.method,
        "tokens": summary.tokens,
        "target_calls": summary.rounds,
        "tau": round(summary.tau, 3),
        "acceptance": None if summary.acceptance is None else round(summary.acceptance, 3),
        "acceptance_by_position": [
            {"position": d, "drafted": n, "accepted": a, "rate": round(a / n, 3) if n else None}
            for d, n, a in acceptance_by_position(trace.rounds)
        ],
        "tokens_per_s": round(summary.tokens_per_s, 2),
        "ms": {k: round(getattr(split, k), 1) for k in ("draft_ms", "verify_ms", "overhead_ms", "other_ms")},
        "stop": trace.stop,
        "text": trace.text,
    }


MEASURED = ("method", "max_new_tokens", "temperature", "k", "h", "budget", "copy", "seed")  # /measure's settings


@endpoint(only=MEASURED, defaults={"max_new_tokens": 64}, optional=True)
def measure(prompt: str, settings: Settings) -> str:
    """Decode `prompt` with `method` on the pair the page has loaded and return the run's numbers as a JSON text:
    tokens, target calls, τ (tokens per target call), the acceptance of drafted tokens overall and per draft position
    (drafted, accepted, rate), tokens/s, where the time went (draft, verify, overhead, other ms), why it stopped
    and the output text.

    Args:
        prompt: one user message, wrapped in the target's chat template.
    """
    try:
        run_cfg, model = make_configs(settings)
        return json.dumps(numbers(runs.run_to_end(make_prompt(prompt), run_cfg, model)), ensure_ascii=False)
    except ERRORS as e:
        raise gr.Error(str(e)) from None


def import_trace(page, file: str):
    """Replay a trace file (a specviz trace JSON, with or without its autoregressive baseline) with no model loaded:
    every view of /run."""
    try:
        trace, base = files.load_path(file)
    except (ValueError, OSError) as e:
        raise gr.Error(f"could not load that trace file: {e}") from None
    note = (
        f"Replaying an imported trace: {label(trace.method)}, "
        f"{counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')}. {knobs.SHOWN_NOTE}"
    )
    return render(page, trace, base, note, file)


def open_recorded(page, recorded: str | None):
    paths = files.recorded()
    if recorded not in paths:
        return render(page, None, None, "No recorded traces ship with this copy: press Run.", None)
    trace, base = files.load_path(paths[recorded])
    note = (
        f"Recorded trace **{recorded}**: prompt “{html.escape(trace.prompt_text[:80])}”. {knobs.SHOWN_NOTE} "
        "Press Run to decode it live."
    )
    return render(page, trace, base, note, paths[recorded])


LESSON_VIEW = {
    "verify": "Open *Verification, step by step* under the tree and press *next step* to walk through it.",
    "stop": "The panel beside the tree shows the head's estimate after each draft step against h.",
    "growth": "Press *▶ replay how the tree grew* to watch the tree grow node by node.",
}


def open_lesson(page, lesson: str | None):
    """A lesson: its recorded trace opened on its round, its words in the status line (no model needed)."""
    try:
        entry, trace, path = files.lesson(lesson or "")
    except ValueError as e:
        raise gr.Error(str(e)) from None
    note = f"**Lesson: {entry['title']}.** {entry['text']} {LESSON_VIEW.get(entry.get('view'), '')} {knobs.SHOWN_NOTE}"
    views = render(page, trace, None, note, path, shown=entry["round"])
    return views | {page.views["vr_acc"]: gr.Accordion(open=entry.get("view") == "verify")}


def pick_set_row(page, st_set, evt: gr.SelectData):
    picked = promptset.pick(st_set, evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index)
    if picked is None:
        return {page.views["status"]: gr.skip()}
    path = exports.path(picked.trace.method)
    path.write_text(files.dump(picked.trace), encoding="utf-8")
    return render(page, picked.trace, None, f"{promptset.picked_note(picked)} {knobs.SHOWN_NOTE}", path)


def pick_engine_row(page, st_engine, evt: gr.SelectData):
    """A prompt of an engine run: its replay in the round view, opened on the first step where the two part."""
    picked = engine.replay_of(st_engine, evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index)
    if picked is None:
        return {page.views["status"]: gr.skip()}
    trace, shown, note = picked
    path = exports.path("replay")
    path.write_text(files.dump(trace), encoding="utf-8")
    return render(page, trace, None, f"{note} {knobs.SHOWN_NOTE}", path, shown=shown)
