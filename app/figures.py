"""Plotly figures, each a pure function of trace data or numbers."""
from __future__ import annotations

import plotly.graph_objects as go

from specdec_core.core.metrics import expected_tokens_per_round, speedup_bound
from specdec_core.core.trace import Round, TopK

COLORS = {
    "spec": "#2563eb", "ar": "#6b7280", "draft": "#16a34a", "verify": "#f59e0b", "p": "#dc2626", "q": "#2563eb",
    "empirical": "#111827", "residual": "#9333ea",
}
LAYOUT = dict(template="plotly_white", margin=dict(l=55, r=20, t=50, b=100), height=380,
              legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0.0),
              font=dict(size=13))


def progress_points(rounds: list[Round]) -> tuple[list[float], list[int]]:
    """(seconds since the run started, tokens generated) after the prompt pass and after each round."""
    t, n = 0.0, 0
    xs, ys = [0.0], [0]
    for r in rounds:
        if r.prefill_seconds:
            t += r.prefill_seconds
            xs.append(t)
            ys.append(0)
        t += r.draft_seconds + r.verify_seconds
        n += len(r.emitted)
        xs.append(t)
        ys.append(n)
    return xs, ys


def race_figure(spec: list[Round], ar: list[Round], spec_label: str = "speculative") -> go.Figure:
    fig = go.Figure()
    for rounds, name, color in ((spec, spec_label, COLORS["spec"]), (ar, "plain autoregressive", COLORS["ar"])):
        if rounds:
            x, y = progress_points(rounds)
            fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines+markers", line=dict(color=color, width=3,
                                     shape="hv"), marker=dict(size=5)))
    fig.update_layout(title="The race: tokens generated over time", xaxis_title="seconds since the run started",
                      yaxis_title="tokens generated", **{**LAYOUT, "height": 420})
    return fig


def time_split_figure(rounds: list[Round]) -> go.Figure:
    idx = [r.index for r in rounds]
    fig = go.Figure([
        go.Bar(x=idx, y=[r.draft_seconds for r in rounds], name="draft", marker_color=COLORS["draft"]),
        go.Bar(x=idx, y=[r.verify_seconds for r in rounds], name="verify (one target forward)",
               marker_color=COLORS["verify"]),
    ])
    fig.update_layout(barmode="stack", title="Where each round's time goes", xaxis_title="round",
                      yaxis_title="seconds", **LAYOUT)
    return fig


def accepted_histogram(rounds: list[Round]) -> go.Figure:
    top = max((r.depth for r in rounds), default=0)
    counts = [0] * (top + 1)
    for r in rounds:
        if r.num_drafted:
            counts[r.num_accepted] += 1
    fig = go.Figure(go.Bar(x=list(range(top + 1)), y=counts, marker_color=COLORS["spec"],
                           hovertemplate="%{y} rounds accepted %{x} draft tokens<extra></extra>"))
    fig.update_layout(title="Accepted draft tokens per round", xaxis_title="accepted draft tokens",
                      yaxis_title="rounds", xaxis=dict(dtick=1), **LAYOUT)
    return fig


def distribution_figure(title: str, series: list[tuple[str, TopK | dict[int, float], str]], label) -> go.Figure:
    """Grouped bars over the union of the tokens named by each series. `label(token_id) -> str`."""
    maps = [(name, dict(zip(d.token_ids, d.probs)) if isinstance(d, TopK) else d, color) for name, d, color in series]
    order: list[int] = []
    for _, m, _ in maps:
        for t in sorted(m, key=m.get, reverse=True):
            if t not in order:
                order.append(t)
    order = order[:15]
    names = [f"{label(t)!r}" for t in order]
    fig = go.Figure([go.Bar(x=names, y=[m.get(t, 0.0) for t in order], name=name, marker_color=color)
                     for name, m, color in maps])
    fig.update_layout(barmode="group", title=title, yaxis_title="probability", **LAYOUT)
    return fig


def gamma_curves(gamma: int, value, alpha_max: float) -> go.Figure:
    """value(alpha, g) over alpha in [0, alpha_max] for g in {1, 2, 4, 8, gamma}; the chosen gamma drawn bold."""
    alphas = [i / 100 for i in range(0, round(alpha_max * 100) + 1)]
    fig = go.Figure()
    for g in sorted({1, 2, 4, 8, gamma}):
        fig.add_trace(go.Scatter(x=alphas, y=[value(a, g) for a in alphas], name=f"γ = {g}",
                                 line=dict(width=4 if g == gamma else 1.5)))
    return fig


def theory_figure(gamma: int, cost: float, measured: dict | None = None) -> go.Figure:
    """Predicted speedup vs acceptance rate for several draft lengths at cost ratio c; the last run on top."""
    fig = gamma_curves(gamma, lambda a, g: speedup_bound(a, g, cost), alpha_max=0.99)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#9ca3af", annotation_text="no speedup")
    if measured and measured.get("alpha") is not None:
        a, g, c = measured["alpha"], measured["gamma"], measured["cost"]
        fig.add_trace(go.Scatter(x=[a], y=[speedup_bound(a, g, c)], mode="markers", name="predicted for last run",
                                 marker=dict(size=14, symbol="diamond-open", color="#111827", line=dict(width=3))))
        if measured.get("speedup") is not None:
            fig.add_trace(go.Scatter(x=[a], y=[measured["speedup"]], mode="markers", name="measured last run",
                                     marker=dict(size=14, symbol="star", color="#dc2626")))
    fig.update_layout(title=f"Speedup (1−α^(γ+1)) / ((1−α)(γc+1)) at c = {cost:.2f}", xaxis_title="acceptance rate α",
                      yaxis_title="expected speedup ×", **LAYOUT)
    return fig


def tokens_per_round_figure(gamma: int) -> go.Figure:
    fig = gamma_curves(gamma, expected_tokens_per_round, alpha_max=1.0)
    fig.update_layout(title="Expected tokens per round (1−α^(γ+1)) / (1−α)", xaxis_title="acceptance rate α",
                      yaxis_title="tokens per target forward", **LAYOUT)
    return fig


DEVICE_COLORS = ("#16a34a", "#0891b2", "#7c3aed", "#db2777", "#ea580c", "#ca8a04", "#64748b")


def cost_curve_figure(profile, roofline: dict[str, dict[int, float]] | None = None) -> go.Figure:
    """This machine's T(n) / T(1) for a target forward of n tokens, beside the 'free verification' the textbook
    formula assumes (1 for every n), 'no batching at all' (n) and, when given, each device's roofline T(n) / T(1)
    (device name -> {n: ratio}; thin lines: a model, not a measurement)."""
    timed = profile.timed_ms  # llama.cpp: its forwards past the exact batch too, timed only
    ns = sorted(timed)
    t1 = profile.target_ms[1]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ns, y=[1.0] * len(ns), name="free verification (the formula's assumption)",
                             line=dict(dash="dot", color="#9ca3af")))
    fig.add_trace(go.Scatter(x=ns, y=ns, name="n separate steps", line=dict(dash="dash", color="#d1d5db")))
    fig.add_trace(go.Scatter(x=ns, y=[timed[n] / t1 for n in ns], mode="lines+markers",
                             name=f"measured here ({profile.isa}, {profile.target_repr})",
                             text=[f"{timed[n]:.0f} ms" + ("" if n in profile.target_ms else
                                                          " (timed only: past the exact verify batch)") for n in ns],
                             marker=dict(symbol=["circle" if n in profile.target_ms else "circle-open" for n in ns],
                                         size=9), line=dict(width=4, color="#2563eb")))
    for i, (name, ratios) in enumerate((roofline or {}).items()):
        xs = sorted(ratios)
        here = name == "this machine"
        fig.add_trace(go.Scatter(x=xs, y=[ratios[n] for n in xs], mode="lines", name=f"{name} (roofline)",
                                 line=dict(width=2, dash="dash" if here else "solid",
                                           color="#2563eb" if here else DEVICE_COLORS[i % len(DEVICE_COLORS)])))
    fig.update_layout(title=f"Cost of verifying n tokens in one forward, relative to one step (T(1) = {t1:.0f} ms)",
                      xaxis_title="tokens in the forward (n)", yaxis_title="T(n) / T(1)", **LAYOUT)
    return fig


def device_speedup_figure(rows: list[dict], method: str, measured: float | None) -> go.Figure:
    """Predicted speedup of `method` on each device (whatif rows: this machine's from its measured costs, the others'
    from their roofline), all with this race's acceptance; the stopwatch's speedup here as a star."""
    names = [r["name"] for r in rows]
    values = [r["predicted_speedup"].get(method) for r in rows]
    colors = ["#2563eb" if r["kind"] == "measured" else "#94a3b8" if r.get("estimate") else "#64748b" for r in rows]
    text = [("—" if v is None else f"{v:.2f}× (γ {r['best_gamma'][method]})") for v, r in zip(values, rows)]
    fig = go.Figure(go.Bar(x=names, y=[v or 0 for v in values], marker_color=colors, text=text,
                           textposition="outside", name="predicted (best γ there)"))
    if measured is not None:
        fig.add_trace(go.Scatter(x=[names[0]], y=[measured], mode="markers", name=f"measured here: {measured:.2f}×",
                                 marker=dict(symbol="star", size=18, color="#f59e0b", line=dict(width=1, color="#111"))))
    fig.add_hline(y=1.0, line=dict(dash="dot", color="#9ca3af"))
    top = max([v or 0 for v in values] + [measured or 0, 1.0])
    fig.update_layout(title=f"{method}: this race's acceptance on each device (light grey: datasheet estimate)",
                      yaxis_title="predicted decode speedup", yaxis_range=[0, top * 1.2], **LAYOUT)
    return fig
