"""The dashboard's event handlers, at module level: each takes the `Page` and the values of the controls its
parameters name (`Page.inputs` wires them by name), and returns updates keyed by component. The endpoints a client
or an assistant calls (/run, /race, /run_set, /import_trace) carry typed parameters and a docstring, which Gradio
shows in the API page and serves as MCP tools.

Streaming: a live run redraws only what a round changes (the newest round's tree and stop chart, the cards, the
output, the status), at most every STREAM_EVERY_S; the figures over the whole run are drawn once, at the end.
"""

from __future__ import annotations

import functools
import html
import inspect
import time
from contextlib import closing

import gradio as gr

from specviz.analysis.metrics import speedup, summarize
from specviz.app import exports, inspector, promptset, session
from specviz.app.inputs import make_configs, make_prompt
from specviz.app.page import ROUND_VIEWS
from specviz.methods.catalog import label
from specviz.viz.run import calibration_figure, histogram_figure, position_figure, race_figure, speedup_figure
from specviz.viz.style import counted, placeholder, summary_cards, token_spans
from specviz.viz.tree import showcase_round

STREAM_EVERY_S = 1.0  # a live run's updates at most this often
PAGE_SHARE = 0.1  # ... and the page's own work (drawing, Gradio sending it) at most this share of the time
ENDINGS = {"length": "reached max new tokens", "eos": "the model ended its answer"}
ERRORS = (ValueError, RuntimeError, OSError)


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


def done_note(trace) -> str:
    """The status line of a finished run: its tokens, rounds, why it ended and, where the trace says, its drafter."""
    kind = (trace.models or {}).get("drafter")
    by = {"eagle": ", drafted by the EAGLE drafter", "model": ", drafted by the standalone draft"}.get(kind, "")
    ending = ENDINGS.get(trace.stop, trace.stop)
    return f"Done: {counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')} ({ending}){by}."


def _named(page, values: dict) -> dict:
    return {page.views[k]: v for k, v in values.items()}


def render(page, trace, base, note, file, data: dict | None = None) -> dict:
    """Every run view of a finished trace (opened on an instructive round); `file` is its trace file (for the export
    button) and `data` its content, where the caller has it."""
    if trace is None:
        empty = placeholder("No trace: press Run or load a recorded trace.")
        figures = dict.fromkeys(("tree_plot", "stop_plot", "speed_plot", "pos_plot", "hist_plot", "calib_plot"), empty)
        return _named(
            page,
            {
                **figures,
                "st_trace": None,
                "st_base": None,
                "status": note,
                "cards": "",
                "spans": [],
                "round_slider": gr.Slider(maximum=1, value=0),
                "download": gr.DownloadButton(value=None),
                "trace_json": None,
                "growth": gr.Slider(visible=False),
                "replay_btn": gr.Button(visible=False),
                "inspect": inspector.panel(None, 0),
                "st_open": [],
            },
        )
    shown = showcase_round(trace.rounds)
    views = dict(zip(ROUND_VIEWS, inspector.open_round(trace, shown)))
    sp = speedup(trace, base) if base is not None else None
    views |= {
        "st_trace": trace,
        "st_base": base,
        "status": note,
        "cards": summary_cards(summarize(trace), sp, label(trace.method)),
        "spans": token_spans(trace),
        "round_slider": gr.Slider(maximum=max(len(trace.rounds) - 1, 1), value=shown),
        "speed_plot": speedup_figure(trace, base),
        "pos_plot": position_figure(trace),
        "hist_plot": histogram_figure(trace),
        "calib_plot": calibration_figure(trace),
        "download": gr.DownloadButton(value=str(file)),
        "trace_json": data if data is not None else session.as_dict(trace, base),
    }
    return _named(page, views)


def render_live(page, trace, note) -> dict:
    """What a round of a live run changes: the newest round's tree, the cards, the output and the status."""
    last = len(trace.rounds) - 1
    tree, _ = inspector.round_views(trace, last, stop=False)
    views = {
        "status": note,
        "cards": summary_cards(summarize(trace), None, label(trace.method)),
        "spans": token_spans(trace),
        "round_slider": gr.Slider(maximum=max(last, 1), value=last),
        "tree_plot": tree,
    }
    return _named(page, views)


class Pacer:
    """When a live run may redraw: at most every STREAM_EVERY_S, and only while the page's own work (drawing, and
    Gradio sending it) stays under PAGE_SHARE of the time: after an update that cost c seconds, the next waits
    c (1 - PAGE_SHARE) / PAGE_SHARE more. The decode waits while the page draws, so this bounds what the page adds
    to it."""

    def __init__(self):
        self.next_at, self.started = 0.0, 0.0

    def due(self) -> bool:
        return time.monotonic() >= self.next_at

    def drawing(self) -> None:
        self.started = time.monotonic()

    def drawn(self) -> None:
        """The run resumed after an update."""
        now = time.monotonic()
        self.next_at = now + max(STREAM_EVERY_S, (now - self.started) * (1 - PAGE_SHARE) / PAGE_SHARE)


def _ticking(page, items):
    """Consume `items`, yielding a no-op update every STREAM_EVERY_S (where Stop can end the run); return the last."""
    shown, last = time.monotonic(), None
    for item in items:
        last = item
        if time.monotonic() - shown >= STREAM_EVERY_S:
            shown = time.monotonic()
            yield {page.views["status"]: gr.skip()}
    return last


def run(
    page,
    prompt: str,
    method: str,
    k: int,
    h: float,
    budget: int,
    width: int,
    depth: int,
    start_k: int,
    copy: bool,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    pair: str,
    dtype: str,
    target: str,
    draft: str,
    drafter: str,
    compare: bool,
):
    """Decode `prompt` with `method` on the loaded draft / target pair, round by round, and return every view of the
    run: the status, summary cards, the output coloured by how each token was produced, each round's draft tree
    and stop chart, the speedup over autoregressive decoding (with `compare`), acceptance per draft position, the
    accepted lengths, the stop head's calibration, the trace file and the trace itself (JSON).

    Args:
        prompt: one user message, wrapped in the target's chat template.
        method: ar, chain, heuristic, specdecpp, dyspec, kary, sequoia or lookup.
        k: draft tokens a round (chain; prompt lookup's copy length).
        h: SpecDec++'s stop threshold on P(at least one rejection).
        budget: draft tree nodes (dyspec, sequoia).
        width: children a node (kary).
        depth: tree depth (kary).
        start_k: the heuristic schedule's first K.
        copy: also copy tokens from the context (prompt lookup) where that beats the draft.
        temperature: 0 decodes greedily.
        top_p: nucleus sampling's mass.
        max_new_tokens: the most tokens to generate.
        seed: the sampling seed.
        pair: the model pair, by name.
        dtype: auto, fp32 or bf16.
        target: a target folder or hub id in place of the pair's (not on a public page).
        draft: a draft folder or hub id in place of the pair's (not on a public page).
        drafter: auto, eagle or model.
        compare: also time autoregressive decoding of the same prompt, for the speedup.
    """
    settings = {n: v for n, v in locals().items() if n not in ("page", "prompt", "compare")}
    try:
        text = make_prompt(prompt)
        run_cfg, model = make_configs(settings)
        yield {page.views["status"]: f"Running **{label(method)}** … (the first round includes the prompt's prefill)"}
        trace, pace, path = None, Pacer(), exports.path(method)
        with closing(session.stream(text, run_cfg, model)) as traces:  # Stop closes it: frees the model
            for trace in traces:
                if not pace.due():
                    continue
                pace.drawing()
                note = f"Running **{label(method)}**: round {len(trace.rounds)}, {counted(trace.output_ids, 'token')}"
                yield render_live(page, trace, note)
                pace.drawn()
        base = None
        if compare:
            yield {
                page.views["status"]: f"Done: {counted(trace.output_ids, 'token')} in "
                f"{counted(trace.rounds, 'round')}. Timing autoregressive decoding of the same prompt for the speedup …"
            }
            base = (
                trace if method == "ar" else (yield from _ticking(page, session.baseline_stream(text, run_cfg, model)))
            )
        data = session.as_dict(trace, base)
        path.write_text(session.dumps(data), encoding="utf-8")
        yield render(page, trace, base, done_note(trace), path, data)
    except ERRORS as e:
        raise gr.Error(str(e)) from None


def race(
    page,
    prompt: str,
    methods: list[str],
    k: int,
    h: float,
    budget: int,
    width: int,
    depth: int,
    start_k: int,
    copy: bool,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    pair: str,
    dtype: str,
    target: str,
    draft: str,
    drafter: str,
):
    """Run 2 to 4 methods in turn on the same prompt and pair and return the race figure: each method's tokens
    over wall-clock time. The other parameters are /run's."""
    settings = {n: v for n, v in locals().items() if n not in ("page", "prompt", "methods")}
    try:
        text = make_prompt(prompt)
        if not isinstance(methods, list) or not 2 <= len(methods) <= 4:
            raise ValueError("pick 2 to 4 methods to race")
        configs = [make_configs({**settings, "method": m}) for m in methods]
        runs, model = [r for r, _ in configs], configs[0][1]
        with closing(session.race(text, runs, model)) as steps:  # Stop ends it between any two rounds
            for finished, just in steps:
                yield race_figure(finished) if just else gr.skip()
    except ERRORS as e:
        raise gr.Error(str(e)) from None


def run_set(
    page,
    n: int,
    prompts_file: str | None,
    method: str,
    k: int,
    h: float,
    budget: int,
    width: int,
    depth: int,
    start_k: int,
    copy: bool,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    pair: str,
    dtype: str,
    target: str,
    draft: str,
    drafter: str,
    progress=gr.Progress(),
):
    """Run `method` over n prompts (an uploaded JSON-lines file's first n, or n of the Spec-Bench sample balanced
    over its tasks) and return the set's views: a summary, a table a prompt a row (τ, tokens/s, acceptance),
    acceptance per position, τ per prompt, whether q or the target's certainty predicts acceptance, and where the
    draft and the target part. The other parameters are /run's."""
    settings = {n_: v for n_, v in locals().items() if n_ not in ("page", "n", "prompts_file", "progress")}
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


def import_trace(page, file: str):
    """Replay a trace file (a specviz trace JSON, with or without its autoregressive baseline) with no model loaded:
    every view of /run."""
    try:
        trace, base = session.load_path(file)
    except (ValueError, OSError) as e:
        raise gr.Error(f"could not load that trace file: {e}") from None
    note = (
        f"Replaying an imported trace: {label(trace.method)}, "
        f"{counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')}."
    )
    return render(page, trace, base, note, file)


def open_recorded(page, recorded: str | None):
    paths = session.recorded()
    if recorded not in paths:
        return render(page, None, None, "No recorded traces ship with this copy: press Run.", None)
    trace, base = session.load_path(paths[recorded])
    note = (
        f"Recorded trace **{recorded}**: prompt “{html.escape(trace.prompt_text[:80])}”. Press Run to decode it live."
    )
    return render(page, trace, base, note, paths[recorded])


def pick_set_row(page, st_set, evt: gr.SelectData):
    picked = promptset.pick(st_set, evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index)
    if picked is None:
        return {page.views["status"]: gr.skip()}
    path = exports.path(picked.trace.method)
    path.write_text(session.dump(picked.trace), encoding="utf-8")
    return render(page, picked.trace, None, promptset.picked_note(picked), path)
