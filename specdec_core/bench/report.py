"""Benchmark output: a Markdown table for the terminal/README, the JSON file, and a Plotly HTML report."""
from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec_core.bench.aggregate import OTHER_WEIGHTS, peer_mismatches
from specdec_core.core.run import Row, Run
from specdec_core.methods.registry import REGISTRY

# (ours, theirs): each method's equivalent elsewhere (the registry's peers), plain decoding's, and our two fastest CPU
# methods against llama.cpp's plain decoding (what a CPU user would otherwise run)
PEERS = tuple((name, peer) for name, spec in REGISTRY.items() for peer in spec.peers) + (
    ("ar", "hf-ar"), ("ar", "llamacpp-ar"), ("draft", "llamacpp-ar"), ("lookup", "llamacpp-ar"))
# other libraries' own speculative decoding (transformers' assisted generation and lookup, llama-cpp-python's prompt
# lookup): their drafts are accepted by their own code, not by this engine's verification
UNVERIFIED = tuple(peer for name, spec in REGISTRY.items() if name != "ar" for peer in spec.peers)


def _f(value, fmt: str = ".2f", suffix: str = "") -> str:
    return "–" if value is None else f"{value:{fmt}}{suffix}"


def table(rows: list[Row]) -> str:
    head = ("| method | tokens | tok/s (end to end) | speedup vs ar (end to end) | decode speedup | predicted | bound (Leviathan) "
            "| bound incl. verify cost | α | τ | c | fwd "
            "| draft s | verify s | overhead | peak RSS | greedy = ar |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        differs = f"{'differs (peer, not bit-exact)' if r.peer else '✗'} {r.mismatch_count} of {r.compared}"
        same = ("other weights" if r.method in OTHER_WEIGHTS and not r.compared else "–" if not r.compared else
                differs if r.mismatches else "✓")
        name = f"{r.method} (not verified by us)" if r.method in UNVERIFIED else r.method
        lines.append(
            f"| {name} | {r.tokens} | {r.end_to_end_tokens_per_second:.2f} | {_f(r.end_to_end_speedup, '.2f', '×')} "
            f"| {_f(r.decode_speedup, '.2f', '×')} | {_f(r.predicted_speedup, '.2f', '×')} "
            f"| {_f(r.bound, '.2f', '×')} | {_f(r.bound_with_verify, '.2f', '×')} | {_f(r.alpha)} | {_f(r.tau)} "
            f"| {_f(r.cost_ratio)} | {_f(r.target_forwards, 'd')} | {_f(r.draft_seconds, '.1f')} | {_f(r.verify_seconds, '.1f')} "
            f"| {_f(r.overhead and r.overhead * 100, '.1f', '%')} | {_f(r.peak_rss_mb and r.peak_rss_mb / 1024, '.1f', ' GiB')} "
            f"| {same} |"
        )
    return "\n".join(lines)


def peer_lines(rows: list[Row]) -> list[str]:
    tps = {r.method: r.end_to_end_tokens_per_second for r in rows}
    return [f"{ours} vs {theirs}: {tps[ours] / tps[theirs]:.2f}×" for ours, theirs in PEERS
            if ours in tps and theirs in tps and tps[theirs] > 0]


CATEGORY_FIELDS = ("end_to_end_tokens_per_second", "end_to_end_speedup", "decode_speedup", "tau", "alpha")


def category_table(cats: dict[str, list[Row]]) -> str:
    """Spec-Bench's leaderboard view: per category and method, speedup over ar, τ, α and tokens/s."""
    lines = ["| category | method | tok/s (end to end) | speedup vs ar (end to end) | decode speedup | τ | α |", "|---|---|---|---|---|---|---|"]
    for cat, rows in cats.items():
        for r in rows:
            lines.append(f"| {cat} | {r.method} | {r.end_to_end_tokens_per_second:.2f} | {_f(r.end_to_end_speedup, '.2f', '×')} | "
                         f"{_f(r.decode_speedup, '.2f', '×')} | {_f(r.tau)} | {_f(r.alpha)} |")
    return "\n".join(lines)


def to_json(meta: dict, rows: list[Row], records: list[Run],
            cats: dict[str, list[Row]] | None = None) -> dict:
    return {"meta": meta, "summary": [r.to_dict() for r in rows], "peers": peer_lines(rows),
            "peer_mismatches": peer_mismatches(rows),  # other libraries' differences from ar: findings, not failures
            "by_category": {c: {r.method: {k: getattr(r, k) for k in CATEGORY_FIELDS} for r in rs}
                            for c, rs in (cats or {}).items()},
            "runs": [r.to_dict() for r in records]}


def write_plot(path: Path, meta: dict, rows: list[Row], records: list[Run],
               cats: dict[str, list[Row]] | None = None) -> None:
    names = [r.method for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tokens/s (all prompts; label: speedup vs ar)",
                                                        "tokens/s per prompt"))
    fig.add_bar(x=names, y=[r.end_to_end_tokens_per_second for r in rows], row=1, col=1, name="tokens/s",
                text=[_f(r.end_to_end_speedup, ".2f", "×") for r in rows], textposition="outside", marker_color="#2563eb")
    bounds = [r for r in rows if r.bound is not None and r.end_to_end_speedup is not None]
    ar = next((r.end_to_end_tokens_per_second for r in rows if r.method == "ar"), None)
    if bounds and ar:
        fig.add_scatter(x=[r.method for r in bounds], y=[r.bound * ar for r in bounds], mode="markers", row=1, col=1,
                        name="Leviathan bound × ar tok/s", marker=dict(symbol="diamond", size=12, color="#f59e0b"))
    for method in names:
        runs = [r for r in records if r.method == method]
        fig.add_scatter(x=[r.prompt_id for r in runs], y=[len(r.token_ids) / r.seconds for r in runs],
                        mode="markers+lines", name=method, row=1, col=2)
    fig.update_layout(title=f"specdec bench — {meta.get('command', '')}", template="plotly_white", height=560)
    html = fig.to_html(full_html=False, include_plotlyjs=True)
    if cats:
        speedups = {c: {r.method: r.end_to_end_speedup for r in rs} for c, rs in cats.items()}
        html += category_figure(speedups).to_html(full_html=False, include_plotlyjs=False)
    Path(path).write_text(f"<html><head><meta charset='utf-8'><title>specdec bench</title></head><body>{html}"
                          "</body></html>")


def category_figure(speedups: dict[str, dict[str, float | None]], title: str = "Speedup over ar by category"):
    """Speedup over ar by method ({category: {method: speedup}}), one group of bars per category (Spec-Bench's view)."""
    methods = list(dict.fromkeys(m for row in speedups.values() for m, v in row.items() if m != "ar" and v is not None))
    fig = go.Figure()
    for m in methods:
        values = [row.get(m) for row in speedups.values()]
        fig.add_bar(x=list(speedups), y=values, name=m, text=[_f(v, ".2f", "×") for v in values], textposition="outside")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#9ca3af", annotation_text="ar")
    fig.update_layout(title=title, barmode="group", template="plotly_white", height=480, yaxis_title="speedup ×")
    return fig


def write_json(path: Path, data: dict) -> None:
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
