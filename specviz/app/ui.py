"""The specviz dashboard: the wiring diagram. `app.page` lays the components out, `app.handlers` holds what each
event does, `app.inspector` the round view's handlers; this module connects them. Runs come from `specviz.app.runs`
(the pair they share: `app.held`), figures from `specviz.viz`. Per-visitor data (the trace on screen and its
autoregressive baseline) lives in gr.State; the model pair is shared and used by one run at a time.

    python app.py     # http://127.0.0.1:7860; GRADIO_SERVER_NAME / GRADIO_SERVER_PORT change it
"""

from __future__ import annotations

import os
import threading

import gradio as gr

from specviz.app import engine, exports, files, handlers, held, inspector, knobs, pairwork, policy, promptset
from specviz.app.handlers import bind
from specviz.app.page import ROUND_VIEWS, Page, layout
from specviz.app.theme import CLICK_JS, CSS
from specviz.core.assets import TRACES

MODEL_EVENT = dict(concurrency_id="model", concurrency_limit=held.MODEL_SLOTS)
NAV = dict(api_visibility="private")


def build_ui() -> gr.Blocks:
    with gr.Blocks(title="specviz: speculative decoding, round by round", delete_cache=(3600, exports.TTL_S)) as demo:
        page = layout(demo)
        wire(page)
    return demo


def wire(page: Page) -> None:
    """Connect the page's events to their handlers (each handler's inputs by the names of its parameters)."""
    c, v, b, st = page.controls, page.views, page.buttons, page.set_tab
    run, race, run_set = (bind(f, page) for f in (handlers.run, handlers.race, handlers.run_set))
    run_ev = b["run"].click(run, page.inputs(run), page.outputs(), api_name="run", **MODEL_EVENT)
    race_ev = b["race"].click(race, page.inputs(race), v["race_plot"], api_name="race", **MODEL_EVENT)
    set_out = [v["st_set"], *st.views]
    set_ev = st.run.click(run_set, page.inputs(run_set), set_out, api_name="run_set", **MODEL_EVENT)
    eng = page.engine_tab
    eng_out = [v["st_engine"], *eng.views]
    rec = engine.record_engine
    eng_ev = eng.record.click(rec, page.inputs(rec), eng_out, api_name="record_engine", **MODEL_EVENT)
    for f in (eng.file_a, eng.file_b):
        f.change(engine.on_files, [eng.file_a, eng.file_b], eng_out, **NAV)
    b["stop"].click(None, None, None, cancels=[run_ev, race_ev, set_ev, eng_ev], **NAV)
    knob = {n: c[n] for n in knobs.NAMES}
    c["method"].change(lambda m: knobs.visibility(m, knob), c["method"], list(knob.values()), **NAV)
    st.file.change(promptset.on_file, st.file, set_out, api_name="load_set")
    shown = [c[n] for n in knobs.SHOWN]  # a run opened from a file: the controls take its settings

    def opens(event):
        event.then(knobs.shown, v["st_trace"], shown, **NAV)

    opens(st.views[1].select(bind(handlers.pick_set_row, page), v["st_set"], page.outputs(), **NAV))
    opens(eng.views[1].select(bind(handlers.pick_engine_row, page), v["st_engine"], page.outputs(), **NAV))
    imported = bind(handlers.import_trace, page)
    opens(c["file"].upload(imported, c["file"], page.outputs(), api_name="import_trace"))
    recorded = bind(handlers.open_recorded, page)
    opens(c["recorded"].input(recorded, c["recorded"], page.outputs(), **NAV))
    lesson = bind(handlers.open_lesson, page)
    lesson_out = [*page.outputs(), v["vr_acc"]]
    opens(c["lesson"].input(lesson, c["lesson"], lesson_out, **NAV))
    taught = files.lessons()
    if policy.public() and taught:  # a Space opens on the first lesson
        opens(page.demo.load(lambda: lesson(taught[0]["title"]), None, lesson_out, **NAV))
        page.demo.load(lambda: taught[0]["title"], None, c["lesson"], **NAV)
    else:
        opens(page.demo.load(recorded, c["recorded"], page.outputs(), **NAV))
    gr.api(handlers.measure, api_name="measure", **MODEL_EVENT)  # the API / MCP alone: a run's numbers as JSON
    wire_pairwork(page, run_ev)
    wire_rounds(page)


def wire_pairwork(page: Page, run_ev) -> None:
    """The loaded pair's own work: training its SpecDec++ head (and Stop), measuring its hardware curves."""
    v, b = page.views, page.buttons
    train = pairwork.train_head
    b["train_head"].click(train, page.inputs(train), v["head_note"], api_name="train_head", **MODEL_EVENT)
    b["stop_train"].click(pairwork.stop_training, None, v["head_note"], **NAV)
    run_ev.then(pairwork.estimate, page.inputs(pairwork.estimate), v["head_note"], **NAV)
    hw = pairwork.measure_hardware
    hw_out = [v["hw_plot"], v["hw_note"]]
    b["hw_measure"].click(hw, page.inputs(hw), hw_out, api_name="measure_hardware", **MODEL_EVENT)


def wire_rounds(page: Page) -> None:
    """The round view: the round slider and its buttons, a clicked token or node, the growth replay."""
    c, v, b = page.controls, page.views, page.buttons
    rounds = page.outputs(ROUND_VIEWS)
    at = [v["st_trace"], v["round_slider"]]
    v["round_slider"].input(inspector.open_round, at, rounds, trigger_mode="always_last", **NAV)
    b["prev"].click(lambda t, i: inspector.step_round(t, i, -1), at, [v["round_slider"], *rounds], **NAV)
    b["next"].click(lambda t, i: inspector.step_round(t, i, +1), at, [v["round_slider"], *rounds], **NAV)
    v["spans"].select(inspector.on_token, v["st_trace"], [v["round_slider"], *rounds], **NAV)
    picked = [v["tree_plot"], v["inspect"], v["st_open"]]
    c["pick"].change(inspector.on_pick, [*at, c["pick"], v["st_open"], v["growth"]], picked, **NAV)
    grow_in = [*at, v["growth"], v["st_open"]]
    v["growth"].input(inspector.on_growth, grow_in, v["tree_plot"], trigger_mode="always_last", **NAV)
    replay_ev = v["replay_btn"].click(inspector.replay, [*at, v["st_open"]], [v["growth"], v["tree_plot"]], **NAV)
    for ev in (v["round_slider"].input, v["growth"].input, b["prev"].click, b["next"].click):
        ev(None, None, None, cancels=[replay_ev], **NAV)
    walked = [v["tree_plot"], v["vr_text"], v["vr_bars"]]
    v["vr_step"].input(inspector.on_verify, [*at, v["vr_step"], v["st_open"]], walked, **NAV)
    step_in = [*at, v["vr_step"], v["st_open"]]
    for button, delta in ((b["vr_prev"], -1), (b["vr_next"], +1)):
        button.click(
            lambda t, i, k, o, d=delta: inspector.verify_step(t, i, k, d, o), step_in, [v["vr_step"], *walked], **NAV
        )


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
    threading.Thread(target=held.warm_up, daemon=True).start()
    demo = build_ui().queue(default_concurrency_limit=4, max_size=64)
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        mcp_server=policy.mcp(),
        **launch_options(),
    )


if __name__ == "__main__":
    main()
