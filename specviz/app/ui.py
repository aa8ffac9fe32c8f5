"""The specviz dashboard: layout and event wiring only.

Runs come from `specviz.app.session`, figures from `specviz.viz`; every default comes from the config
dataclasses, every method's label and knobs from `specviz.methods.catalog`. Per-visitor data (the trace on screen
and its autoregressive baseline) lives in gr.State; the model pair is shared and used by one run at a time.

    python app.py     # http://127.0.0.1:7860; GRADIO_SERVER_NAME / GRADIO_SERVER_PORT change it
"""

from __future__ import annotations

import html
import os
import threading
import time
from contextlib import closing

import gradio as gr

from specviz.analysis.metrics import speedup, summarize
from specviz.app import exports, inspector, knobs, promptset, session
from specviz.app.inputs import make_configs, make_prompt
from specviz.app.theme import CLICK_JS, CSS, HEADER
from specviz.core.assets import TRACES
from specviz.core.config import (
    DRAFTERS,
    DTYPES,
    ModelConfig,
    RunConfig,
)
from specviz.core.curves import load_curves
from specviz.core.device import resolve_device, resolve_dtype
from specviz.methods.catalog import METHODS, label
from specviz.viz.budget import budget_figure
from specviz.viz.inspect import HINT
from specviz.viz.run import (
    calibration_figure,
    histogram_figure,
    position_figure,
    race_figure,
    speedup_figure,
)
from specviz.viz.style import (
    SPAN_COLORS,
    counted,
    placeholder,
    summary_cards,
    token_spans,
)
from specviz.viz.tree import showcase_round

RUN, MODEL = RunConfig(), ModelConfig()
STREAM_EVERY_S = 0.3
STATE_TTL_S = 3600
ENDINGS = {"length": "reached max new tokens", "eos": "the model ended its answer"}


def _done(trace) -> str:
    """The status line of a finished run: its tokens, rounds, why it ended and, where the trace says, its drafter."""
    kind = (trace.models or {}).get("drafter")
    by = {"eagle": ", drafted by the EAGLE drafter", "model": ", drafted by the standalone draft"}.get(kind, "")
    ending = ENDINGS.get(trace.stop, trace.stop)
    return f"Done: {counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')} ({ending}){by}."


def build_ui() -> gr.Blocks:
    method_choices = [(label(m), m) for m in METHODS]
    examples = session.example_prompts()
    recorded = session.recorded()
    with gr.Blocks(title="specviz: speculative decoding, round by round", delete_cache=(3600, exports.TTL_S)) as demo:
        st_trace = gr.State(None, time_to_live=STATE_TTL_S)  # per visitor; freed an hour after its last use
        st_base = gr.State(None, time_to_live=STATE_TTL_S)
        st_open = gr.State([], time_to_live=STATE_TTL_S)  # the folded groups opened by a click
        st_set = gr.State(None, time_to_live=STATE_TTL_S)  # the Prompt set tab's RunSet
        gr.HTML(HEADER)
        with gr.Row(equal_height=False):
            # ---- controls
            with gr.Column(scale=1, min_width=330):
                prompt = gr.Textbox(label="Prompt", value=examples[0] if examples else "", lines=3, max_lines=8)
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary", scale=2)
                    stop_btn = gr.Button("Stop", variant="stop", scale=1)
                method = gr.Dropdown(method_choices, value=RUN.method, label="Method")
                knob = knobs.widgets(RUN)
                compare = gr.Checkbox(value=True, label="also time autoregressive decoding (for the speedup)")
                with gr.Accordion("Sampling and length", open=False):
                    temperature = gr.Slider(
                        0, 2, value=RUN.sampling.temperature, step=0.05, label="temperature (0 = greedy)"
                    )
                    top_p = gr.Slider(0.05, 1, value=RUN.sampling.top_p, step=0.05, label="top-p")
                    max_new = gr.Slider(1, 512, value=RUN.max_new_tokens, step=1, label="max new tokens")
                    seed = gr.Number(value=RUN.sampling.seed, precision=0, label="seed", minimum=0)
                with gr.Accordion("Model pair", open=False):
                    pair = gr.Dropdown(
                        session.offered_pairs(),
                        value=session.DEFAULT_PAIR,
                        label="pair (those that can load here; each says what it needs)",
                    )
                    dtype = gr.Radio(list(DTYPES), value=MODEL.dtype, label="dtype")
                    target = gr.Textbox(
                        value="",
                        label="target (local folder or hub id; overrides the pair)",
                        visible=not session.public(),
                    )
                    draft = gr.Textbox(value="", label="draft (local folder or hub id)", visible=not session.public())
                    drafter = gr.Radio(
                        list(DRAFTERS),
                        value=RUN.drafter,
                        label="drafter: EAGLE (reads the target's features), the standalone draft "
                        "model, or auto (EAGLE where the pair has one)",
                    )
                with gr.Accordion("Trace files", open=False):
                    recorded_dd = gr.Dropdown(
                        list(recorded), value=next(iter(recorded), None), label="recorded traces (no model needed)"
                    )
                    with gr.Row():
                        download = gr.DownloadButton("Export trace (JSON)", value=None, size="sm")
                        trace_json = gr.JSON(label="trace", visible=False)  # the API's copy of the trace file
                        upload = gr.UploadButton("Import trace", file_types=[".json"], size="sm")
                if examples:
                    gr.Examples(examples=[[e] for e in examples], inputs=prompt, label="Example prompts (Spec-Bench)")
            # ---- views
            with gr.Column(scale=3):
                status = gr.Markdown(label="status", elem_id="sv-status")
                cards = gr.HTML(label="summary")
                with gr.Row(equal_height=True):
                    tree_plot = gr.Plot(label="tree", show_label=False, elem_id="sv-tree", scale=3)
                    stop_plot = gr.Plot(label="stop probabilities", show_label=False, elem_id="sv-stop", scale=2)
                with gr.Row(equal_height=False, elem_id="sv-stepper"):
                    prev_btn = gr.Button("◀ previous", size="sm", scale=0, min_width=110)
                    round_slider = gr.Slider(0, 1, value=0, step=1, label="Round", scale=8)
                    next_btn = gr.Button("next ▶", size="sm", scale=0, min_width=110)
                with gr.Row(equal_height=True):
                    growth = gr.Slider(
                        0, 1, value=0, step=1, label="Growth replay: step (0 = the verdicts)", visible=False, scale=4
                    )
                    replay_btn = gr.Button("▶ replay how the tree grew", size="sm", visible=False, scale=1)
                inspect = gr.HTML(f'<div class="sv-inspect">{HINT}</div>', label="node inspector", elem_id="sv-inspect")
                pick = gr.Textbox(elem_id="sv-pick", show_label=False, container=False, elem_classes=["sv-hidden"])
                spans = gr.HighlightedText(
                    label="Output: each token coloured by how it was produced (click one to see its round)",
                    color_map=SPAN_COLORS,
                    show_legend=True,
                    combine_adjacent=False,
                    show_inline_category=False,
                    elem_id="sv-output",
                )
                with gr.Tabs():
                    with gr.Tab("Speedup"):
                        speed_plot = gr.Plot(label="speedup", show_label=False, elem_id="sv-speed")
                    with gr.Tab("Over the run"):
                        with gr.Row():
                            pos_plot = gr.Plot(label="acceptance per position", show_label=False, elem_id="sv-pos")
                            hist_plot = gr.Plot(label="accepted lengths", show_label=False, elem_id="sv-hist")
                    with gr.Tab("Stop head"):
                        calib_plot = gr.Plot(label="stop head calibration", show_label=False, elem_id="sv-calib")
                    with gr.Tab("Race"):
                        with gr.Row():
                            racers = gr.CheckboxGroup(
                                method_choices, label="methods (2–4)", scale=4, value=["ar", "chain", "heuristic"]
                            )
                            race_btn = gr.Button("Race", variant="primary", scale=1)
                        race_plot = gr.Plot(race_figure([]), label="race", show_label=False, elem_id="sv-race")
                    with gr.Tab("Prompt set", elem_id="sv-set-tab"):
                        set_tab = promptset.tab()
                    with gr.Tab("Hardware"):
                        local = resolve_dtype(MODEL.dtype, resolve_device(MODEL.device))
                        gr.Plot(budget_figure(load_curves(), local), show_label=False, elem_id="sv-budget")

        views = [
            st_trace,
            st_base,
            status,
            cards,
            spans,
            round_slider,
            tree_plot,
            stop_plot,
            speed_plot,
            pos_plot,
            hist_plot,
            calib_plot,
            growth,
            replay_btn,
            inspect,
            st_open,
            download,
            trace_json,
        ]
        round_out = [tree_plot, stop_plot, growth, replay_btn, inspect, st_open]  # inspector.open_round

        def render(trace, base, note, file, live=False):
            """Every view of a trace; `file` is its trace file (for the export button). Live runs show their
            newest round, finished traces open on an instructive one."""
            if trace is None:
                empty = placeholder("No trace: press Run or load a recorded trace.")
                return {
                    st_trace: None,
                    st_base: None,
                    status: note,
                    cards: "",
                    spans: [],
                    tree_plot: empty,
                    stop_plot: empty,
                    speed_plot: empty,
                    pos_plot: empty,
                    hist_plot: empty,
                    calib_plot: empty,
                    round_slider: gr.Slider(maximum=1, value=0),
                    download: gr.DownloadButton(value=None),
                    trace_json: None,
                    growth: gr.Slider(visible=False),
                    replay_btn: gr.Button(visible=False),
                    inspect: inspector.panel(None, 0),
                    st_open: [],
                }
            last = len(trace.rounds) - 1
            shown = last if live else showcase_round(trace.rounds)
            tree_fig, stop_fig, grow, replay, panel, opened = inspector.open_round(trace, shown)
            sp = speedup(trace, base) if base is not None else None
            return {
                growth: grow,
                replay_btn: replay,
                inspect: panel,
                st_open: opened,
                st_trace: trace,
                st_base: base,
                status: note,
                cards: summary_cards(summarize(trace), sp, label(trace.method)),
                spans: token_spans(trace),
                round_slider: gr.Slider(maximum=max(last, 1), value=shown),
                tree_plot: tree_fig,
                stop_plot: stop_fig,
                speed_plot: speedup_figure(trace, base),
                pos_plot: position_figure(trace),
                hist_plot: histogram_figure(trace),
                calib_plot: calibration_figure(trace),
                download: gr.skip() if live else gr.DownloadButton(value=str(file)),  # once, at the end
                trace_json: gr.skip() if live else session.as_dict(trace, base),
            }

        def on_method(m):
            return knobs.visibility(m, knob)

        def on_run(
            prompt, method, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens, seed,
            pair, dtype, target, draft, drafter, compare,
        ):  # fmt: skip
            try:
                text = make_prompt(prompt)
                run, model = make_configs(
                    method, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens, seed,
                    pair, dtype, target, draft, drafter,
                )  # fmt: skip
                yield {status: f"Running **{label(method)}** … (the first round includes the prompt's prefill)"}
                trace, shown, path = None, 0.0, exports.path(method)
                with closing(session.stream(text, run, model)) as traces:  # Stop closes it: frees the model
                    for trace in traces:
                        if time.monotonic() - shown < STREAM_EVERY_S:
                            continue
                        shown = time.monotonic()
                        path.write_text(session.dump(trace), encoding="utf-8")
                        yield render(
                            trace,
                            None,
                            f"Running **{label(method)}**: round {len(trace.rounds)}, "
                            f"{counted(trace.output_ids, 'token')}",
                            path,
                            live=True,
                        )
                base = None
                if compare:
                    yield {
                        status: f"Done: {counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')}. "
                        "Timing autoregressive decoding of the same prompt for the speedup …"
                    }
                    base = trace
                    if method != "ar":
                        with closing(session.baseline_stream(text, run, model)) as bases:  # Stop ends it too
                            for base in bases:  # noqa: B007  (the last one is the whole run)
                                if time.monotonic() - shown >= STREAM_EVERY_S:
                                    shown = time.monotonic()
                                    yield {status: gr.skip()}
                path.write_text(session.dump(trace, base), encoding="utf-8")
                yield render(trace, base, _done(trace), path)
            except (ValueError, RuntimeError, OSError) as e:
                raise gr.Error(str(e)) from None

        def on_token(trace, evt: gr.SelectData):
            return inspector.token_round(trace, evt.index)

        def on_upload(file):
            try:
                trace, base = session.load_path(file)
            except (ValueError, OSError) as e:
                raise gr.Error(f"could not load that trace file: {e}") from None
            return render(
                trace,
                base,
                f"Replaying an imported trace: {label(trace.method)}, "
                f"{counted(trace.output_ids, 'token')} in {counted(trace.rounds, 'round')}.",
                file,
            )

        def on_recorded(name):
            paths = session.recorded()
            if name not in paths:
                return render(None, None, "No recorded traces ship with this copy: press Run.", None)
            trace, base = session.load_path(paths[name])
            return render(
                trace,
                base,
                f"Recorded trace **{name}**: prompt “{html.escape(trace.prompt_text[:80])}”. "
                "Press Run to decode it live.",
                paths[name],
            )

        def on_race(
            prompt, methods, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens, seed,
            pair, dtype, target, draft, drafter,
        ):  # fmt: skip
            try:
                text = make_prompt(prompt)
                if not isinstance(methods, list) or not 2 <= len(methods) <= 4:
                    raise ValueError("pick 2 to 4 methods to race")
                values = (
                    k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens, seed,
                    pair, dtype, target, draft, drafter,
                )  # fmt: skip
                configs = [make_configs(m, *values) for m in methods]
                runs, model = [run for run, _ in configs], configs[0][1]
                with closing(session.race(text, runs, model)) as steps:  # Stop ends it between any two rounds
                    for done, finished in steps:
                        yield race_figure(done) if finished else gr.skip()
            except (ValueError, RuntimeError, OSError) as e:
                raise gr.Error(str(e)) from None

        set_views = list(set_tab.views)

        def on_set_run(
            n, prompts_file, method, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens,
            seed, pair, dtype, target, draft, drafter, progress=gr.Progress(),
        ):  # fmt: skip
            try:
                run, model = make_configs(
                    method, k, h, budget, width, depth, start_k, copy, temperature, top_p, max_new_tokens, seed,
                    pair, dtype, target, draft, drafter,
                )  # fmt: skip
                for out in promptset.run(n, prompts_file, run, model, progress):  # Stop ends it between two rounds
                    if isinstance(out, str):
                        yield {set_views[0]: out}
                    else:
                        yield dict(zip([st_set, *set_views], [out, *promptset.views(out)]))
            except (ValueError, RuntimeError, OSError) as e:
                raise gr.Error(str(e)) from None

        def on_set_pick(rs, evt: gr.SelectData):
            picked = promptset.pick(rs, evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index)
            if picked is None:
                return {status: gr.skip()}
            path = exports.path(picked.trace.method)
            path.write_text(session.dump(picked.trace), encoding="utf-8")
            return render(picked.trace, None, promptset.picked_note(picked), path)

        knobs_in = [knob[n] for n in ("k", "h", "budget", "width", "depth", "start_k", "copy")]
        settings = [*knobs_in, temperature, top_p, max_new, seed, pair, dtype, target, draft, drafter]
        method.change(on_method, method, list(knob.values()), api_visibility="private")
        run_ev = run_btn.click(
            on_run,
            [prompt, method, *settings, compare],
            views,
            api_name="run",
            concurrency_id="model",
            concurrency_limit=session.MODEL_SLOTS,
        )
        race_ev = race_btn.click(
            on_race,
            [prompt, racers, *settings],
            race_plot,
            api_name="race",
            concurrency_id="model",
            concurrency_limit=session.MODEL_SLOTS,
        )
        set_ev = set_tab.run.click(
            on_set_run,
            [set_tab.n, set_tab.prompts, method, *settings],
            [st_set, *set_views],
            api_name="run_set",
            concurrency_id="model",
            concurrency_limit=session.MODEL_SLOTS,
        )
        set_tab.file.change(promptset.on_file, set_tab.file, [st_set, *set_views], api_name="load_set")
        set_views[1].select(on_set_pick, st_set, views, api_visibility="private")
        stop_btn.click(None, None, None, cancels=[run_ev, race_ev, set_ev], api_visibility="private")
        nav = dict(api_visibility="private")
        round_slider.input(inspector.open_round, [st_trace, round_slider], round_out, trigger_mode="always_last", **nav)
        prev_btn.click(
            lambda t, i: inspector.step_round(t, i, -1), [st_trace, round_slider], [round_slider, *round_out], **nav
        )
        next_btn.click(
            lambda t, i: inspector.step_round(t, i, +1), [st_trace, round_slider], [round_slider, *round_out], **nav
        )
        spans.select(on_token, st_trace, [round_slider, *round_out], **nav)
        pick.change(
            inspector.on_pick, [st_trace, round_slider, pick, st_open, growth], [tree_plot, inspect, st_open], **nav
        )
        growth.input(
            inspector.on_growth, [st_trace, round_slider, growth, st_open], tree_plot, trigger_mode="always_last", **nav
        )
        replay_ev = replay_btn.click(inspector.replay, [st_trace, round_slider, st_open], [growth, tree_plot], **nav)
        for ev in (round_slider.input, growth.input, prev_btn.click, next_btn.click):
            ev(None, None, None, cancels=[replay_ev], **nav)
        upload.upload(on_upload, upload, views, api_name="import_trace")
        recorded_dd.input(on_recorded, recorded_dd, views, api_visibility="private")
        demo.load(on_recorded, recorded_dd, views, api_visibility="private")
    return demo


def launch_options() -> dict:
    """Theme, CSS and limits for Blocks.launch (Gradio 6 takes them there)."""
    return dict(
        theme=gr.themes.Soft(primary_hue="blue", neutral_hue="slate"),
        css=CSS,
        js=CLICK_JS,
        max_file_size="10mb",
        show_error=True,
        allowed_paths=[str(TRACES)],
    )


def main() -> None:
    threading.Thread(target=session.warm_up, daemon=True).start()
    demo = build_ui().queue(default_concurrency_limit=4, max_size=64)
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        **launch_options(),
    )


if __name__ == "__main__":
    main()
