"""The method knobs' widgets: one per knob of any method, each shown while the chosen method has that knob
(`specviz.methods.catalog`). Built inside the dashboard's layout; their values go to `app.inputs.make_configs`."""

from __future__ import annotations

import gradio as gr

from specviz.core.config import RunConfig
from specviz.core.trace import GenerationTrace
from specviz.methods.catalog import CATALOG, knob_values

NAMES = ("k", "start_k", "h", "budget", "width", "depth", "copy")  # every method knob's widget, by knob name


def widgets(run: RunConfig) -> dict[str, gr.components.Component]:
    """Knob name -> its widget, at `run`'s values, visible where `run.method` has the knob."""
    shown = CATALOG[run.method].knobs
    sliders = {  # name: (lowest, highest, step, value, label)
        "k": (1, 16, 1, run.chain.k, "K: draft tokens per round"),
        "start_k": (
            1,
            run.heuristic.max_k,
            1,
            run.heuristic.start_k,
            "start K (then +2 after a full accept, −1 otherwise)",
        ),
        "h": (0.05, 0.95, 0.05, run.specdecpp.threshold, "h: stop when P(at least one rejection) > h"),
        "budget": (1, 64, 1, run.dyspec.budget, "tree budget (draft nodes)"),
        "width": (1, 8, 1, run.tree.width, "tree width (children per node)"),
        "depth": (1, 8, 1, run.tree.depth, "tree depth"),
    }
    out: dict[str, gr.components.Component] = {
        name: gr.Slider(lo, hi, value=value, step=step, label=text, visible=name in shown)
        for name, (lo, hi, step, value, text) in sliders.items()
    }
    out["copy"] = gr.Checkbox(
        value=run.copy,
        visible="copy" in shown,
        label="also copy from the context (prompt lookup) where that beats the draft",
    )
    return out


def visibility(method: str, knob: dict) -> list:
    """gr.update per widget of `knob` (in its order): shown where `method` has that knob."""
    return [gr.update(visible=method in CATALOG and name in CATALOG[method].knobs) for name in knob]


SHOWN = ("method", *NAMES, "temperature", "top_p", "max_new_tokens", "seed", "drafter")  # the controls `shown` sets
SHOWN_NOTE = "The method and settings on the left are now this run's."


def shown(trace: GenerationTrace | None) -> list:
    """gr.update per control of SHOWN: the settings of the run on screen (a lesson, a recorded or imported trace),
    so the controls never describe another run than the one shown; left as they are for a trace whose settings
    cannot be read (an older file)."""
    try:
        run = RunConfig.from_dict(trace.config)
    except (AttributeError, TypeError, ValueError):
        return [gr.skip() for _ in SHOWN]
    knobs = knob_values(run)
    s = run.sampling
    values = {"method": run.method, "temperature": s.temperature, "top_p": s.top_p, "seed": s.seed}
    values |= {"max_new_tokens": run.max_new_tokens, "drafter": run.drafter}
    out = []
    for name in SHOWN:
        if name in NAMES:
            out.append(gr.update(value=knobs[name], visible=True) if name in knobs else gr.update(visible=False))
        else:
            out.append(gr.update(value=values[name]))
    return out
