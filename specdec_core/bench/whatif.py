"""`python -m specdec_core whatif`: this machine's measured cost curve first, then the roofline of each catalogue
device (backends/roofline.py), with each method's best draft length and predicted speedup there, from one acceptance:
a race's trace (`--from-trace`) or the shipped priors the bench measured (assets/acceptance_priors.json).

A speedup is E[tokens/round] x T(1) / (γ x T_draft + T(γ + 1)) (core/metrics.py) with the device's T; the draft
model's T_draft is its own roofline there, prompt lookup costs what it costs here (CPU bookkeeping), and a head
(Medusa, EAGLE) or layer-skip drafter costs the fraction of a target step it costs here. Every number a row predicts
is labelled "roofline"; the first row's are "measured" (this machine's profile)."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from specdec_core.backends import roofline
from specdec_core.backends.profile import LONG_CONTEXT, PROMPT_TOKENS
from specdec_core.backends.roofline import Device, Shape
from specdec_core.core.metrics import expected_tokens_from_positions
from specdec_core.methods.recommend import prior, tree_size
from specdec_core.methods.registry import REGISTRY
from specdec_core.settings import MAX_DRAFT_TOKENS

SIZES = (2, 4, 8)  # the T(n)/T(1) a row shows, and where the roofline is checked against the measured profile here
CONTEXT = PROMPT_TOKENS  # tokens in the cache: the profile's prompt length


@dataclass(frozen=True)
class Acceptance:
    per_position: dict[str, list[float]]  # method -> P(position i accepted | examined)
    source: str  # "trace (method, N rounds)" or "shipped priors, code prompts"
    measured_speedup: dict[str, float]  # a race's measured decode speedup here, by method (from a trace)


def from_priors(kind: str = "code") -> Acceptance:
    return Acceptance({m: list(prior(m, kind)) for m in REGISTRY if prior(m, kind)},
                      f"shipped priors: acceptance the bench measured on {kind} prompts", {})


def from_trace(trace: dict) -> Acceptance:
    """A race's downloaded trace (the Race tab's "Trace (JSON)"), or its summary."""
    summary = trace.get("summary", trace)
    row, method = summary["row"], summary["method"]
    per = list(row.get("per_position") or [])
    if not per:
        raise ValueError(f"the trace's {method} run drafted nothing: no acceptance to carry to other devices")
    measured = {method: summary["decode_speedup"]} if summary.get("decode_speedup") else {}
    return Acceptance({method: per}, f"this race's trace: {method}", measured)


def read_trace(path: Path) -> Acceptance:
    try:
        return from_trace(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"cannot read a race trace from {path}: {e}") from None


def best(per_position: list[float], target_ms, draft_ms: float, tree_nodes: int | None,
         max_tokens: int = MAX_DRAFT_TOKENS) -> tuple[int, float]:
    """(draft length, predicted decode speedup) maximising tokens/s; γ 0 is plain decoding (1.0×). A tree verifies
    its configured nodes in one forward and yields up to its depth."""
    t1 = target_ms(1)
    if tree_nodes is not None:
        nodes = min(tree_nodes, max_tokens)
        e = expected_tokens_from_positions(per_position, min(nodes, len(per_position)))
        return nodes, max(1.0, e * t1 / (nodes * draft_ms + target_ms(nodes + 1)))
    rates = {g: expected_tokens_from_positions(per_position, g) * t1 / (g * draft_ms + target_ms(g + 1))
             for g in range(1, max_tokens + 1)}
    g = max(rates, key=rates.get)
    return (g, rates[g]) if rates[g] > 1.0 else (0, 1.0)


def why(device: Device, shape: Shape, context: int) -> str:
    """One sentence: bandwidth bound (verification nearly free) or compute bound (each row costs)."""
    ratio = roofline.t_ms(device, shape, 8, context) / roofline.t_ms(device, shape, 1, context)
    w = device.weight_bytes or shape.params * roofline.BYTES_PER_PARAM.get(device.weights, 2.0)
    mem = roofline.bytes_read(shape, w, 1, context) / (device.bandwidth_gb_s * 1e9)
    per_row = shape.flops(1, context) / (device.peak(1) * 1e12)
    rows = mem / per_row if per_row else float("inf")
    if ratio <= 1.1:
        return (f"bandwidth bound: reading the weights ({w / 1e9:.2f} GB) takes {mem * 1e3:.2f} ms, the arithmetic of "
                f"one row {per_row * 1e3:.3f} ms, so about {rows:.0f} rows verify for the price of one and a draft "
                f"costs little more than its own step (T(8)/T(1) = {ratio:.2f})")
    return (f"compute bound past {max(1, int(rows))} row(s): one row's arithmetic takes {per_row * 1e3:.1f} ms against "
            f"{mem * 1e3:.1f} ms of weight reads, so each verified row adds to the step (T(8)/T(1) = {ratio:.2f}) "
            "and only a long accepted run pays")


def measured_why(profile) -> str:
    """This machine's sentence, from its measured curve (the roofline may miss a backend's kernels)."""
    ns = sorted(profile.target_ms)
    top = max(n for n in ns if n <= 8)
    ratio = profile.T(top) / profile.T(1)
    extra = max(0.0, (ratio - 1) / (top - 1)) if top > 1 else 0.0  # a verified row's average cost, in steps
    return (f"measured: a verified row adds {extra:.0%} of a step on average up to {top} rows (T({top})/T(1) = "
            f"{ratio:.2f}), so " + (
                "verification is nearly free and a good draft pays" if extra < 0.15 else
                "each verified row costs real time and only a long accepted run of cheap drafts pays" if extra < 0.6
                else "a verified row costs most of a step and no draft can pay back its own cost"))


def row(device: Device, shape: Shape, draft_shape: Shape, profile, acceptance: Acceptance, methods: list[str],
        context: int = CONTEXT, measured: bool = False, max_tokens: int = MAX_DRAFT_TOKENS) -> dict:
    """One device's row: T ratios, plain tok/s, each method's best γ and predicted speedup, utilization."""
    if measured:
        target_ms, label = (lambda n: profile.T(n, context)), "measured"
        draft_model_ms = profile.draft_ms.get("draft")
    else:
        target_ms = lambda n: roofline.t_ms(device, shape, n, context)  # noqa: E731
        label = "roofline"
        draft_dev = replace(device, weight_bytes=None)  # the draft's bytes from its own shape, not the target's
        draft_model_ms = roofline.t_ms(draft_dev, draft_shape, 1, context)
    t1 = target_ms(1)
    speedups, gammas, draft_costs = {}, {}, {}
    for m in methods:
        per = acceptance.per_position.get(m)
        if not per or m not in profile.draft_ms and m != "draft":
            continue
        if m == "draft":
            d = draft_model_ms
        elif m == "lookup":
            d = profile.draft_ms[m]
        else:  # a head or a layer subset: the share of a target step it costs here
            d = profile.draft_ms[m] / profile.T(1) * t1
        g, x = best(per, target_ms, d, tree_size(m), max_tokens)
        speedups[m], gammas[m], draft_costs[m] = round(x, 3), g, d
    w = device.weight_bytes or shape.params * roofline.BYTES_PER_PARAM.get(device.weights, 2.0)
    plain_util = roofline.bytes_read(shape, w, 1, context) / (t1 / 1e3) / (device.bandwidth_gb_s * 1e9)
    top = max(speedups, key=speedups.get, default=None)
    spec_util = None
    if top is not None and gammas[top]:
        g = gammas[top]
        read = roofline.bytes_read(shape, w, g + 1, context)
        if top == "draft":
            dw = draft_shape.params * roofline.BYTES_PER_PARAM.get(device.weights, 1.0)
            read += g * roofline.bytes_read(draft_shape, dw, 1, context)
        spec_util = read / ((g * draft_costs[top] + target_ms(g + 1)) / 1e3) / (device.bandwidth_gb_s * 1e9)
    return {
        "name": device.name, "kind": label, "bandwidth_gb_s": device.bandwidth_gb_s,
        "peak_tflops": device.peak_tflops, "source": device.source, "estimate": device.estimate,
        "note": device.note, "weights": device.weights, "overhead_ms": round(device.overhead_ms, 3),
        "t1_ms": round(t1, 3),
        "t_ratio": measured_ratios(profile) if measured else {str(n): round(target_ms(n) / t1, 3) for n in SIZES},
        "peak_by_rows": {str(n): v for n, v in sorted((device.peak_by_rows or {}).items())},
        "plain_tokens_per_s": round(1e3 / t1, 2),
        "predicted_speedup": speedups, "best_gamma": gammas,
        "utilization": {"plain": round(plain_util, 3), "speculative": spec_util and round(spec_util, 3),
                        "method": top},
        "why": measured_why(profile) if measured else why(device, shape, context),
    }


def whatif(profile, shape: Shape, draft_shape: Shape, acceptance: Acceptance, methods: list[str] | None = None,
           context: int = CONTEXT, max_verify_tokens: int | None = None) -> dict:
    """This machine (measured), then the catalogue (roofline); `this_machine` compares the two curves here."""
    methods = methods or [m for m in REGISTRY if m != "ar"]
    here = roofline.this_machine(profile, shape)
    cap = min(MAX_DRAFT_TOKENS, max_verify_tokens - 1) if max_verify_tokens else MAX_DRAFT_TOKENS
    measured = measured_ratios(profile)
    modelled = roofline.t_ratio(here, shape, [int(n) for n in measured], PROMPT_TOKENS)  # where the profile timed
    rows = [row(here, shape, draft_shape, profile, acceptance, methods, context, measured=True, max_tokens=cap)]
    rows += [row(d, shape, draft_shape, profile, acceptance, methods, context) for d in roofline.CATALOGUE]
    return {
        "devices": rows,
        "this_machine": {
            "name": here.name, "target_repr": profile.target_repr, "isa": profile.isa,
            "measured_t_ratio": measured, "roofline_t_ratio": modelled,
            "error_pct": {n: round((modelled[n] / measured[n] - 1) * 100, 1) for n in measured},
            "calibrated_overhead_ms": round(here.overhead_ms, 2), "bandwidth_gb_s": here.bandwidth_gb_s,
            "effective_peak_tflops": here.peak_tflops, "source": here.source,
            "probe_tflops": {str(n): v for n, v in sorted((here.peak_by_rows or {}).items())},
            "context_growth": context_growth(profile, here, shape),
        },
        "acceptance": {"source": acceptance.source, "per_position": acceptance.per_position,
                       "measured_speedup": acceptance.measured_speedup},
        "context_tokens": context,
        "model": {"target_params": shape.params, "draft_params": draft_shape.params},
        "formula": "T(n) = overhead + max(bytes read / bandwidth, FLOPs(n) / peak); speedup = E[tokens/round] x T(1) "
                   "/ (gamma x T_draft + T(gamma + 1)) at the best gamma",
    }


def measured_ratios(profile) -> dict[str, float]:
    """T(n)/T(1) where the profile timed n (SIZES): verify forwards, and llama.cpp's forwards past its exact batch,
    timed for this check only."""
    timed = profile.timed_ms
    return {str(n): round(timed[n] / timed[1], 3) for n in SIZES if n in timed}


def context_growth(profile, here: Device, shape: Shape) -> dict:
    """T(n) after LONG_CONTEXT cached tokens over T(n) after the profile's prompt, measured and roofline (its KV-read
    and attention terms), for each n measured at both."""
    from_len, to_len = PROMPT_TOKENS, LONG_CONTEXT
    return {str(n): {"measured": round(profile.long_context_ms[n] / profile.target_ms[n], 3),
                     "roofline": round(roofline.t_ms(here, shape, n, to_len) / roofline.t_ms(here, shape, n, from_len),
                                       3)}
            for n in sorted(profile.long_context_ms) if n in profile.target_ms} | {"contexts": [from_len, to_len]}


def table(report: dict) -> str:
    methods = sorted({m for r in report["devices"] for m in r["predicted_speedup"]},
                     key=lambda m: list(REGISTRY).index(m))
    head = ("| device | kind | GB/s | TFLOPS | T(8)/T(1) | plain tok/s | " + " | ".join(f"{m} (γ)" for m in methods)
            + " | utilization plain → spec |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in report["devices"]:
        est = " (est.)" if r["estimate"] else ""
        cells = [f"{r['predicted_speedup'][m]:.2f}× ({r['best_gamma'][m]})" if m in r["predicted_speedup"] else "–"
                 for m in methods]
        u = r["utilization"]
        spec = f"{u['speculative']:.0%} ({u['method']})" if u["speculative"] else "–"
        t8 = r["t_ratio"].get("8")
        lines.append(f"| {r['name']}{est} | {r['kind']} | {r['bandwidth_gb_s']:g} | {r['peak_tflops']:g} | "
                     f"{'–' if t8 is None else f'{t8:.2f}'} | {r['plain_tokens_per_s']:.1f} | " + " | ".join(cells)
                     + f" | {u['plain']:.0%} → {spec} |")
    return "\n".join(lines)


def check_lines(report: dict) -> list[str]:
    t = report["this_machine"]
    pairs = ", ".join(f"T({n})/T(1) measured {t['measured_t_ratio'][n]:.2f} vs roofline {t['roofline_t_ratio'][n]:.2f} "
                      f"({t['error_pct'][n]:+.0f}%)" for n in t["measured_t_ratio"])
    return [f"this machine ({t['target_repr']}, {t['isa']}): {pairs}; overhead calibrated from T(1): "
            f"{t['calibrated_overhead_ms']:.1f} ms; {t['source']}",
            f"acceptance: {report['acceptance']['source']}; context {report['context_tokens']} tokens"] + (
        [f"T(n) after {t['context_growth']['contexts'][1]} cached tokens over after {t['context_growth']['contexts'][0]}: "
         + ", ".join(f"n={n} measured {v['measured']:.2f}× vs roofline {v['roofline']:.2f}×"
                     for n, v in t["context_growth"].items() if n != "contexts")]
        if len(t["context_growth"]) > 1 else [])
