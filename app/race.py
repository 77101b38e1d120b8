"""The race: speculative decoding, then plain autoregressive decoding of the same target on the same prompt, each
streamed round by round. Never both at once: on one CPU they would slow each other down."""
from __future__ import annotations

import json
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from specdec_core.core.config import ConfigError, DraftConfig, GenerationConfig, SamplingConfig
from specdec_core.methods.registry import REGISTRY, is_tree, parse_method
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.metrics import compute_stats, near_ties
from specdec_core.core.run import REFERENCE, Row, Run, compare
from specdec_core.methods.recommend import prompt_kind
from specdec_core.methods.timing import cost
from specdec_core.core.session import encode_prompt
from specdec_core.core.schedule import perfect_draft_speedup
from specdec_core.core.trace import Round
from specdec_core.settings import MAX_DRAFT_TOKENS, MAX_PROMPT_TOKENS, PAGE_MAX_NEW_TOKENS

from . import figures
from .render import Piece, headline_html, message_html, round_pieces, tokens_html
from .resources import Models
from .tokens import Detokenizer

MAX_NEW_TOKENS = int(PAGE_MAX_NEW_TOKENS.hi)
SPEC_METHODS = tuple(REGISTRY)


@dataclass(frozen=True)
class RaceRequest:
    prompt: str
    method: str
    config: GenerationConfig
    chat: bool


def parse_request(prompt, method, num_draft_tokens, adaptive, temperature, top_p, seed, max_new_tokens,
                  chat, cost_aware=False) -> RaceRequest:
    """UI values -> a validated request; any problem raises ConfigError with a sentence for the user."""
    if prompt is None or not str(prompt).strip():
        raise ConfigError("Please enter a prompt (or pick an example).")
    method = parse_method(str(method))
    if method not in SPEC_METHODS:
        raise ConfigError(f"Pick a speculative method ({', '.join(SPEC_METHODS)}); plain decoding races against it.")
    try:
        max_new, k, seed_i = int(max_new_tokens), int(num_draft_tokens), int(seed)
        temperature, top_p = float(temperature), float(top_p)
    except (TypeError, ValueError):
        raise ConfigError("Numbers only, please: draft tokens, seed and max new tokens must be integers.") from None
    if not 1 <= max_new <= MAX_NEW_TOKENS:
        raise ConfigError(f"Max new tokens must be between 1 and {MAX_NEW_TOKENS} (got {max_new}).")
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        raise ConfigError(f"Draft tokens per round must be between 1 and {MAX_DRAFT_TOKENS} (got {k}).")
    adaptive = bool(adaptive)  # the +2/-1 schedule wins over the cost-aware length when both are ticked
    config = GenerationConfig(max_new_tokens=max_new, sampling=SamplingConfig(temperature, 0, top_p),
                              draft=DraftConfig(num_draft_tokens=k, adaptive=adaptive,
                                                cost_aware=bool(cost_aware) and not adaptive), seed=seed_i)
    return RaceRequest(str(prompt), method, config, bool(chat))


@dataclass
class RunView:
    """One streamed run: its rounds and the rendered pieces, decoded incrementally."""

    label: str
    detok: Detokenizer
    rounds: list[Round] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)

    def add(self, r: Round) -> None:
        self.rounds.append(r)
        self.pieces.extend(round_pieces(r, self.detok))

    @property
    def token_ids(self) -> list[int]:
        return [t for r in self.rounds for t in r.emitted]


@dataclass
class RaceRecord:
    """Everything a finished (or stopped) race leaves behind for the other tabs and the downloads."""

    request: RaceRequest
    prompt_ids: list[int]
    spec: RunView
    ar: RunView
    device: str
    profile: object | None = None  # this machine's cost profile (specdec_core.backends.profile.Profile), once measured
    rounding: float = 0.0  # the target's measured |Δlogit| between forward shapes (0.0: bit-exact)
    shared: bool = False  # another race ran at the same time: both shared the machine, timings are not clean


    def row(self) -> Row:
        """The speculative run against plain decoding (once plain decoding has run): the one comparison Row."""
        method, greedy = self.request.method, self.request.config.sampling.greedy
        spec = Run.of(method, self.prompt_ids, self.spec.rounds)
        ar = [Run.of(REFERENCE, self.prompt_ids, self.ar.rounds)] if self.ar.rounds else []
        return compare([spec], ar, tree=is_tree(method), cost=cost(self.profile, method), greedy=greedy,
                       profiled=self.profile is not None)

    def prediction(self, cmp: Row) -> tuple[float | None, str]:
        """(predicted decode speedup, how): from the cost profile when it is measured; else the Leviathan bound
        (chains only), which assumes a verify forward costs one step."""
        if cmp.alpha is None:
            c = cost(self.profile, self.request.method)
            if c is None:
                return None, "nothing drafted"
            longest = min(MAX_DRAFT_TOKENS, max(self.profile.target_ms) - 1)  # not past the sizes measured
            best, n = perfect_draft_speedup(c, longest)
            return 1.0, (f"no drafting pays on this machine and backend: even a draft that is always right would "
                          f"reach {best:.2f}× (γ {n}: T({n + 1}) = {c.target_ms(n + 1):.0f} ms vs T(1) = "
                          f"{c.target_ms(1):.0f} ms), so the cost-aware length drafted nothing")
        nodes = max(1, round(cmp.mean_gamma))
        if cmp.predicted_speedup is not None:
            p = self.profile
            return cmp.predicted_speedup, f"this machine: T({nodes + 1}) = {p.T(nodes + 1):.0f} ms vs T(1) = {p.T(1):.0f} ms"
        if cmp.bound is None:
            return None, "profile not measured yet"
        return cmp.bound, f"bound at mean γ={cmp.mean_gamma:.1f}, c={cmp.cost_ratio:.2f} (verify = one step)"

    def summary(self) -> dict:
        """The race's Row (the one comparison model, with the profile's prediction once it is measured) and both
        runs' statistics and tokens."""
        s, a = compute_stats(self.spec.rounds), compute_stats(self.ar.rounds)
        row = self.row()
        predicted, how = self.prediction(row)
        draft = self.request.config.draft
        return {
            "method": self.request.method,
            "device": self.device,
            "timing": "each run timed on its own, one after the other, same machine, same prompt; tokens/s is "
                      "decoding speed (the prompt pass is excluded); `speedup` is decode_speedup (the page's "
                      "headline); end_to_end_speedup includes the prompt passes",
            "row": row.to_dict(),
            "speculative": {**s.to_dict(), "token_ids": self.spec.token_ids,
                            "sources": [x for r in self.spec.rounds for x in r.sources]},
            "autoregressive": {**a.to_dict(), "token_ids": self.ar.token_ids},
            "speedup": row.decode_speedup,
            "decode_speedup": row.decode_speedup,
            "end_to_end_speedup": row.end_to_end_speedup,
            "cost_ratio": row.cost_ratio,
            "predicted_speedup": predicted,
            "prediction": how,
            "num_draft_tokens": draft.label,
            "mean_draft_tokens": row.mean_gamma,
            "draft_length": draft.kind,
            "shared_machine": self.shared,
            "identical": self.spec.token_ids == self.ar.token_ids if self.ar.rounds else None,
            "near_ties": sorted(near_ties(self.spec.rounds) | near_ties(self.ar.rounds)),  # empty when bit-exact
        }


def headline(record: RaceRecord, running: str | None = None) -> str:
    sm = record.summary()
    s, a = sm["speculative"], sm["autoregressive"]
    fmt = lambda v, f="{:.2f}": "—" if v is None else f.format(v)  # noqa: E731
    cards = [
        ("speculative tok/s", fmt(s["tokens_per_second"] or None), record.spec.label),
        ("plain tok/s", fmt(a["tokens_per_second"] or None), "same target, one token per forward"),
        ("speedup", fmt(sm["speedup"], "{:.2f}×"), "measured, decoding only"),
        ("acceptance α", fmt(s["acceptance_rate"]), "accepted / drafted"),
        ("tokens per round τ", fmt(s["mean_tokens_per_round"] or None), "incl. correction/bonus"),
        ("predicted", fmt(sm["predicted_speedup"], "{:.2f}×"), sm["prediction"]),
    ]
    return headline_html(cards)


def verdict_html(record: RaceRecord, tokenizer) -> str:
    spec, ar = record.spec.token_ids, record.ar.token_ids
    if not record.request.config.sampling.greedy:
        return message_html("Sampled (temperature > 0): the two outputs are different samples from the same target "
                            "distribution, so they differ by design. The Exactness lab shows the distribution is kept.")
    if spec == ar:
        why = ("Bit-exact: the verify forward computes every position exactly as plain decoding does (same target, "
               "same logits to the last bit)." if record.rounding == 0.0 else
               f"This device's target is not bit-exact (|Δlogit| ≤ {record.rounding:.3g} between forward shapes), so "
               "a near-tie could flip a token; none did here.")
        return message_html(f"✓ Identical: the speculative output equals plain greedy decoding, token for token "
                            f"({len(ar)} tokens). {why}", "ok")
    i = next((j for j, (x, y) in enumerate(zip(spec, ar)) if x != y), min(len(spec), len(ar)))
    if i in near_ties(record.spec.rounds) | near_ties(record.ar.rounds):
        return message_html(f"≈ Identical up to rounding: the outputs part at token {i} ({tokenizer.decode(spec[i:i+1])!r} "
                            f"vs {tokenizer.decode(ar[i:i+1])!r}), where the target's two best logits were within its "
                            f"measured rounding (|Δlogit| ≤ {record.rounding:.3g} between a 1-token and a many-token "
                            f"forward on this device). A near-tie, not a verification error.", "warn")
    return message_html(f"✗ Outputs differ from token {i}: speculative {tokenizer.decode(spec[i:i+1])!r} vs plain "
                        f"{tokenizer.decode(ar[i:i+1])!r}. Under greedy this should not happen; please report it.",
                        "error")


def race_outputs(record: RaceRecord, show_rejected: bool, status: str, per_round: bool = True) -> dict:
    """What the Race tab shows for a (running or finished) race, by output name. `per_round=False` leaves out the
    per-round charts (the page draws them before and after the timed runs only)."""
    out = {
        "spec": tokens_html(record.spec.pieces, show_rejected, "waiting…"),
        "ar": tokens_html(record.ar.pieces, False, "runs after the speculative run finishes"),
        "race_plot": figures.race_figure(record.spec.rounds, record.ar.rounds, record.spec.label),
        "headline": headline(record),
        "status": status,
    }
    if per_round:
        out["split_plot"] = figures.time_split_figure(record.spec.rounds)
        out["hist_plot"] = figures.accepted_histogram(record.spec.rounds)
    return out


def encode(models: Models, request: RaceRequest) -> list[int]:
    """The request's prompt ids, within the demo's limit."""
    prompt_ids = encode_prompt(models.tokenizer, request.prompt, chat=request.chat)
    if len(prompt_ids) > MAX_PROMPT_TOKENS:
        raise ConfigError(f"The prompt is {len(prompt_ids)} tokens; this demo takes at most {MAX_PROMPT_TOKENS}.")
    return prompt_ids


def prepare(models: Models, request: RaceRequest, profile=None) -> tuple[list[int], SpeculativeEngine]:
    """Prompt ids (within the demo's limit) and the speculative engine for a request (a cost-aware draft length reads
    the profile's costs; before the profile is measured it drafts the fixed γ)."""
    prompt_ids = encode(models, request)
    drafter = models.drafter(request.method)
    return prompt_ids, SpeculativeEngine(models.target, drafter, models.eos,
                                          cost(profile, request.method, prompt_kind(request.chat)), request.method)


class Running:
    """How many races run right now (the page serves two at once): a race that shared the machine says so."""

    def __init__(self):
        self._lock, self.count = threading.Lock(), 0

    def __enter__(self):
        with self._lock:
            self.count += 1

    def __exit__(self, *exc):
        with self._lock:
            self.count -= 1


RUNNING = Running()


def run_race(models: Models, request: RaceRequest, profile=None):
    """Yield (record, status) after every round of the speculative run, then of the plain run. Each request has its
    own engine state and drafter state; the models and drafters are shared read-only. The prompt pass runs once and
    each lane starts from its own copy of it (each reports that pass as its own prompt time)."""
    prompt_ids, spec_engine = prepare(models, request, profile)
    record = RaceRecord(request, prompt_ids, RunView(REGISTRY[request.method].label, Detokenizer(models.tokenizer)),
                        RunView("plain autoregressive", Detokenizer(models.tokenizer)), models.device_label, profile,
                        models.target.rounding or 0.0)
    with RUNNING:
        # The page draws its empty charts now, while the prompt pass runs: a browser on the same CPU building them
        # during the first timed rounds once made the first race of a session read 1.00x where later ones read 1.4x.
        yield record, "Prompt pass…"
        prefix = spec_engine.prefill(prompt_ids)  # one prompt pass, the same bits for both lanes
        for view, engine in ((record.spec, spec_engine), (record.ar, SpeculativeEngine(models.target, None, models.eos))):
            name = "speculative" if view is record.spec else "plain autoregressive"
            for r in engine.generate(prompt_ids, request.config, prefix):
                view.add(r)
                record.shared |= RUNNING.count > 1
                yield record, f"Running {name}… round {r.index + 1}, {len(view.token_ids)} tokens"
    yield record, "Done."


def write_downloads(record: RaceRecord) -> tuple[str, str]:
    """The trace as JSON and the charts as one standalone HTML page; returns the two file paths."""
    out = Path(tempfile.mkdtemp(prefix="specdec-"))
    trace = {"summary": record.summary(), "prompt_ids": record.prompt_ids,
             "config": {"method": record.request.method, "chat": record.request.chat},
             "speculative_rounds": [r.to_dict() for r in record.spec.rounds],
             "autoregressive_rounds": [r.to_dict() for r in record.ar.rounds]}
    json_path = out / "specdec-trace.json"
    json_path.write_text(json.dumps(trace, indent=1))
    figs = [figures.race_figure(record.spec.rounds, record.ar.rounds, record.spec.label),
            figures.time_split_figure(record.spec.rounds), figures.accepted_histogram(record.spec.rounds)]
    html_path = out / "specdec-charts.html"
    parts = [f.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False) for i, f in enumerate(figs)]
    html_path.write_text("<html><head><meta charset='utf-8'><title>specdec charts</title></head><body>"
                         + "".join(parts) + "</body></html>")
    return str(json_path), str(html_path)
