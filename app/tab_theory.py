"""The Theory tab: the Leviathan formula as curves, the last race on top, and this machine's measured T(n)."""
from __future__ import annotations

import gradio as gr

from specdec_core import settings as S

from specdec_core.backends import roofline
from specdec_core.bench import whatif
from specdec_core.settings import page_draft, page_target

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


def _shapes(models):
    return (roofline.shape_of_model(page_target(), models.target), roofline.shape_of_model(page_draft(), models.draft))


def _report(record, profile, models, shapes) -> dict | None:
    """whatif's rows for the page: this machine (measured costs) and the catalogue (roofline), with the last race's
    acceptance when there is one, else the shipped priors."""
    raced = record is not None and record.spec.rounds
    method = record.request.method if raced else None
    try:
        acceptance = whatif.from_trace(record.summary()) if raced else whatif.from_priors("code")
    except (ValueError, KeyError):  # the race drafted nothing: the method's shipped prior instead
        kind = "code" if not record.request.chat else "prose"
        acceptance = whatif.from_priors(kind)
        acceptance = whatif.Acceptance({method: acceptance.per_position.get(method, [])},
                                       f"this race drafted nothing, so the acceptance the bench measured for {method} "
                                       f"on {kind} prompts", {method: record.summary()["decode_speedup"]})
    target, draft = shapes
    return whatif.whatif(profile, target, draft, acceptance, [method] if method else None,
                         max_verify_tokens=getattr(models.target, "max_verify_tokens", None))


def machine_sentence() -> str:
    """What the profile measured here, in one sentence (the How-it-works tab's claim made true for this machine)."""
    p = STORE.profile
    if p is None:
        return "*This machine's cost of a 5-token pass appears here once the page has measured its cost profile.*"
    five = p.timed(5) / p.T(1)
    verdict = ("about the same as one: verification is nearly free here" if five < 1.3 else
               "clearly more than one: each checked guess costs time here" if five < 2.5 else
               "several times one: here a guess must be right very often to pay")
    return (f"**On this machine** ({p.isa}, target {p.target_repr}), the profile measured a pass over 5 new tokens at "
            f"{p.timed(5):.0f} ms against {p.T(1):.0f} ms for one ({five:.2f}×): {verdict}.")


def cost_curve_handler(record=None):
    """This machine's measured T(n) beside the devices' roofline, and after a race its acceptance on every device;
    notes while the profile is being measured."""
    profile = record.profile if record is not None and record.profile is not None else STORE.profile
    if profile is None or not STORE.ready:
        return ("This machine's cost curve T(n) appears here once the background profile is measured "
                "(`python -m specdec_core profile` measures it from the command line)."), None, "", None
    models = STORE.get()
    shapes = _shapes(models)
    report = _report(record, profile, models, shapes)
    p, here, shape = profile, report["this_machine"], shapes[0]
    sizes = sorted(n for n in p.timed_ms if n <= 16)
    curves = {d.name: {n: roofline.t_ms(d, shape, n) / roofline.t_ms(d, shape, 1) for n in sizes}
              for d in (roofline.this_machine(p, shape, "this machine"),) + roofline.CATALOGUE}
    verdict = ("nearly free" if p.timed(6) / p.T(1) < 1.3 else "far from free")
    errors = ", ".join(f"T({n})/T(1) {here['measured_t_ratio'][n]:.2f} measured vs {here['roofline_t_ratio'][n]:.2f} "
                       f"roofline" for n in here["measured_t_ratio"])
    note = (f"**On this machine verifying is {verdict}:** a forward of 6 tokens costs {p.timed(6) / p.T(1):.2f}× one step "
            f"(T(1) = {p.T(1):.0f} ms, target {p.target_repr}, {p.isa}). One step reads {p.target_bytes / 1e9:.2f} GB "
            f"at {p.bandwidth_gb_s:.1f} GB/s copy bandwidth: utilization {p.utilization:.0%}. The race's prediction "
            f"uses these measured costs. The thin lines are a roofline, T(n) ≈ overhead + max(bytes / bandwidth, "
            f"FLOPs(n) / peak), from each device's datasheet; here it gives {errors} (overhead "
            f"{here['calibrated_overhead_ms']:.0f} ms calibrated from T(1); its arithmetic rate per row count from a matmul "
            f"probe of the target's own kernels). "
            "`python -m specdec_core whatif` prints the table.")
    rows = report["devices"]
    method = next(iter(report["acceptance"]["per_position"]), None)
    if record is None or not record.spec.rounds or method is None:
        return note, figures.cost_curve_figure(p, curves), ("Run a race to see its acceptance carried to every "
                                                            "device."), None
    measured = report["acceptance"]["measured_speedup"].get(method)
    lines = [f"- **{r['name']}**{' (datasheet estimate)' if r['estimate'] else ''}: "
             f"{r['predicted_speedup'].get(method, 1.0):.2f}× at γ {r['best_gamma'].get(method, 0)}; {r['why']}."
             for r in rows]
    per = report["acceptance"]["per_position"].get(method) or []
    bars_note = (f"**{report['acceptance']['source'][0].upper() + report['acceptance']['source'][1:]}, carried to each "
                 f"device** (α per position {', '.join(f'{a:.2f}' for a in per[:5])}…). Utilization plain → speculative: "
                 + "; ".join(f"{r['name']} {r['utilization']['plain']:.0%} → "
                             f"{'–' if r['utilization']['speculative'] is None else format(r['utilization']['speculative'], '.0%')}"
                             for r in rows) + ".\n\n" + "\n".join(lines))
    return note, figures.cost_curve_figure(p, curves), bars_note, figures.device_speedup_figure(rows, method, measured)


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
    gr.Markdown("### Why it pays here and not there")
    curve_note, curve = gr.Markdown(), gr.Plot(elem_id="hardware-curve")
    bars_note, bars = gr.Markdown(elem_id="device-note"), gr.Plot(elem_id="device-bars")
    formula = ([gamma, cost, record], [speed, tokens, note])
    for control in (gamma, cost):
        control.change(theory_handler, *formula, queue=False)
    use.click(use_last_run, record, [gamma, cost], queue=False)
    demo.load(theory_handler, *formula, queue=False)
    demo.load(cost_curve_handler, None, [curve_note, curve, bars_note, bars], queue=False)
    return {"formula": formula, "curve": ([record], [curve_note, curve, bars_note, bars])}


def follow_race(event, t: dict):
    """After a race: redraw with its measured point and the (maybe newly measured) cost curve."""
    return event.then(theory_handler, *t["formula"], queue=False).then(cost_curve_handler, *t["curve"], queue=False)
