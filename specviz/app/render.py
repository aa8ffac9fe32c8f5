"""What the page draws of a trace, and when: every run view of a finished trace (`render`), what a round of a live
run changes (`render_live`), and the pace of a live run's updates (`Pacer`). Returns updates keyed by component."""

from __future__ import annotations

import time

import gradio as gr

from specviz.analysis.metrics import speedup, summarize
from specviz.app import files, inspector
from specviz.app.page import ROUND_VIEWS
from specviz.methods.catalog import label
from specviz.viz.run import RUN_HEIGHT, calibration_figure, histogram_figure, position_figure, speedup_figure
from specviz.viz.stop import STOP_HEIGHT
from specviz.viz.style import counted, placeholder, summary_cards, token_spans
from specviz.viz.tree import showcase_round

STREAM_EVERY_S = 1.0  # a live run's updates at most this often
PAGE_SHARE = 0.1  # ... and the page's own work (drawing, Gradio sending it) at most this share of the time
RUN_VIEWS = ("speed_plot", "pos_plot", "hist_plot", "calib_plot")  # the figures over a whole run
ENDINGS = {"length": "reached max new tokens", "eos": "the model ended its answer"}


def done_note(trace) -> str:
    """The status line of a finished run: its tokens, rounds, why it ended and, where the trace says, its drafter."""
    kind = (trace.models or {}).get("drafter")
    by = {"eagle": ", drafted by the EAGLE drafter", "model": ", drafted by the standalone draft"}.get(kind, "")
    ending = ENDINGS.get(trace.stop, trace.stop)
    return f"Done: {counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')} ({ending}){by}."


def _named(page, values: dict) -> dict:
    return {page.views[k]: v for k, v in values.items()}


def render(page, trace, base, note, file, data: dict | None = None, shown: int | None = None) -> dict:
    """Every run view of a finished trace (opened on round `shown`, else an instructive one); `file` is its trace file
    (for the export button) and `data` its content, where the caller has it."""
    if trace is None:
        empty = placeholder("No trace: press Run or load a recorded trace.")
        figures = dict.fromkeys(("tree_plot", "stop_plot", *RUN_VIEWS), empty)
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
                **dict(zip(("vr_step", "vr_text", "vr_bars"), inspector.verification_views(None, 0))),
            },
        )
    shown = showcase_round(trace.rounds) if shown is None else max(0, min(int(shown), len(trace.rounds) - 1))
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
        "trace_json": data if data is not None else files.as_dict(trace, base),
    }
    return _named(page, views)


def render_start(page, note) -> dict:
    """A live run's first update: its status, and the views it draws only when it ends in words, so that none shows
    the run opened before (a lesson's round beside the new run's tree)."""
    later = "Drawn when the run ends: then pick any round."
    views = {
        "status": note,
        "stop_plot": placeholder(later, STOP_HEIGHT, "Beside the tree"),
        "inspect": inspector.panel(None, 0),
        "growth": gr.Slider(visible=False),
        "replay_btn": gr.Button(visible=False),
        **{k: placeholder("Drawn when the run ends.", RUN_HEIGHT) for k in RUN_VIEWS},
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
