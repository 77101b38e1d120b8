"""Benchmark output: a Markdown table for the terminal/README, the JSON file, and a Plotly HTML report."""
from __future__ import annotations

import json
from pathlib import Path

from ..methods import REGISTRY
from .aggregate import OTHER_WEIGHTS, MethodSummary, RunRecord

# (ours, theirs): each method's equivalent elsewhere (the registry's peers), plain decoding's, and our two fastest CPU
# methods against llama.cpp's plain decoding (what a CPU user would otherwise run)
PEERS = tuple((name, peer) for name, spec in REGISTRY.items() for peer in spec.peers) + (
    ("ar", "hf-ar"), ("ar", "llamacpp-ar"), ("draft", "llamacpp-ar"), ("lookup", "llamacpp-ar"))


def _f(value, fmt: str = ".2f", suffix: str = "") -> str:
    return "–" if value is None else f"{value:{fmt}}{suffix}"


def table(rows: list[MethodSummary]) -> str:
    head = ("| method | tokens | tok/s | speedup vs ar | decode speedup | predicted | bound (Leviathan) "
            "| bound incl. verify cost | α | τ | c | fwd "
            "| draft s | verify s | overhead | peak RSS | greedy = ar |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        same = "other weights" if r.method in OTHER_WEIGHTS else "–" if not r.compared else (f"✗ {r.mismatch_count} of {r.compared}" if r.mismatches else "✓")
        lines.append(
            f"| {r.method} | {r.tokens} | {r.tokens_per_second:.2f} | {_f(r.speedup, '.2f', '×')} "
            f"| {_f(r.decode_speedup, '.2f', '×')} | {_f(r.predicted_speedup, '.2f', '×')} "
            f"| {_f(r.bound, '.2f', '×')} | {_f(r.bound_with_verify, '.2f', '×')} | {_f(r.alpha)} | {_f(r.tau)} "
            f"| {_f(r.cost_ratio)} | {_f(r.target_forwards, 'd')} | {_f(r.draft_seconds, '.1f')} | {_f(r.verify_seconds, '.1f')} "
            f"| {r.overhead * 100:.1f}% | {r.peak_rss_mb / 1024:.1f} GiB | {same} |"
        )
    return "\n".join(lines)


def peer_lines(rows: list[MethodSummary]) -> list[str]:
    tps = {r.method: r.tokens_per_second for r in rows}
    return [f"{ours} vs {theirs}: {tps[ours] / tps[theirs]:.2f}×" for ours, theirs in PEERS
            if ours in tps and theirs in tps and tps[theirs] > 0]


def to_json(meta: dict, rows: list[MethodSummary], records: list[RunRecord]) -> dict:
    return {"meta": meta, "summary": [r.to_dict() for r in rows], "peers": peer_lines(rows),
            "runs": [r.to_dict() for r in records]}


def write_plot(path: Path, meta: dict, rows: list[MethodSummary], records: list[RunRecord]) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [r.method for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tokens/s (all prompts; label: speedup vs ar)",
                                                        "tokens/s per prompt"))
    fig.add_bar(x=names, y=[r.tokens_per_second for r in rows], row=1, col=1, name="tokens/s",
                text=[_f(r.speedup, ".2f", "×") for r in rows], textposition="outside", marker_color="#2563eb")
    bounds = [r for r in rows if r.bound is not None and r.speedup is not None]
    ar = next((r.tokens_per_second for r in rows if r.method == "ar"), None)
    if bounds and ar:
        fig.add_scatter(x=[r.method for r in bounds], y=[r.bound * ar for r in bounds], mode="markers", row=1, col=1,
                        name="Leviathan bound × ar tok/s", marker=dict(symbol="diamond", size=12, color="#f59e0b"))
    for method in names:
        runs = [r for r in records if r.method == method]
        fig.add_scatter(x=[r.prompt_id for r in runs], y=[len(r.token_ids) / r.seconds for r in runs],
                        mode="markers+lines", name=method, row=1, col=2)
    fig.update_layout(title=f"specdec bench — {meta.get('command', '')}", template="plotly_white", height=560)
    fig.write_html(str(path), include_plotlyjs=True)


def write_json(path: Path, data: dict) -> None:
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
