"""The Race tab: pick a prompt and a drafter, race it against plain decoding, watch both stream."""
from __future__ import annotations

import time

import gradio as gr

from specdec_core.backends import choice
from specdec_core.core.config import ConfigError
from specdec_core.methods.recommend import prompt_kind, recommend
from specdec_core import settings as S
from specdec_core.methods.registry import REGISTRY

from . import race
from .handling import bind, gpu, models
from .render import legend_html, message_html, tokens_html
from .resources import STORE, store

UPDATE_SECONDS = 1.0  # live redraw interval of the race
METHOD_CHOICES = [(spec.label, name) for name, spec in REGISTRY.items()]
BACKEND_CHOICES = [("auto (fastest plain decoding here)", "auto"), ("PyTorch", "torch"), ("llama.cpp (GGUF)", "llamacpp")]
# The /race endpoint's outputs, in the order gradio_client returns them (a stable API: keep the order).
OUTPUTS = ("spec", "ar", "race_plot", "split_plot", "hist_plot", "headline", "status", "verdict", "record",
           "trace_file", "charts_file", "summary")


@gpu
def race_handler(prompt, method, num_draft_tokens, adaptive, temperature, top_p, seed, max_new_tokens, chat,
                 show_rejected, cost_aware=True, backend="auto"):
    """Stream the race: dicts keyed by OUTPUTS names."""
    try:
        request = race.parse_request(prompt, method, num_draft_tokens, adaptive, temperature, top_p, seed,
                                     max_new_tokens, chat, cost_aware)
        m = models(backend)
        record, shown, sent = None, 0.0, {}
        for record, status in race.run_race(m, request, store(backend).profile):
            # Redraw at most every UPDATE_SECONDS, for both runs alike: rendering shares the CPU with the engine (a
            # browser on the same 2 cores). So the per-round charts are drawn empty before the timed runs and full at
            # the end, never in between (redrawn live they loaded the speculative run alone: 1.29-1.39x against 1.5x
            # by API), and an unchanged text (the other run's tokens) is not sent again.
            if time.perf_counter() - shown >= UPDATE_SECONDS:
                out = race.race_outputs(record, show_rejected, message_html(status), per_round=not shown)
                if shown:
                    out = {k: v for k, v in out.items() if not (isinstance(v, str) and sent.get(k) == v)}
                sent.update(out)
                yield {**out, "verdict": "", "record": record}
                shown = time.perf_counter()
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    trace_file, charts_file = race.write_downloads(record)
    shared = (" Another race ran at the same time, so both shared the machine: these timings are slower and "
              "noisier than a race alone; race again for a clean measurement." if record.shared else "")
    done = message_html(
        f"Done. Timed one after the other on {record.device}: first the speculative run, then plain decoding, each "
        f"from its own start; tokens/s counts decoding only (the prompt pass is shown on the chart but excluded)."
        f"{shared}", "warn" if shared else "info")
    yield {**race.race_outputs(record, show_rejected, done), "verdict": race.verdict_html(record, m.tokenizer),
           "record": record, "trace_file": trace_file, "charts_file": charts_file, "summary": record.summary()}


def _store_or_default(backend):
    try:
        return store(backend)
    except ValueError:
        return STORE


def rerender_tokens(record, show_rejected):
    return gr.skip() if record is None else tokens_html(record.spec.pieces, show_rejected)


def advice_handler(chat, backend="auto") -> str:
    """Before the race: the method predicted fastest on this machine for this kind of prompt, or that none pays."""
    kind, profile = prompt_kind(chat), _store_or_default(backend).profile
    text = recommend(profile, kind).text()
    return (f"{text} <small>(this machine's measured costs on {backend_name(backend)} × acceptance measured by the "
            f"bench on {kind} prompts: a forecast, not this prompt's result)</small>") if profile else text


def use_recommended(chat, backend="auto"):
    best = recommend(_store_or_default(backend).profile, prompt_kind(chat)).best
    return best.method if best else gr.skip()


def backend_name(backend) -> str:
    """'llama.cpp' / 'PyTorch': the backend a race on this choice runs (auto: once resolved)."""
    try:
        st = store(backend)
    except ValueError:
        return str(backend)
    return choice.display(st.get().backend if st.ready else st.backend)


def backend_status(backend) -> str:
    """The chosen backend's models: loading (started on first pick), ready, or why not."""
    try:
        st = store(backend)
    except ValueError as e:
        return str(e)
    st.start()
    return st.status() if st is not STORE else ""


def _controls(examples: list[dict]) -> dict:
    c = {}
    with gr.Row():
        with gr.Column(scale=3):
            c["prompt"] = gr.Textbox(label="Prompt", lines=9, value=examples[0]["text"], max_lines=20)
            c["example"] = gr.Radio([e["name"] for e in examples], label="Examples", value=examples[0]["name"])
            c["chat"] = gr.Checkbox(label="Wrap in the chat template (instruct models)", value=examples[0]["chat"])
        with gr.Column(scale=2):
            c["method"] = gr.Radio(METHOD_CHOICES, value="draft", label="Drafter")
            c["backend"] = gr.Radio(BACKEND_CHOICES, value="auto", label="Backend (both lanes run on it)",
                                    elem_id="backend")
            c["backend_status"] = gr.Markdown(elem_id="backend-status")
            with gr.Row():
                c["advice"] = gr.Markdown(elem_id="advice")
                c["use_best"] = gr.Button("Use it", size="sm", scale=0, min_width=80)
            c["k"] = gr.Slider(1, S.MAX_DRAFT_TOKENS, value=S.NUM_DRAFT_TOKENS.default, step=1,
                               label="Draft tokens per round (γ)")
            c["adaptive"] = gr.Checkbox(label="Adaptive draft length (+2 / −1, stop below confidence 0.4)")
            c["cost_aware"] = gr.Checkbox(value=True, label="Cost-aware draft length: γ per round from this "
                                          "machine's measured costs (γ above is the start until they are measured)")
            with gr.Row():
                c["temperature"] = gr.Slider(S.PAGE_TEMPERATURE.lo, S.PAGE_TEMPERATURE.hi, value=S.PAGE_TEMPERATURE.default,
                                               step=0.05, label="Temperature (0 = greedy)")
                c["top_p"] = gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p")
            with gr.Row():
                c["seed"] = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                c["max_new"] = gr.Slider(S.PAGE_MAX_NEW_TOKENS.lo, S.PAGE_MAX_NEW_TOKENS.hi, value=S.PAGE_MAX_NEW_TOKENS.default,
                                         step=1, label="Max new tokens")
            with gr.Row():
                c["run"] = gr.Button("Race ▶", variant="primary")
                c["stop"] = gr.Button("Stop ■", variant="stop")
    return c


def _outputs(record) -> dict:
    gr.HTML(legend_html())
    o = {"status": gr.HTML(message_html("Press Race: the speculative run streams first, then plain decoding of the "
                                        "same target, timed separately.")), "headline": gr.HTML()}
    o["show_rejected"] = gr.Checkbox(label="Show rejected draft tokens (struck through)", value=False)
    with gr.Row(equal_height=True):
        with gr.Column():
            gr.Markdown("**Speculative** (colour = where each token came from; hover for p and q)")
            o["spec"] = gr.HTML(elem_id="spec-out")
        with gr.Column():
            gr.Markdown("**Plain autoregressive** (same target, one token per forward)")
            o["ar"] = gr.HTML(elem_id="ar-out")
    o["verdict"], o["race_plot"] = gr.HTML(), gr.Plot(label="Race", elem_id="race-plot")
    with gr.Row():
        o["split_plot"], o["hist_plot"] = gr.Plot(label="Time per round"), gr.Plot(label="Accepted per round")
    with gr.Accordion("Downloads and run data", open=False):
        with gr.Row():
            o["trace_file"], o["charts_file"] = gr.File(label="Trace (JSON)"), gr.File(label="Charts (HTML)")
        o["summary"] = gr.JSON(label="Summary")
    return {**o, "record": record}


def build(examples: list[dict], record: gr.State, timer: gr.Timer, status: gr.Markdown, demo: gr.Blocks) -> dict:
    """Lay out and wire the tab; returns its components (other tabs read the prompt and chain on the race)."""
    c, o = _controls(examples), _outputs(record)

    def pick_example(name):
        ex = next(e for e in examples if e["name"] == name)
        return ex["text"], ex["chat"], ex["method"]

    c["example"].change(pick_example, c["example"], [c["prompt"], c["chat"], c["method"]], queue=False)
    def tick(chat, backend):
        st = _store_or_default(backend)
        return (STORE.status(), advice_handler(chat, backend), backend_status(backend),
                gr.Timer(active=not (STORE.settled and st.settled)))

    timer.tick(tick, [c["chat"], c["backend"]], [status, c["advice"], c["backend_status"], timer],
               show_progress="hidden", queue=False)
    c["chat"].change(advice_handler, [c["chat"], c["backend"]], c["advice"], queue=False)
    c["backend"].change(lambda chat, backend: (advice_handler(chat, backend), backend_status(backend),
                                               gr.Timer(active=True)),
                        [c["chat"], c["backend"]], [c["advice"], c["backend_status"], timer], queue=False)
    demo.load(advice_handler, [c["chat"], c["backend"]], c["advice"], queue=False)
    c["use_best"].click(use_recommended, [c["chat"], c["backend"]], c["method"], queue=False)
    inputs = [c[k] for k in ("prompt", "method", "k", "adaptive", "temperature", "top_p", "seed", "max_new", "chat")]
    fn, outs = bind(race_handler, {k: o[k] for k in OUTPUTS})
    event = c["run"].click(fn, inputs + [o["show_rejected"], c["cost_aware"], c["backend"]], outs, api_name="race",
                           concurrency_limit=2, show_progress="minimal")  # per-request state: no cross-talk
    c["stop"].click(lambda: message_html("Stopped."), None, o["status"], cancels=[event], queue=False)
    o["show_rejected"].change(rerender_tokens, [record, o["show_rejected"]], o["spec"], queue=False)
    return {**c, **o, "event": event}
