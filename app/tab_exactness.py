"""The Exactness lab: speculative sampling of one token, thousands of times, against the target's own p."""
from __future__ import annotations

import gradio as gr

from specdec_core.core.config import ConfigError, SamplingConfig
from specdec_core.core.session import encode_prompt

from . import exactness, race
from .handling import models


def exactness_handler(mode, prompt, chat, temperature, trials, seed):
    try:
        trials, seed, temperature = int(trials), int(seed), float(temperature)
    except (TypeError, ValueError):
        raise gr.Error("Trials and seed must be whole numbers.") from None
    if not 100 <= trials <= exactness.MAX_TRIALS:
        raise gr.Error(f"Trials must be between 100 and {exactness.MAX_TRIALS:,}.")
    if mode == "toy":
        p, q, names = exactness.toy_distributions(seed)
    else:
        try:
            sampling = SamplingConfig(temperature=temperature, top_k=40)
            if sampling.greedy:
                raise ConfigError("Use a temperature above 0: at temperature 0 there is no distribution to compare.")
            m = models()
            ids = encode_prompt(m.tokenizer, prompt, chat=bool(chat))[: race.MAX_PROMPT_TOKENS]
        except ConfigError as e:
            raise gr.Error(str(e)) from None
        p, q, names = exactness.real_distributions(m, ids, sampling)
    counts = exactness.simulate(p, q, trials, seed)
    text, fig = exactness.lab_view(p, q, names, counts)
    if mode != "toy":
        same = exactness.same_p_bits(m, ids, sampling)
        text += ("<p>✓ <b>Same p to the last bit</b>: the target's p for this token from a 6-token verify forward "
                 "equals plain decoding's, bit for bit (bit-exact target), so speculative and plain sampling draw "
                 "from the very same numbers.</p>" if same else
                 "<p>✗ The verify forward's p differs from plain decoding's in the last bits on this device.</p>")
    return text, fig


def build(chat: gr.Checkbox) -> None:
    gr.Markdown("Run speculative sampling many times for **one** next token and compare what comes out with the "
                "target's own distribution p. The draft's q is shown too: accepting its guesses blindly would give "
                "q, not p.")
    with gr.Row():
        mode = gr.Radio([("Real context (target p, draft q)", "real"), ("Toy p and q", "toy")], value="toy",
                        label="Distributions")
        temp = gr.Slider(0.1, 2, value=1.0, step=0.05, label="Temperature (top-k 40)")
        trials = gr.Slider(100, exactness.MAX_TRIALS, value=5000, step=100, label="Trials")
        seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
    prompt = gr.Textbox(label="Context (real mode)", lines=2, value="The three most useful Python built-ins are")
    run = gr.Button("Run the experiment", variant="primary")
    html, fig = gr.HTML(), gr.Plot()
    run.click(exactness_handler, [mode, prompt, chat, temp, trials, seed], [html, fig], api_name="exactness",
              concurrency_limit=1)
