"""Compare: plain decoding, then every chosen method, one after another on the same prompt (never at once: on a shared
CPU they would slow each other), each checked against plain decoding and measured with the one comparison model."""
from __future__ import annotations

import dataclasses
import html
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go

from specdec_core.config import ConfigError
from specdec_core.engine import SpeculativeEngine
from specdec_core.methods import REFERENCE, REGISTRY
from specdec_core.metrics import compare, compute_stats
from specdec_core.profile import cost

from . import figures, race
from .render import message_html, round_pieces, tokens_html
from .tokens import Detokenizer


@dataclass
class Lane:
    """One method's run (or its error)."""

    method: str
    label: str
    rounds: list = field(default_factory=list)
    pieces: list = field(default_factory=list)
    error: str | None = None
    done: bool = False

    @property
    def token_ids(self) -> list[int]:
        return [t for r in self.rounds for t in r.emitted]


@dataclass
class Comparing:
    request: race.RaceRequest  # its method is unused: every lane has its own
    lanes: list[Lane]
    device: str
    profile: object | None = None

    @property
    def reference(self) -> Lane:
        return self.lanes[0]

    def row(self, lane: Lane) -> dict:
        ref = self.reference
        s = compute_stats(lane.rounds)
        tree = lane.method in REGISTRY and REGISTRY[lane.method].tree
        c = compare([s], [compute_stats(ref.rounds)] if ref.done else [], tree, cost(self.profile, lane.method))
        same = None if not (lane.done and ref.done) or lane is ref else lane.token_ids == ref.token_ids
        return {"method": lane.method, "tokens_per_second": s.tokens_per_second or None,
                "speedup": 1.0 if lane is ref and lane.done else c.decode_speedup, "alpha": c.alpha, "tau": c.tau,
                "predicted_speedup": c.predicted, "identical": same, "error": lane.error, "tokens": s.new_tokens}

    def summary(self) -> dict:
        return {"device": self.device, "timing": "each method timed on its own, one after the other, same prompt; "
                "tokens/s is decoding speed; the prompt pass ran once and every lane started from its own copy of that cache", "methods": [self.row(x) for x in self.lanes]}

    @staticmethod
    def fastest(rows: list[dict]) -> dict | None:
        """The row with the highest speedup among those that ran and match plain decoding."""
        ok = [r for r in rows if r["speedup"] and r["identical"] is not False]
        return max(ok, key=lambda r: r["speedup"]) if ok else None


def parse_methods(methods) -> list[str]:
    chosen = [m for m in (methods or []) if m in REGISTRY]
    if not chosen:
        raise ConfigError(f"Pick at least one method to compare ({', '.join(REGISTRY)}).")
    return chosen


def run_compare(models, request: race.RaceRequest, methods: list[str], profile=None):
    """Yield (comparing, status) after every round of every lane; a lane that fails records its error and the rest
    go on. The target's prompt pass runs once: every lane starts from its own copy of the same cache."""
    prompt_ids, _ = race.prepare(models, dataclasses.replace(request, method=methods[0]), profile)
    lanes = [Lane(REFERENCE, "plain autoregressive")] + [Lane(m, REGISTRY[m].label) for m in methods]
    state = Comparing(request, lanes, models.device_label, profile)
    with race.RUNNING:
        yield state, "Prompt pass (once, shared by every lane)…"
        prefix = SpeculativeEngine(models.target, None, models.eos).prefill(prompt_ids)
        for lane in lanes:
            detok = Detokenizer(models.tokenizer)
            try:
                engine = (SpeculativeEngine(models.target, None, models.eos) if lane.method == REFERENCE else
                          race.prepare(models, dataclasses.replace(request, method=lane.method), profile)[1])
                for r in engine.generate(prompt_ids, request.config, prefix):
                    lane.rounds.append(r)
                    lane.pieces.extend(round_pieces(r, detok))
                    yield state, f"Running {lane.label}… {len(lane.token_ids)} tokens"
            except ConfigError as e:
                lane.error = str(e)
            except Exception as e:  # noqa: BLE001 - one failed method must not stop the others; shown in its row
                lane.error = f"{type(e).__name__}: {e}"
            lane.done = True
            yield state, f"{lane.label}: {'failed' if lane.error else 'done'}"
    yield state, "Done."


def _f(v, spec="{:.2f}"):
    return "—" if v is None else spec.format(v)


def table_html(state: Comparing) -> str:
    head = ("<tr><th>method</th><th>tok/s</th><th>speedup</th><th>α</th><th>τ</th><th>predicted</th>"
            "<th>identical</th></tr>")
    rows = []
    for r in state.summary()["methods"]:
        same = "—" if r["identical"] is None else "✓" if r["identical"] else "✗"
        if r["error"]:
            rows.append(f"<tr class='rej'><td>{html.escape(r['method'])}</td><td colspan=6>failed: "
                        f"{html.escape(r['error'][:200])}</td></tr>")
            continue
        rows.append(f"<tr><td>{html.escape(r['method'])}</td><td>{_f(r['tokens_per_second'])}</td>"
                    f"<td>{_f(r['speedup'], '{:.2f}×')}</td><td>{_f(r['alpha'])}</td><td>{_f(r['tau'])}</td>"
                    f"<td>{_f(r['predicted_speedup'], '{:.2f}×')}</td><td>{same}</td></tr>")
    return f"<table class='steps'>{head}{''.join(rows)}</table>"


def outputs_html(state: Comparing) -> str:
    parts = [f"<div class='cmp-row'><b>{html.escape(x.label)}</b>"
             f"{tokens_html(x.pieces, False, 'failed: see the table' if x.error else 'waiting…')}</div>"
             for x in state.lanes]
    return "".join(parts)


def figure(state: Comparing) -> go.Figure:
    fig = go.Figure()
    for lane in state.lanes:
        if lane.rounds:
            x, y = figures.progress_points(lane.rounds)
            fig.add_trace(go.Scatter(x=x, y=y, name=lane.label, mode="lines", line=dict(width=3, shape="hv")))
    fig.update_layout(title="Every method against plain decoding: tokens over time (each timed on its own)",
                      xaxis_title="seconds since that run started", yaxis_title="tokens generated",
                      **{**figures.LAYOUT, "height": 440})
    return fig


def verdict_html(state: Comparing) -> str:
    row = Comparing.fastest(state.summary()["methods"])
    wrong = [x.method for x in state.lanes[1:] if x.done and not x.error and x.token_ids != state.reference.token_ids]
    greedy = state.request.config.sampling.greedy
    if greedy and wrong:
        return message_html(f"✗ Differs from plain greedy decoding: {', '.join(wrong)}. Please report it.", "error")
    if row is None or row["method"] == REFERENCE or row["speedup"] <= 1.0:
        return message_html("Plain decoding was fastest on this prompt on this machine: no method paid here.", "warn")
    same = " Every output is identical to plain greedy decoding." if greedy else ""
    return message_html(f"Fastest here: {REGISTRY[row['method']].label}, {row['speedup']:.2f}× plain decoding.{same}",
                        "ok")


def downloads(state: Comparing) -> tuple[str, str]:
    out = Path(tempfile.mkdtemp(prefix="specdec-compare-"))
    data = {"summary": state.summary(), "lanes": {x.method: [r.to_dict() for r in x.rounds] for x in state.lanes}}
    (out / "specdec-compare.json").write_text(json.dumps(data, indent=1))
    (out / "specdec-compare.html").write_text(
        "<html><head><meta charset='utf-8'><title>specdec compare</title></head><body>"
        + table_html(state) + figure(state).to_html(full_html=False, include_plotlyjs="inline") + "</body></html>")
    return str(out / "specdec-compare.json"), str(out / "specdec-compare.html")
