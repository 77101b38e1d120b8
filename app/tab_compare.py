"""The Compare tab: plain decoding and every chosen method on the Race tab's prompt and settings, one after another,
each result streamed as it finishes."""
from __future__ import annotations

import time

import gradio as gr

from specdec_core.backends import llamacpp
from specdec_core.backends.choice import display
from specdec_core.core.config import ConfigError
from specdec_core.methods.registry import REGISTRY

from . import compare, race
from .handling import bind, gpu, models
from .render import message_html
from .resources import NotReady, store

OUTPUTS = ("status", "verdict", "plot", "category_plot", "table", "outputs", "json_file", "html_file", "summary")


def _categories(state):
    fig = compare.category_plot(state)
    return gr.update(value=fig, visible=fig is not None)


def other_backend(models_here):
    """The backend a comparison of both runs besides the Race tab's: its (models, profile), loaded on first use; a
    missing llama.cpp is named with its install command."""
    other = "torch" if models_here.backend == "llamacpp" else "llamacpp"
    if other == "llamacpp" and not llamacpp.available():
        raise ConfigError(f"Comparing both backends needs llama.cpp, which is not installed here: {llamacpp.INSTALL}")
    st = store(other)
    models_there = st.wait()  # raises NotReady with the load error, if loading failed
    return models_there, st.profile


@gpu
def compare_handler(methods, prompt, num_draft_tokens, adaptive, temperature, top_p, seed, max_new_tokens, chat,
                    cost_aware=True, prompt_set=compare.ONE_PROMPT, backend="auto", both=False):
    """Stream the comparison: dicts keyed by OUTPUTS names."""
    try:
        chosen = compare.parse_methods(methods)
        request = race.parse_request(prompt, chosen[0], num_draft_tokens, adaptive, temperature, top_p, seed,
                                     max_new_tokens, chat, cost_aware)
        here = models(backend)
        others = ()
        if both:
            yield {"status": message_html(f"Loading the other backend besides {display(here.backend)} (once; it "
                                          "measures its cost profile too)…")}
            others = (other_backend(here),)
        shown = 0.0
        for state, status in compare.run_compare(here, request, chosen, store(backend).profile, prompt_set,
                                                   others):
            # While a lane runs, only its line on the chart moves (rendering shares the CPU with the engine; a
            # browser redrawing every lane's coloured output each second slowed each later lane more); the table,
            # the outputs and the category chart follow when a lane ends.
            lane_end = status.endswith(("done", "failed"))
            if lane_end or time.perf_counter() - shown >= 1.0:
                yield {"status": message_html(status), "plot": compare.figure(state)} | ({
                    "category_plot": _categories(state), "table": compare.table_html(state),
                    "outputs": compare.outputs_html(state)} if lane_end else {})
                shown = time.perf_counter()
    except (ConfigError, NotReady) as e:
        raise gr.Error(str(e)) from None
    json_file, html_file = compare.downloads(state)
    runs = (len(chosen) + 1) * len(state.items) * len(state.backends)
    yield {"status": message_html(f"Done: {runs} runs, one after the other on {state.device}; each timed on its own "
                                  "(tokens/s: decoding only)."),
           "verdict": compare.verdict_html(state), "plot": compare.figure(state),
           "category_plot": _categories(state), "table": compare.table_html(state),
           "outputs": compare.outputs_html(state), "json_file": json_file, "html_file": html_file,
           "summary": state.summary()}


def build(r: dict) -> None:
    """Lay out and wire the tab; `r` holds the Race tab's components (the prompt and settings it compares on)."""
    gr.Markdown("Race **every method** on the Race tab's prompt (or a suite), settings and backend: plain decoding "
                "first, then "
                "each method, "
                "one after another (at the same time they would share the CPU and slow each other), each checked "
                "against plain decoding.")
    with gr.Row():
        with gr.Column(scale=3):
            methods = gr.CheckboxGroup([(s.label, n) for n, s in REGISTRY.items()], value=list(REGISTRY),
                                       label="Methods")
            prompt_set = gr.Radio(list(compare.SUITES), value=compare.ONE_PROMPT, label="Prompts",
                                  info="a suite runs every method on each prompt in turn (about 6× as long) and adds "
                                       "the speedup by category")
            both = gr.Checkbox(False, label="Both backends: PyTorch and llama.cpp",
                               info="each backend's plain decoding and methods on the same prompts (twice as long); "
                                    "each method against its own backend's plain decoding, and the fastest of all")
        with gr.Column(scale=0, min_width=180):
            run, stop = gr.Button("Compare ▶", variant="primary"), gr.Button("Stop ■", variant="stop")
    o = {"status": gr.HTML(), "verdict": gr.HTML(), "plot": gr.Plot(label="Tokens over time"),
         "category_plot": gr.Plot(label="By category", visible=False),
         "table": gr.HTML(elem_id="compare-table"), "outputs": gr.HTML(elem_id="compare-outputs")}
    with gr.Accordion("Downloads and run data", open=False):
        with gr.Row():
            o["json_file"], o["html_file"] = gr.File(label="Comparison (JSON)"), gr.File(label="Report (HTML)")
        o["summary"] = gr.JSON(label="Summary")
    inputs = [methods] + [r[k] for k in ("prompt", "k", "adaptive", "temperature", "top_p", "seed", "max_new", "chat",
                                         "cost_aware")] + [prompt_set, r["backend"], both]
    fn, outs = bind(compare_handler, {k: o[k] for k in OUTPUTS})
    event = run.click(fn, inputs, outs, api_name="compare", concurrency_limit=1, show_progress="minimal")
    stop.click(lambda: message_html("Stopped."), None, o["status"], cancels=[event], queue=False)
