"""The method knobs' widgets: one per knob of any method, each shown while the chosen method has that knob
(`specviz.methods.catalog`). Built inside the dashboard's layout; their values go to `app.inputs.make_run`."""

from __future__ import annotations

import gradio as gr

from specviz.core.config import RunConfig
from specviz.methods.catalog import CATALOG


def widgets(run: RunConfig) -> dict[str, gr.components.Component]:
    """Knob name -> its widget, at `run`'s values, visible where `run.method` has the knob."""
    shown = CATALOG[run.method].knobs
    return {
        "k": gr.Slider(1, 16, value=run.chain.k, step=1, label="K: draft tokens per round", visible="k" in shown),
        "start_k": gr.Slider(
            1,
            run.heuristic.max_k,
            value=run.heuristic.start_k,
            step=1,
            label="start K (then +2 after a full accept, −1 otherwise)",
            visible="start_k" in shown,
        ),
        "h": gr.Slider(
            0.05,
            0.95,
            value=run.specdecpp.threshold,
            step=0.05,
            label="h: stop when P(at least one rejection) > h",
            visible="h" in shown,
        ),
        "budget": gr.Slider(
            1,
            64,
            value=run.dyspec.budget,
            step=1,
            label="tree budget (draft nodes)",
            visible="budget" in shown,
        ),
        "width": gr.Slider(
            1,
            8,
            value=run.tree.width,
            step=1,
            label="tree width (children per node)",
            visible="width" in shown,
        ),
        "depth": gr.Slider(1, 8, value=run.tree.depth, step=1, label="tree depth", visible="depth" in shown),
        "copy": gr.Checkbox(
            value=run.copy,
            visible="copy" in shown,
            label="also copy from the context (prompt lookup) where that beats the draft",
        ),
    }


def visibility(method: str, knob: dict) -> list:
    """gr.update per widget of `knob` (in its order): shown where `method` has that knob."""
    return [gr.update(visible=method in CATALOG and name in CATALOG[method].knobs) for name in knob]
