"""Compare: plain decoding, then every chosen method, one after another on the same prompt (never at once: on a shared
CPU they would slow each other), each checked against plain decoding and measured with the one comparison model.
On a suite (one question per Spec-Bench category) it does that prompt by prompt and adds the per-category view. With a
second backend (PyTorch and llama.cpp) each backend runs its own plain decoding and methods on the same prompts, each
method compared with its own backend's plain decoding, and the verdict names the fastest decoding of all."""
from __future__ import annotations

import dataclasses
import html
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go

from specdec_core.backends.choice import display
from specdec_core.bench.prompts import suite
from specdec_core.bench.report import category_figure
from specdec_core.core.config import ConfigError
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.methods.registry import REFERENCE, REGISTRY, is_tree
from specdec_core.core.run import Run, compare
from specdec_core.methods.timing import cost

from . import figures, race
from .render import message_html, round_pieces, tokens_html
from .tokens import Detokenizer

ONE_PROMPT = "the Race tab's prompt"
SUITES = {ONE_PROMPT: None, "specbench-mini: one question per category (6 prompts, first turn)": "specbench-mini"}


@dataclass
class Lane:
    """One method's run on one prompt (or its error)."""

    method: str
    label: str
    backend: str = ""  # what the page calls it (PyTorch, llama.cpp)
    name: str = ""  # the method, with its backend when a comparison runs two (its row's and chart's name)
    rounds: list = field(default_factory=list)
    pieces: list = field(default_factory=list)
    error: str | None = None
    done: bool = False

    @property
    def token_ids(self) -> list[int]:
        return [t for r in self.rounds for t in r.emitted]


@dataclass
class Item:
    """One prompt of a comparison and its lanes: ar first, then each method."""

    id: str
    category: str
    request: race.RaceRequest
    lanes: list[Lane]


@dataclass
class Comparing:
    items: list[Item]
    device: str
    profiles: dict = field(default_factory=dict)  # backend -> its cost profile (None: not measured)
    current: int = 0  # the item running (or the last one)

    @property
    def request(self) -> race.RaceRequest:
        return self.items[0].request

    @property
    def lanes(self) -> list[Lane]:
        """The current prompt's lanes (what the outputs and the chart show)."""
        return self.items[self.current].lanes

    @property
    def names(self) -> list[str]:
        """Every lane's name, in run order: each backend's ar, then its methods."""
        return [x.name for x in self.items[0].lanes]

    @property
    def backends(self) -> list[str]:
        return list(dict.fromkeys(x.backend for x in self.items[0].lanes))

    def row(self, name: str, items: list[Item] | None = None) -> dict:
        """One lane pooled over `items` (all by default), paired prompt by prompt with its own backend's finished ar
        runs: the one comparison Row (core/run.py), with the first error of a failed lane."""
        k = self.names.index(name)
        pairs = [(it, it.lanes[k], next(x for x in it.lanes if x.backend == it.lanes[k].backend
                                        and x.method == REFERENCE)) for it in (items or self.items)]
        method, backend = pairs[0][1].method, pairs[0][1].backend
        profile = self.profiles.get(backend)
        error = next((lane.error for _, lane, _ in pairs if lane.error), None)
        runs = [Run.of(method, [], lane.rounds, prompt_id=it.id) for it, lane, _ in pairs if lane.rounds]
        refs = [Run.of(REFERENCE, [], ref.rounds, prompt_id=it.id) for it, lane, ref in pairs
                if lane.rounds and lane.done and ref.done and not lane.error]
        greedy = self.request.config.sampling.greedy
        row = compare(runs, refs, tree=is_tree(method), cost=cost(profile, method), greedy=greedy,
                      profiled=profile is not None, method=method)
        finished = bool(runs) and all(lane.done for _, lane, _ in pairs if lane.rounds)
        identical = row.identical if refs and method != REFERENCE else None
        decode = row.decode_speedup if method != REFERENCE else (1.0 if finished else None)
        return {**row.to_dict(), "name": name, "backend": backend, "decode_speedup": decode, "identical": identical,
                "error": error}

    def by_category(self) -> dict[str, dict[str, dict]]:
        cats = list(dict.fromkeys(it.category for it in self.items if it.category))
        return {c: {m: self.row(m, [it for it in self.items if it.category == c]) for m in self.names} for c in cats}

    def summary(self) -> dict:
        out = {"device": self.device, "timing": "each method timed on its own, one after the other, same prompt; "
               "tokens/s is decoding speed; the prompt pass ran once per backend and every lane started from its "
               "own copy of that cache; each method is compared with its own backend's ar",
               "backends": self.backends, "prompts": [it.id for it in self.items],
               "methods": [self.row(m) for m in self.names]}
        if len(self.items) > 1:
            out["by_category"] = self.by_category()
        return out

    @staticmethod
    def fastest(rows: list[dict]) -> dict | None:
        """The row with the highest speedup among those that ran and match plain decoding."""
        ok = [r for r in rows if r["decode_speedup"] and r["identical"] is not False]
        return max(ok, key=lambda r: r["decode_speedup"]) if ok else None


def parse_methods(methods) -> list[str]:
    chosen = [m for m in (methods or []) if m in REGISTRY]
    if not chosen:
        raise ConfigError(f"Pick at least one method to compare ({', '.join(REGISTRY)}).")
    return chosen


def items_for(request: race.RaceRequest, choice: str | None, methods: list[str],
              backends: tuple[str, ...] = ("",)) -> list[Item]:
    """The Race tab's prompt, or the first question of each category of a suite (chat, first turn); on each, every
    backend's lanes: its ar, then the methods."""
    if choice not in (None, "", *SUITES):
        raise ConfigError(f"Unknown prompt set {choice!r}; choose one of: {', '.join(SUITES)}.")
    name = SUITES.get(choice or ONE_PROMPT)
    prompts = [("prompt", "", request)]
    if name:
        first = {}
        for p in suite(name):
            first.setdefault(p.category, p)
        prompts = [(p.id, p.category, dataclasses.replace(request, prompt=p.prompt, chat=True))
                   for p in first.values()]
    def lanes():
        two = len(backends) > 1
        return [Lane(m, (REGISTRY[m].label if m != REFERENCE else "plain autoregressive") + (f" · {b}" if two else ""),
                     b, f"{m} · {b}" if two else m) for b in backends for m in (REFERENCE, *methods)]
    return [Item(i, cat, req, lanes()) for i, cat, req in prompts]


def run_compare(models, request: race.RaceRequest, methods: list[str], profile=None, choice: str | None = None,
                others: tuple = ()):
    """Yield (comparing, status) after every round of every lane; a lane that fails records its error and the rest
    go on. The target's prompt pass runs once per prompt and backend: every lane starts from its own copy of its
    backend's cache. `others`: (models, profile) of further backends, whose lanes follow on each prompt."""
    setups = [(models, profile), *others]
    names = tuple(display(m.backend) for m, _ in setups) if others else ("",)
    state = Comparing(items_for(request, choice, methods, names), "; ".join(m.device_label for m, _ in setups),
                      dict(zip(names, (p for _, p in setups))))
    with race.RUNNING:
        for n, item in enumerate(state.items):
            state.current = n
            where = f" ({item.category} {n + 1}/{len(state.items)})" if len(state.items) > 1 else ""
            for (models, profile), backend in zip(setups, names):
                on = f" on {backend}" if backend else ""
                prompt_ids = race.encode(models, item.request)
                yield state, f"Prompt pass{on}{where} (once, shared by every lane)…"
                prefix = SpeculativeEngine(models.target, None, models.eos).prefill(prompt_ids)
                for lane in (x for x in item.lanes if x.backend == backend):
                    yield from _run_lane(models, item.request, lane, prompt_ids, prefix, profile, where, state)
    yield state, "Done."


def _run_lane(models, request, lane: Lane, prompt_ids, prefix, profile, where: str, state):
    detok = Detokenizer(models.tokenizer)
    try:
        engine = (SpeculativeEngine(models.target, None, models.eos) if lane.method == REFERENCE else
                  race.prepare(models, dataclasses.replace(request, method=lane.method), profile)[1])
        for r in engine.generate(prompt_ids, request.config, prefix):
            lane.rounds.append(r)
            lane.pieces.extend(round_pieces(r, detok))
            yield state, f"Running {lane.label}{where}… {len(lane.token_ids)} tokens"
    except ConfigError as e:
        lane.error = str(e)
    except Exception as e:  # noqa: BLE001 - one failed method must not stop the others; shown in its row
        lane.error = f"{type(e).__name__}: {e}"
    lane.done = True
    yield state, f"{lane.label}{where}: {'failed' if lane.error else 'done'}"


def _f(v, spec="{:.2f}"):
    return "—" if v is None else spec.format(v)


def table_html(state: Comparing) -> str:
    head = ("<tr><th>method</th><th>decode tok/s</th><th>decode speedup</th><th>α</th><th>τ</th><th>predicted</th>"
            "<th>identical</th></tr>")
    rows = []
    for r in state.summary()["methods"]:
        same = "—" if r["identical"] is None else "✓" if r["identical"] else "✗"
        if r["error"]:
            rows.append(f"<tr class='rej'><td>{html.escape(r['name'])}</td><td colspan=6>failed: "
                        f"{html.escape(r['error'][:200])}</td></tr>")
            continue
        rows.append(f"<tr><td>{html.escape(r['name'])}</td><td>{_f(r['decode_tokens_per_second'])}</td>"
                    f"<td>{_f(r['decode_speedup'], '{:.2f}×')}</td><td>{_f(r['alpha'])}</td><td>{_f(r['tau'])}</td>"
                    f"<td>{_f(r['predicted_speedup'], '{:.2f}×')}</td><td>{same}</td></tr>")
    pooled = (f"<caption>pooled over {len(state.items)} prompts (decoding tokens/s; speedup over ar on the same "
              f"prompts)</caption>" if len(state.items) > 1 else
              "<caption>speedup: over plain decoding on the same backend</caption>" if len(state.backends) > 1 else "")
    return f"<table class='steps'>{pooled}{head}{''.join(rows)}</table>"


def outputs_html(state: Comparing) -> str:
    item = state.items[state.current]
    title = (f"<div class='cmp-prompt'>{html.escape(item.category)}: {html.escape(item.id)}</div>"
             if len(state.items) > 1 else "")
    parts = [f"<div class='cmp-row'><b>{html.escape(x.label)}</b>"
             f"{tokens_html(x.pieces, False, 'failed: see the table' if x.error else 'waiting…')}</div>"
             for x in state.lanes]
    return title + "".join(parts)


def figure(state: Comparing) -> go.Figure:
    fig = go.Figure()
    for lane in state.lanes:
        if lane.rounds:
            x, y = figures.progress_points(lane.rounds)
            fig.add_trace(go.Scatter(x=x, y=y, name=lane.label, mode="lines", line=dict(width=3, shape="hv")))
    item = state.items[state.current]
    on = f" · {item.category} ({item.id})" if len(state.items) > 1 else ""
    fig.update_layout(title=f"Every method against plain decoding: tokens over time (each timed on its own){on}",
                      xaxis_title="seconds since that run started", yaxis_title="tokens generated",
                      **{**figures.LAYOUT, "height": 440})
    return fig


def category_plot(state: Comparing) -> go.Figure | None:
    """Speedup over ar by method, per category (the Spec-Bench view); None for a single prompt."""
    if len(state.items) < 2:
        return None
    cats = {c: {m: row["decode_speedup"] for m, row in rows.items() if row["method"] != REFERENCE}
            for c, rows in state.by_category().items()}
    return category_figure(cats, "Decoding speedup over ar by category (this machine, one question each)")


def verdict_html(state: Comparing) -> str:
    summary = state.summary()
    row = Comparing.fastest(summary["methods"])
    wrong = [r["method"] for r in summary["methods"] if r["identical"] is False]
    greedy = state.request.config.sampling.greedy
    if greedy and wrong:
        return message_html(f"✗ Differs from plain greedy decoding: {', '.join(wrong)}. Please report it.", "error")
    on = f" over {len(state.items)} prompts" if len(state.items) > 1 else ""
    overall = ""
    if len(state.backends) > 1:  # the fastest decoding of all, whichever backend: what a user should run here
        ran = [r for r in summary["methods"] if r["decode_tokens_per_second"] and r["identical"] is not False]
        best = max(ran, key=lambda r: r["decode_tokens_per_second"], default=None)
        if best is not None:
            what = "plain decoding" if best["method"] == REFERENCE else REGISTRY[best["method"]].label
            overall = (f" Fastest decoding of all: {what} on {best['backend']}, "
                       f"{best['decode_tokens_per_second']:.1f} tok/s.")
    if row is None or row["method"] == REFERENCE or row["decode_speedup"] <= 1.0:
        return message_html(f"Plain decoding was fastest{on or ' on this prompt'} on this machine: no method paid "
                            f"here.{overall}", "warn")
    same = " Every output is identical to plain greedy decoding." if greedy else ""
    where = f" on {row['backend']}" if len(state.backends) > 1 else ""
    return message_html(f"Fastest here{on}: {REGISTRY[row['method']].label}{where}, {row['decode_speedup']:.2f}× plain "
                        f"decoding (decoding speed).{same}{overall}", "ok")


def downloads(state: Comparing) -> tuple[str, str]:
    out = Path(tempfile.mkdtemp(prefix="specdec-compare-"))
    data = {"summary": state.summary(),
            "runs": {it.id: {x.name: [r.to_dict() for r in x.rounds] for x in it.lanes} for it in state.items}}
    (out / "specdec-compare.json").write_text(json.dumps(data, indent=1))
    charts = [f for f in (category_plot(state), figure(state)) if f is not None]
    (out / "specdec-compare.html").write_text(
        "<html><head><meta charset='utf-8'><title>specdec compare</title></head><body>" + table_html(state)
        + "".join(f.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False)
                  for i, f in enumerate(charts)) + "</body></html>")
    return str(out / "specdec-compare.json"), str(out / "specdec-compare.html")
