"""The Prompt set tab's Engine view (local pages only): record a served engine (vLLM) over a prompt set, or load a
recorded run (`specviz engine --out`), and see it beside specviz's reference or a second run.

The numbers are `analysis.served`'s, the figures `viz.served`'s; a table row opens that prompt's replay (specviz's
round at each of the engine's steps) in the round view above, on the first step where the two part
(`handlers.pick_engine_row`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from pathlib import Path

import gradio as gr

from specviz.analysis.engine_run import add_reference, record
from specviz.analysis.served import acceptance_length, pair_runs, pooled_steps, tokens_per_s
from specviz.app import held, policy, runs
from specviz.app.inputs import ERRORS
from specviz.core.served import EngineRun, read_run
from specviz.core.server import probe
from specviz.core.trace import GenerationTrace
from specviz.viz.served import (
    ab_figure,
    histogram_figure,
    lengths_figure,
    positions_figure,
    reasons_html,
)
from specviz.viz.style import placeholder

COLUMNS = ["prompt", "category", "engine", "specviz, same steps", "steps", "parts at step", "reason", "tokens/s"]
EMPTY = "Record a served engine (its address above), or load a run written by `specviz engine --out`."
REQUEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Tab:
    url: gr.Textbox
    n: gr.Slider
    prompts: gr.File
    reference: gr.Checkbox
    record: gr.Button
    file_a: gr.File
    file_b: gr.File
    views: tuple  # summary, table, lengths, positions, histogram, A/B


def tab() -> Tab:
    """Lay the view out (inside the Prompt set tab)."""
    gr.Markdown(
        "A served engine beside specviz: its acceptance per step as it reports it, and specviz's own round at each "
        "of its steps. Start vLLM with `--per-request-spec-decode-metrics detailed` (docs/engines.md); for the "
        "reference, give the target and draft folders it serves under *Model pair* on the left."
    )
    with gr.Row():
        with gr.Column(scale=2):
            url = gr.Textbox(label="server address", placeholder="http://127.0.0.1:8000", elem_id="sv-engine-url")
            with gr.Row():
                n = gr.Slider(1, runs.MAX_SET, value=4, step=1, label="prompts")
                reference = gr.Checkbox(value=True, label="replay its steps through specviz")
            prompts = gr.File(label="prompts (JSON lines; default: the Spec-Bench sample)", file_types=[".jsonl"])
            rec = gr.Button("Record the engine", variant="primary", elem_id="sv-engine-record")
        with gr.Column(scale=2):
            file_a = gr.File(
                label="or load a recorded run (specviz engine --out)", file_types=[".json"], elem_id="sv-engine-a"
            )
            file_b = gr.File(
                label="and a second run for an A/B (another version, another K)",
                file_types=[".json"],
                elem_id="sv-engine-b",
            )
    summary_ = gr.HTML(summary(None, None), elem_id="sv-engine-summary")
    table_ = gr.Dataframe(
        headers=COLUMNS, interactive=False, wrap=True, elem_id="sv-engine-table", label="prompts (click one)"
    )
    with gr.Row():
        lengths, positions = gr.Plot(show_label=False, elem_id="sv-engine-lengths"), gr.Plot(show_label=False)
    with gr.Row():
        hist, ab = gr.Plot(show_label=False), gr.Plot(show_label=False, elem_id="sv-engine-ab")
    return Tab(url, n, prompts, reference, rec, file_a, file_b, (summary_, table_, lengths, positions, hist, ab))


def summary(run: EngineRun | None, other: EngineRun | None) -> str:
    if run is None:
        return f"<p>{EMPTY}</p>"
    acc, _ = pooled_steps(run)
    parts = [
        f"<p><b>{html.escape(run.label)}</b> serving {html.escape(str(run.engine.get('model')))} over "
        f"{len(run.prompts)} prompts at T = {run.settings.get('temperature')}: acceptance length "
        f"<b>{acceptance_length(acc) or 0:.3f}</b> over {len(acc)} steps."
    ]
    if any(p.reference for p in run.prompts):
        ours, _ = pooled_steps(run, reference=True)
        parted = sum(p.reference.first_difference is not None for p in run.prompts if p.reference)
        parts.append(
            f" specviz at the same steps ({html.escape(str((run.reference_settings or {}).get('dtype')))}): "
            f"<b>{acceptance_length(ours) or 0:.3f}</b>; {parted} of {len(run.prompts)} prompts part somewhere. "
            "Click a prompt to open specviz's round at the engine's first differing step.</p>" + reasons_html(run)
        )
    if other is not None:
        b, _ = pooled_steps(other)
        parts.append(f"<p>B: <b>{html.escape(other.label)}</b>, acceptance length {acceptance_length(b) or 0:.3f}.</p>")
    return "".join(parts)


def table(run: EngineRun | None) -> list[list]:
    rows = []
    for i, p in enumerate(run.prompts if run else ()):
        ref, first = p.reference, p.reference.first_difference if p.reference else None
        rows.append(
            [
                str(p.question_id if p.question_id is not None else i),
                p.category or "",
                round(acceptance_length(p.per_step_accepted or []) or 0, 3),
                "" if ref is None else round(acceptance_length(ref.per_step_accepted) or 0, 3),
                len(p.per_step_accepted or []),
                "" if first is None else f"{first.step} (token {first.position})",
                "" if first is None else first.reason or "",
                round(tokens_per_s(p), 1),
            ]
        )
    return rows


def views(run: EngineRun | None, other: EngineRun | None = None) -> tuple:
    if run is None:
        empty = placeholder(EMPTY, 300)
        return summary(None, None), [], empty, empty, empty, empty
    ab = ab_figure(pair_runs(run, other)) if other is not None else placeholder("Load a second run for an A/B.", 300)
    return (
        summary(run, other),
        table(run),
        lengths_figure(run),
        positions_figure(run, other),
        histogram_figure(run, other),
        ab,
    )


def load(path: str | None) -> EngineRun | None:
    if not path:
        return None
    try:
        return read_run(Path(path).read_bytes())
    except (ValueError, OSError) as e:
        raise gr.Error(f"could not read that engine run: {e}") from None


def on_files(file_a: str | None, file_b: str | None) -> list:
    """The view's state and figures for the loaded run(s); a bad file is a sentence."""
    run, other = load(file_a), load(file_b)
    if run is None and other is not None:
        run, other = other, None
    try:
        return [run, *views(run, other)]
    except ValueError as e:
        raise gr.Error(str(e)) from None


def record_engine(
    engine_url: str,
    engine_n: int,
    engine_prompts: str | None,
    engine_reference: bool,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    pair: str,
    dtype: str,
    target: str,
    draft: str,
    progress=gr.Progress(),
) -> list:
    """Record the served engine at `engine_url` over n prompts (the Spec-Bench sample or an uploaded file) with the
    left's length, temperature and seed; with `engine_reference`, replay its steps through specviz with the target
    and draft folders named on the left (the ones the server loaded)."""
    try:
        n = int(engine_n)
        rows = runs.set_prompts(n, engine_prompts)
        server = probe(engine_url or "")
        tick = lambda done, total, what: progress((done, total), desc=f"{what}: prompt {done} of {total}")
        run = record(server, rows, int(max_new_tokens), float(temperature), int(seed), REQUEST_TIMEOUT_S, tick)
        if engine_reference:
            if not (target or "").strip() or not (draft or "").strip():
                raise ValueError("the reference needs the target and draft folders the server loaded (Model pair)")
            cfg = replace(policy.model_config(pair, dtype, target, draft), eagle="none")
            with held.holding(cfg) as loaded:
                run = add_reference(run, loaded, tick)
    except ERRORS as e:  # a ServerError is a RuntimeError
        raise gr.Error(str(e)) from None
    return [run, *views(run)]


def replay_of(run: EngineRun | None, row: int) -> tuple[GenerationTrace, int, str] | None:
    """The clicked prompt's replay trace, the round to open (its first differing step, else 0) and a note."""
    if run is None or not isinstance(row, int) or not 0 <= row < len(run.prompts):
        return None
    p = run.prompts[row]
    if p.reference is None or p.reference.replay is None:
        return None
    trace = GenerationTrace.from_dict(p.reference.replay)
    first = p.reference.first_difference
    note = (
        f"Prompt **{html.escape(str(p.question_id))}** replayed: round s is specviz's round at {html.escape(run.label)}"
        f"'s step s (the prompt plus the engine's prefill token first). "
        + (
            f"They part at step {first.step}: the engine accepted {first.engine}, specviz {first.specviz} "
            f"({first.reason or 'sampled'})."
            if first
            else "Every step agrees."
        )
    )
    return trace, (first.step if first else 0), note
