"""The Prompt set tab's views: one method over up to 20 prompts, or a traces file, seen as a set.

The numbers are `analysis.promptset`'s, the figures and the disagreement table `viz.promptset`'s, the same as
`specviz report` writes; this module only turns a RunSet into what the tab's components take.
"""

from __future__ import annotations

import html

from specviz.analysis.promptset import RunSet, pooled, prompt_rows, read_runset
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
from specviz.viz.style import placeholder

COLUMNS = ["prompt", "category", "τ", "tokens/s", "accepted", "text"]
EMPTY_NOTE = "Load a traces file, or run the method picked on the left over a few prompts."


def load(path: str) -> RunSet:
    """A traces file the page was given (JSON-lines from `specviz generate --prompts`, or one setting of a bench
    kept with --traces as `bench.json#LABEL`), with its errors as sentences."""
    try:
        return read_runset(str(path), label="the uploaded file")
    except (ValueError, OSError) as e:
        raise ValueError(f"could not read that traces file: {e}") from None


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
