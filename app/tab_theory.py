"""The Theory tab: the Leviathan formula as curves, the last race on top, and this machine's measured T(n)."""
from __future__ import annotations

import gradio as gr

from specdec_core import settings as S

from . import figures
from .resources import STORE


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


def build(record: gr.State, demo: gr.Blocks) -> dict:
    gr.Markdown("With acceptance rate α per token, γ draft tokens per round and a draft step costing c target "
                "forwards, a round yields (1 − α^(γ+1)) / (1 − α) tokens on average and the expected speedup is "
                "(1 − α^(γ+1)) / ((1 − α)(γc + 1)) (Leviathan et al., 2023).")
    with gr.Row():
        gamma = gr.Slider(1, S.MAX_DRAFT_TOKENS, value=S.NUM_DRAFT_TOKENS.default, step=1, label="γ (draft tokens per round)")
        cost = gr.Slider(0, 2, value=0.4, step=0.01, label="c (draft step cost / target forward)")
        use = gr.Button("Use the last run's γ and c")
    note = gr.Markdown()
    with gr.Row():
        speed, tokens = gr.Plot(), gr.Plot()
    curve_note, curve = gr.Markdown(), gr.Plot()
    formula = ([gamma, cost, record], [speed, tokens, note])
    for control in (gamma, cost):
        control.change(theory_handler, *formula, queue=False)
    use.click(use_last_run, record, [gamma, cost], queue=False)
    demo.load(theory_handler, *formula, queue=False)
    demo.load(cost_curve_handler, None, [curve_note, curve], queue=False)
    return {"formula": formula, "curve": [curve_note, curve]}


def follow_race(event, t: dict):
    """After a race: redraw with its measured point and the (maybe newly measured) cost curve."""
    return event.then(theory_handler, *t["formula"], queue=False).then(cost_curve_handler, None, t["curve"],
                                                                        queue=False)
