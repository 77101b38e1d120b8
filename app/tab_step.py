"""The Step-through tab: one round at a time, with the real numbers the verifier used."""
from __future__ import annotations

import gradio as gr

from specdec_core.core.config import ConfigError

from . import race, stepthrough
from .handling import gpu, models, token_label
from .render import message_html


def step_handler(rounds, greedy, index):
    return stepthrough.step_view(rounds or [], index, token_label(), bool(greedy))


@gpu
def fresh_step_run(prompt, method, num_draft_tokens, temperature, seed, chat):
    """A short speculative run for the step-through (sampled, so u, p/q and the residual are on show)."""
    try:
        request = race.parse_request(prompt, method, num_draft_tokens, False, temperature, 1.0, seed, 24, chat)
        prompt_ids, engine = race.prepare(models(), request)
        rounds = list(engine.generate(prompt_ids, request.config))
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    greedy = request.config.sampling.greedy
    return (rounds, greedy, *stepthrough.step_view(rounds, 0, token_label(), greedy))


def build(r: dict) -> dict:
    """Lay out and wire the tab; `r` holds the Race tab's components (prompt, method, γ, seed, chat)."""
    rounds, greedy = gr.State([]), gr.State(True)
    gr.Markdown("One round at a time, with the real numbers the verifier used. Uses the last race, or press "
                "**Fresh sampled run** for a short run at the temperature below (sampling shows the uniform draw u, "
                "p/q and the residual).")
    with gr.Row():
        temp = gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature for a fresh run")
        fresh = gr.Button("Fresh sampled run (24 tokens)")
    with gr.Row():
        prev_btn = gr.Button("◀ Previous round")
        index = gr.Number(value=0, precision=0, label="Round (0-based)", minimum=0)
        next_btn = gr.Button("Next round ▶")
    html = gr.HTML(message_html("No trace yet."))
    with gr.Row():
        pq_fig, residual_fig = gr.Plot(label="p vs q"), gr.Plot(label="residual / bonus")
    view = [html, pq_fig, residual_fig, index]
    fresh.click(fresh_step_run, [r["prompt"], r["method"], r["k"], temp, r["seed"], r["chat"]],
                [rounds, greedy, *view], api_name="step", concurrency_limit=1)
    prev_btn.click(lambda s, g, i: step_handler(s, g, int(i or 0) - 1), [rounds, greedy, index], view, queue=False)
    next_btn.click(lambda s, g, i: step_handler(s, g, int(i or 0) + 1), [rounds, greedy, index], view, queue=False)
    index.submit(step_handler, [rounds, greedy, index], view, queue=False)
    return {"rounds": rounds, "greedy": greedy, "index": index, "view": view}


def follow_race(event, record, s: dict):
    """After a race: show its first round."""
    return event.then(lambda rec: ([] if rec is None else rec.spec.rounds,
                                   True if rec is None else rec.request.config.sampling.greedy, 0),
                      record, [s["rounds"], s["greedy"], s["index"]], queue=False) \
        .then(step_handler, [s["rounds"], s["greedy"], s["index"]], s["view"], queue=False)
