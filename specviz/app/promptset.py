"""The Prompt set tab: one method over up to 20 prompts, or a traces file, seen as a set.

The numbers are `analysis.promptset`'s, the figures and the disagreement table `viz.promptset`'s, the same as
`specviz report` writes; this module lays the tab out, runs a set through `app.runs`, and turns a RunSet into
what the tab's components take. `app.ui` wires it to the rest of the page.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

import gradio as gr

from specviz.analysis.promptset import pooled, prompt_rows
from specviz.analysis.runset import PromptRun, RunSet, read_runset
from specviz.app import runs
from specviz.core.config import ModelConfig, RunConfig
from specviz.methods.catalog import label
from specviz.viz.promptset import (
    disagreement_html,
    head_figure,
    position_figure,
    q_figure,
    rank_figure,
    target_figure,
    tau_figure,
)
from specviz.viz.style import counted, placeholder

COLUMNS = ["prompt", "category", "τ", "tokens/s", "accepted", "text"]
EMPTY_NOTE = "Load a traces file, or run the method picked on the left over a few prompts."
NOTE_EVERY_S = 1.0


@dataclass(frozen=True)
class Tab:
    """The tab's components: the inputs, and the outputs in `views`' order."""

    file: gr.File
    n: gr.Slider
    prompts: gr.File
    run: gr.Button
    views: tuple


def tab() -> Tab:
    """Lay the tab out (inside a gr.Tab)."""
    with gr.Row():
        file = gr.File(
            label="traces file (JSON lines from specviz generate --prompts)", file_types=[".jsonl", ".json"], scale=2
        )
        with gr.Column(scale=2):
            n = gr.Slider(1, runs.MAX_SET, value=6, step=1, label="or run the method on the left over N prompts")
            prompts = gr.File(
                label="prompts (JSON lines with 'turns'; default: the Spec-Bench sample)",
                file_types=[".jsonl"],
                height=90,
            )
            run = gr.Button("Run the set", variant="primary", elem_id="sv-set-run")
    summary_ = gr.HTML(summary(None), elem_id="sv-set-summary")
    table_ = gr.Dataframe(
        headers=COLUMNS,
        interactive=False,
        wrap=True,
        elem_id="sv-set-table",
        label="prompts (click one to open its rounds)",
    )
    with gr.Row():
        pos, tau = gr.Plot(show_label=False, elem_id="sv-set-pos"), gr.Plot(show_label=False, elem_id="sv-set-tau")
    with gr.Row():
        q, target = gr.Plot(show_label=False, elem_id="sv-set-q"), gr.Plot(show_label=False, elem_id="sv-set-target")
    third = gr.Plot(show_label=False, elem_id="sv-set-third")
    dis = gr.HTML(label="where the draft and the target part", elem_id="sv-set-dis")
    return Tab(file, n, prompts, run, (summary_, table_, pos, tau, q, target, third, dis))


def run(n, prompts_file, run: RunConfig, model: ModelConfig, progress) -> Iterator[str | RunSet]:
    """Run the set: a progress note now and then while it decodes (and `progress` moved after every round, where
    Stop can end it), then the RunSet."""
    n = int(n) if isinstance(n, float) and n.is_integer() else n  # a slider's 6.0
    rows = runs.set_prompts(n, prompts_file)
    done: list[PromptRun] = []
    shown = 0.0
    with closing(runs.run_set(rows, run, model)) as steps:
        for finished, i in steps:
            done, now = finished, min(i + 1, len(rows))
            progress((i, len(rows)), desc=f"{label(run.method)}: prompt {now} of {len(rows)}")
            if time.monotonic() - shown >= NOTE_EVERY_S:
                shown = time.monotonic()
                yield f"<p>Running {html.escape(label(run.method))}: prompt {now} of {len(rows)} …</p>"
    yield RunSet(f"{len(done)} prompts", tuple(done))


def load(path: str) -> RunSet:
    """A traces file the page was given (JSON-lines from `specviz generate --prompts`, or one setting of a bench
    kept with --traces as `bench.json#LABEL`), with its errors as sentences."""
    try:
        return read_runset(str(path), label="the uploaded file")
    except (ValueError, OSError) as e:
        raise ValueError(f"could not read that traces file: {e}") from None


def on_file(path: str | None) -> list:
    """The tab's state and views for a traces file dropped on it (None: emptied); a bad file is a gr.Error."""
    try:
        rs = load(path) if path else None
    except ValueError as e:
        raise gr.Error(str(e)) from None
    return [rs, *views(rs)]


def table(rs: RunSet | None) -> list[list]:
    if rs is None:
        return []
    return [
        [
            r.qid,
            r.category,
            round(r.tau, 2),
            round(r.tokens_per_s, 1),
            "" if r.acceptance is None else f"{r.acceptance:.0%}",
            r.prompt[:90],
        ]
        for r in prompt_rows(rs)
    ]


def summary(rs: RunSet | None) -> str:
    if rs is None:
        return f"<p>{EMPTY_NOTE}</p>"
    h = pooled(rs)
    return (
        f"<p><b>{html.escape(label(rs.method))}</b> over {h['prompts']} prompts: {h['tokens']} tokens in "
        f"{h['rounds']} target calls, τ {h['tau']:.2f}, {h['tokens_per_s']:.1f} tokens/s (prefill included). "
        "Click a prompt to open its rounds above.</p>"
    )


def views(rs: RunSet | None) -> tuple:
    """(summary, table, positions, τ, q, target, ranks or head, disagreements) for the tab."""
    if rs is None:
        empty = placeholder(EMPTY_NOTE, 300)
        return summary(None), [], empty, empty, empty, empty, empty, ""
    third = head_figure(rs) if rs.method == "specdecpp" else rank_figure(rs)
    return (
        summary(rs),
        table(rs),
        position_figure(rs),
        tau_figure(rs),
        q_figure(rs),
        target_figure(rs),
        third,
        disagreement_html(rs),
    )


def pick(rs: RunSet | None, row: int):
    """The trace of the clicked table row, or None."""
    if rs is None or not isinstance(row, int) or not 0 <= row < len(rs.runs):
        return None
    return rs.runs[row]


def picked_note(r: PromptRun) -> str:
    t = r.trace
    return (
        f"Prompt **{html.escape(r.qid)}** of the set ({html.escape(r.category)}): "
        f"{counted(t.output_ids, 'token')} in {counted(t.rounds, 'round')}."
    )
