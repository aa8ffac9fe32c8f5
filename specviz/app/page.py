"""The dashboard's components as data: `layout()` lays the page out and returns a frozen `Page`; the controls are
named after the parameters of the handlers they feed (`app.handlers`), so `Page.inputs(fn)` wires a handler by its
own signature and no list fixes an order of settings. Every default comes from the config dataclasses."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import gradio as gr

from specviz.app import engine, files, knobs, pairwork, policy, promptset
from specviz.app.theme import HEADER
from specviz.core.config import DRAFTERS, DTYPES, ModelConfig, RunConfig
from specviz.core.curves import load_curves
from specviz.core.device import resolve_device, resolve_dtype
from specviz.core.pairs import DEFAULT_PAIR
from specviz.methods.catalog import METHODS, label
from specviz.viz.budget import budget_figure, budget_note
from specviz.viz.inspect import HINT
from specviz.viz.run import race_figure
from specviz.viz.style import SPAN_COLORS

RUN, MODEL = RunConfig(), ModelConfig()
STATE_TTL_S = 3600
# the run views' names, in the order the /run and /import_trace endpoints return them
VIEWS = (
    "st_trace", "st_base", "status", "cards", "spans", "round_slider", "tree_plot", "stop_plot", "speed_plot",
    "pos_plot", "hist_plot", "calib_plot", "growth", "replay_btn", "inspect", "st_open", "vr_step", "vr_text",
    "vr_bars", "download", "trace_json",
)  # fmt: skip
ROUND_VIEWS = (  # inspector.open_round
    "tree_plot", "stop_plot", "growth", "replay_btn", "inspect", "st_open", "vr_step", "vr_text", "vr_bars",
)  # fmt: skip


@dataclass(frozen=True)
class Page:
    """controls: name -> input component (a handler parameter of that name reads it); views: name -> output;
    buttons: name -> button; set_tab: the Prompt set tab (`app.promptset.Tab`); engine_tab: its Engine view
    (`app.engine.Tab`)."""

    demo: gr.Blocks
    controls: dict
    views: dict
    buttons: dict
    set_tab: promptset.Tab
    engine_tab: engine.Tab

    def inputs(self, fn) -> list:
        """The components feeding `fn`, by the names of its parameters (the page's own state among them)."""
        names = [n for n, p in inspect.signature(fn).parameters.items() if p.default is inspect.Parameter.empty]
        return [self.controls[n] if n in self.controls else self.views[n] for n in names]

    def outputs(self, names=VIEWS) -> list:
        return [self.views[n] for n in names]


def layout(demo: gr.Blocks) -> Page:
    """Lay the page out inside `demo` (a gr.Blocks context)."""
    c, v, b = {}, {}, {}
    examples = files.example_prompts()
    for name, init in (("st_trace", None), ("st_base", None), ("st_open", []), ("st_set", None), ("st_engine", None)):
        v[name] = gr.State(init, time_to_live=STATE_TTL_S)  # per visitor; freed an hour after its last use
    gr.HTML(HEADER)
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=330):
            _controls(c, b, v, examples)
        with gr.Column(scale=3):
            set_tab, engine_tab = _views(c, b, v)
    return Page(demo, c, v, b, set_tab, engine_tab)


def _controls(c: dict, b: dict, v: dict, examples: list[str]) -> None:
    c["prompt"] = gr.Textbox(label="Prompt", value=examples[0] if examples else "", lines=3, max_lines=8)
    with gr.Row():
        b["run"] = gr.Button("Run", variant="primary", scale=2)
        b["stop"] = gr.Button("Stop", variant="stop", scale=1)
    c["method"] = gr.Dropdown([(label(m), m) for m in METHODS], value=RUN.method, label="Method")
    c.update(knobs.widgets(RUN))
    c["compare"] = gr.Checkbox(value=True, label="also time autoregressive decoding (for the speedup)")
    with gr.Accordion("Sampling and length", open=False):
        s = RUN.sampling
        c["temperature"] = gr.Slider(0, 2, value=s.temperature, step=0.05, label="temperature (0 = greedy)")
        c["top_p"] = gr.Slider(0.05, 1, value=s.top_p, step=0.05, label="top-p")
        c["max_new_tokens"] = gr.Slider(1, 512, value=RUN.max_new_tokens, step=1, label="max new tokens")
        c["seed"] = gr.Number(value=s.seed, precision=0, label="seed", minimum=0)
    with gr.Accordion("Model pair", open=False):
        c["pair"] = gr.Dropdown(
            policy.offered_pairs(),
            value=DEFAULT_PAIR,
            label="pair (those that can load here; each says what it needs)",
        )
        c["dtype"] = gr.Radio(list(DTYPES), value=MODEL.dtype, label="dtype")
        local = not policy.public()
        c["target"] = gr.Textbox(value="", label="target (local folder or hub id; overrides the pair)", visible=local)
        c["draft"] = gr.Textbox(value="", label="draft (local folder or hub id)", visible=local)
        with gr.Row(visible=local):
            c["device_map"] = gr.Textbox(
                value="", label="target's device map (accelerate: auto, balanced or a JSON file; empty: one device)"
            )
            c["max_memory"] = gr.Textbox(value="", label="max memory per device (e.g. 0=20GiB,1=20GiB,cpu=64GiB)")
        v["head_note"] = gr.Markdown(pairwork.head_note(None), elem_id="sv-head-note")
        with gr.Row(visible=local):
            b["train_head"] = gr.Button("Train a head for this pair", size="sm", elem_id="sv-train-head")
            b["stop_train"] = gr.Button("Stop training", size="sm", variant="stop", elem_id="sv-stop-train")
        c["drafter"] = gr.Radio(
            list(DRAFTERS),
            value=RUN.drafter,
            label="drafter: EAGLE (reads the target's features), the standalone draft "
            "model, or auto (EAGLE where the pair has one)",
        )
    taught = files.lessons()
    with gr.Accordion("Lessons (no model needed)", open=policy.public(), visible=bool(taught)):
        c["lesson"] = gr.Radio(
            [e["title"] for e in taught], value=None, label="a recorded round to teach from", elem_id="sv-lessons"
        )
    with gr.Accordion("Trace files", open=False):
        recorded = files.recorded()
        c["recorded"] = gr.Dropdown(
            list(recorded), value=next(iter(recorded), None), label="recorded traces (no model needed)"
        )
        with gr.Row():
            v["download"] = gr.DownloadButton("Export trace (JSON)", value=None, size="sm")
            v["trace_json"] = gr.JSON(label="trace", visible=False)  # the API's copy of the trace file
            c["file"] = gr.UploadButton("Import trace", file_types=[".json"], size="sm")
    if examples:
        gr.Examples(examples=[[e] for e in examples], inputs=c["prompt"], label="Example prompts (Spec-Bench)")


def _views(c: dict, b: dict, v: dict) -> tuple[promptset.Tab, engine.Tab]:
    v["status"] = gr.Markdown(label="status", elem_id="sv-status")
    v["cards"] = gr.HTML(label="summary")
    with gr.Row(equal_height=True):
        v["tree_plot"] = gr.Plot(label="tree", show_label=False, elem_id="sv-tree", scale=3)
        v["stop_plot"] = gr.Plot(label="stop probabilities", show_label=False, elem_id="sv-stop", scale=2)
    with gr.Row(equal_height=False, elem_id="sv-stepper"):
        b["prev"] = gr.Button("◀ previous", size="sm", scale=0, min_width=110)
        v["round_slider"] = gr.Slider(0, 1, value=0, step=1, label="Round", scale=8)
        b["next"] = gr.Button("next ▶", size="sm", scale=0, min_width=110)
    with gr.Row(equal_height=True):
        v["growth"] = gr.Slider(
            0, 1, value=0, step=1, label="Growth replay: step (0 = the verdicts)", visible=False, scale=4
        )
        v["replay_btn"] = gr.Button("▶ replay how the tree grew", size="sm", visible=False, scale=1)
    with gr.Accordion("Verification, step by step", open=False, elem_id="sv-verify") as v["vr_acc"]:
        with gr.Row(equal_height=False):
            b["vr_prev"] = gr.Button("◀ step", size="sm", scale=0, min_width=90, elem_id="sv-vr-prev")
            v["vr_step"] = gr.Slider(0, 1, value=0, step=1, label="Verification step (0 = the verdicts)", scale=8)
            b["vr_next"] = gr.Button("next step ▶", size="sm", scale=0, min_width=110, elem_id="sv-vr-next")
        with gr.Row(equal_height=True):
            v["vr_text"] = gr.Markdown(label="verification step", elem_id="sv-vr-text")
            v["vr_bars"] = gr.Plot(label="the distribution the step reads", show_label=False, elem_id="sv-vr-bars")
    v["inspect"] = gr.HTML(f'<div class="sv-inspect">{HINT}</div>', label="node inspector", elem_id="sv-inspect")
    c["pick"] = gr.Textbox(elem_id="sv-pick", show_label=False, container=False, elem_classes=["sv-hidden"])
    v["spans"] = gr.HighlightedText(
        label="Output: each token coloured by how it was produced (click one to see its round)",
        color_map=SPAN_COLORS,
        show_legend=True,
        combine_adjacent=False,
        show_inline_category=False,
        elem_id="sv-output",
    )
    with gr.Tabs():
        with gr.Tab("Speedup"):
            v["speed_plot"] = gr.Plot(label="speedup", show_label=False, elem_id="sv-speed")
        with gr.Tab("Over the run"):
            with gr.Row():
                v["pos_plot"] = gr.Plot(label="acceptance per position", show_label=False, elem_id="sv-pos")
                v["hist_plot"] = gr.Plot(label="accepted lengths", show_label=False, elem_id="sv-hist")
        with gr.Tab("Stop head"):
            v["calib_plot"] = gr.Plot(label="stop head calibration", show_label=False, elem_id="sv-calib")
        with gr.Tab("Race"):
            with gr.Row():
                c["methods"] = gr.CheckboxGroup(
                    [(label(m), m) for m in METHODS], label="methods (2–4)", scale=4, value=["ar", "chain", "heuristic"]
                )
                b["race"] = gr.Button("Race", variant="primary", scale=1)
            v["race_plot"] = gr.Plot(race_figure([]), label="race", show_label=False, elem_id="sv-race")
        with gr.Tab("Prompt set", elem_id="sv-set-tab"):
            set_tab = promptset.tab()
            with gr.Accordion("Engine: a served vLLM beside specviz", open=False, visible=not policy.public()):
                engine_tab = engine.tab()
        with gr.Tab("Hardware"):
            here = resolve_dtype(MODEL.dtype, resolve_device(MODEL.device))
            shipped = load_curves()
            v["hw_note"] = gr.Markdown(budget_note(shipped.get(here), here=False), elem_id="sv-hw-note")
            b["hw_measure"] = gr.Button(
                "Measure the loaded pair on this machine", size="sm", visible=not policy.public(), elem_id="sv-measure"
            )
            v["hw_plot"] = gr.Plot(budget_figure(shipped, here), show_label=False, elem_id="sv-budget")
    c["n"], c["prompts_file"] = set_tab.n, set_tab.prompts
    e = engine_tab
    c["engine_url"], c["engine_n"], c["engine_prompts"], c["engine_reference"] = e.url, e.n, e.prompts, e.reference
    return set_tab, engine_tab
