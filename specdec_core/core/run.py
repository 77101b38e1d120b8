"""One run record and one comparison row. The race, Compare, the bench, selfcheck and `generate --json` each describe
a generation as a `Run` and its comparison with plain decoding as a `Row` (`compare(runs, reference)`); they only
format Rows. Nothing here times or runs anything."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from specdec_core.core.metrics import (Stats, compute_stats, expected_tokens_per_round, pooled_positions,
                                       predicted_speedup, speedup_bound)
from specdec_core.core.trace import Round

REFERENCE = "ar"  # plain autoregressive decoding through the same engine: what every method is checked against


@dataclass(frozen=True)
class Run:
    """One method's generation on one prompt. An engine run carries its statistics (from its rounds, the trace); a
    peer library's run (transformers, llama.cpp) only its tokens and time."""

    method: str
    prompt_ids: list[int]
    token_ids: list[int]
    seconds: float  # wall clock of the whole call as its caller measured it: prompt pass + decoding
    stats: Stats | None = None  # the engine's (None: a peer's run, not traced)
    prompt_id: str = ""
    repeat: int = 0
    forward_seconds: float | None = None  # of `seconds`, inside model forwards (the bench's hooks)
    peak_rss_mb: float | None = None  # process peak resident memory during the run (the bench)
    target_forwards: int | None = None  # target LM-head calls, prompt pass included (the bench's hook)
    rounds: list[Round] = field(default_factory=list, repr=False, compare=False)  # the trace; in memory only

    @staticmethod
    def of(method: str, prompt_ids: list[int], rounds: list[Round], seconds: float | None = None, **kw) -> "Run":
        """An engine run from its rounds; `seconds` defaults to the engine's own time (prompt pass included)."""
        stats = compute_stats(rounds)
        return Run(method, list(prompt_ids), [t for r in rounds for t in r.emitted],
                   stats.wall_seconds if seconds is None else seconds, stats, rounds=list(rounds), **kw)

    @property
    def traced(self) -> bool:
        return self.stats is not None

    def to_dict(self) -> dict:
        """JSON-ready, without the rounds (a bench file holds thousands of runs)."""
        d = {k: v for k, v in asdict(self).items() if k != "rounds"}
        d["stats"] = self.stats.to_dict() if self.stats else None
        return d

    @staticmethod
    def from_dict(d: dict) -> "Run":
        known = {k: v for k, v in d.items() if k in Run.__dataclass_fields__ and k not in ("rounds", "stats")}
        known.setdefault("prompt_ids", [])
        return Run(**known, stats=Stats.from_dict(d["stats"]) if d.get("stats") else None)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first output position where two token lists differ (a shorter list differs where it ends); None: equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class Difference:
    """A run whose greedy output differs from the reference's on the same prompt."""

    prompt_id: str
    repeat: int
    first_difference: int  # the first diverging output token
    near_tie: bool  # there, the target's two best logits lay within its measured rounding (not bit-exact targets)
    reference_token: int | None = None  # the reference's token id there (None: its output ended)
    token: int | None = None  # this run's token id there (None: its output ended)

    def __str__(self) -> str:
        tie = " (a near-tie within the target's measured rounding)" if self.near_tie else ""
        ids = f" (token id {_id(self.token)}, plain decoding {_id(self.reference_token)})"
        return f"{self.prompt_id} (repeat {self.repeat}): differs at token {self.first_difference}{ids}{tie}"


def _id(token: int | None) -> str:
    return "end" if token is None else str(token)


def differences(runs: list[Run], reference: list[Run]) -> list[Difference]:
    """Each run that differs from the reference run of the same prompt and repeat."""
    refs = {(r.prompt_id, r.repeat): r for r in reference}
    out = []
    for run in runs:
        ref = refs.get((run.prompt_id, run.repeat))
        i = None if ref is None else first_difference(run.token_ids, ref.token_ids)
        if i is not None:
            ties = {t for x in (run, ref) if x.stats for t in x.stats.near_ties}
            at = lambda ids: ids[i] if i < len(ids) else None  # noqa: E731
            out.append(Difference(run.prompt_id, run.repeat, i, i in ties, at(ref.token_ids), at(run.token_ids)))
    return out


@dataclass(frozen=True)
class Row:
    """A method against plain decoding of the same target, over one or more runs (paired by prompt): the one result
    the race, Compare, the bench, selfcheck and `generate --json` format. Every speedup says which it is."""

    method: str
    tree: bool  # proposes token trees (the registry's flag): no chain bound
    peer: bool  # another library's run (transformers, llama.cpp): its differences are findings, not our failures
    runs: int
    tokens: int
    seconds: float  # wall clock of all runs, prompt passes included
    end_to_end_tokens_per_second: float
    end_to_end_speedup: float | None  # tokens/s over the reference's, prompt passes included
    decode_tokens_per_second: float | None = None  # prompt passes excluded (engine runs only)
    decode_speedup: float | None = None  # decode tokens/s over the reference's: what the prediction predicts
    predicted_speedup: float | None = None  # this machine's cost profile x this run's per-position acceptance
    alpha: float | None = None  # accepted / drafted
    tau: float | None = None  # tokens per round (per target forward), the correction/bonus included
    mean_gamma: float | None = None  # tokens (tree nodes) drafted per round
    cost_ratio: float | None = None  # c: seconds per drafted token / seconds per verify forward
    per_position: list[float] = field(default_factory=list)  # P(position i accepted | examined)
    bound: float | None = None  # Leviathan et al. at mean γ and measured α, c (chains only)
    bound_with_verify: float | None = None  # the same with the verify forward's measured cost relative to a step
    draft_seconds: float | None = None
    verify_seconds: float | None = None
    prefill_seconds: float | None = None
    identical: bool | None = None  # every run's greedy output equals the reference's (None: not compared)
    first_difference: int | None = None  # the first differing run's first diverging token
    mismatches: list[str] = field(default_factory=list)  # "prompt (repeat r): differs at token i"
    compared: int = 0  # runs compared with the reference's
    target_forwards: int | None = None
    overhead: float | None = None  # share of wall time outside model forwards (the bench)
    peak_rss_mb: float | None = None
    error: str | None = None  # a run that failed (Compare shows it in its row)

    @property
    def mismatch_count(self) -> int:
        return len(self.mismatches)

    def to_dict(self) -> dict:
        return {**asdict(self), "mismatch_count": self.mismatch_count}


def _sum(values) -> float | None:
    values = list(values)
    return sum(values) if values and all(v is not None for v in values) else None


def compare(runs: list[Run], reference: list[Run], tree: bool = False, cost=None, greedy: bool = True,
            peer: bool = False, comparable: bool = True, profiled: bool = False, method: str | None = None) -> Row:
    """`runs` of one method against `reference` runs of plain decoding (same prompts, paired by prompt id and repeat).
    `cost` (a schedule.Cost: T(n) and the draft's ms per token) gives the prediction; `profiled`: a cost profile was
    measured (plain decoding is then predicted at 1.0x); `tree`: the method proposes trees; `peer`: another library's
    runs; `comparable=False`: other weights (llama.cpp's GGUF), timed only; `method`: its name when `runs` is empty."""
    ratio = lambda a, b: a / b if a and b else None  # noqa: E731
    method = runs[0].method if runs else method or ""
    is_reference = bool(runs) and method == REFERENCE
    tokens = sum(len(r.token_ids) for r in runs)
    seconds = sum(r.seconds for r in runs)
    e2e = tokens / seconds if seconds > 0 else 0.0
    ref_tokens, ref_seconds = sum(len(r.token_ids) for r in reference), sum(r.seconds for r in reference)
    ref_e2e = ref_tokens / ref_seconds if ref_seconds > 0 else None
    stats = [r.stats for r in runs if r.stats]
    ref_stats = [r.stats for r in reference if r.stats]
    traced = bool(runs) and len(stats) == len(runs)
    fields: dict = {}
    if traced:
        prompts = all(r.prompt_ids for r in runs)
        # the context the run's rounds saw, on average; and a drafter with its own cache first catches up over the
        # prompt, once per run that drafts (in its decode time)
        context = round(sum(len(r.prompt_ids) + len(r.token_ids) / 2 for r in runs) / len(runs)) if prompts else None
        caught_up = sum(len(r.prompt_ids) for r in runs if r.stats.drafted) if prompts else 0
        fields = _engine_fields(stats, ref_stats, tree, cost, context, caught_up)
        if is_reference:
            fields["predicted_speedup"] = 1.0 if profiled else None
    diffs = differences(runs, reference) if greedy and comparable and not is_reference else []
    compared = len(runs) if greedy and comparable and not is_reference and reference else 0
    forward = _sum(r.forward_seconds for r in runs)
    return Row(
        method=method, tree=tree, peer=peer, runs=len(runs), tokens=tokens, seconds=seconds,
        end_to_end_tokens_per_second=e2e, end_to_end_speedup=ratio(e2e, ref_e2e),
        identical=(not diffs) if compared else None,
        first_difference=diffs[0].first_difference if diffs else None,
        mismatches=[str(d) for d in diffs], compared=compared,
        target_forwards=_sum(r.target_forwards for r in runs),
        overhead=1.0 - forward / seconds if forward is not None and seconds > 0 else None,
        peak_rss_mb=max((r.peak_rss_mb for r in runs if r.peak_rss_mb is not None), default=None),
        **fields)


def _engine_fields(stats: list[Stats], reference: list[Stats], tree: bool, cost, context: int | None = None,
                   caught_up: int = 0) -> dict:
    """What the trace tells about a method's runs: decode speed and speedup, α, τ, γ, c, per-position acceptance,
    the profile's prediction and (chains) the Leviathan bound."""
    decode = lambda s: s.draft_seconds + s.verify_seconds  # noqa: E731
    rate = lambda runs: (sum(s.new_tokens for s in runs) / total  # noqa: E731
                         if (total := sum(decode(s) for s in runs)) > 0 else None)
    rounds = sum(s.rounds for s in stats)
    drafted = sum(s.drafted for s in stats)
    draft_s, verify_s = sum(s.draft_seconds for s in stats), sum(s.verify_seconds for s in stats)
    alpha = sum(s.accepted for s in stats) / drafted if drafted else None
    gamma = drafted / rounds if rounds else None
    c = (draft_s / drafted) / (verify_s / rounds) if drafted and verify_s > 0 else None
    per_position = pooled_positions(stats)
    predicted = bound = bound_v = None
    if drafted and cost is not None:
        lengths = Counter()
        for s in stats:
            lengths.update(s.draft_lengths)
        once = caught_up * cost.catch_up_ms if cost.catches_up else 0.0
        predicted = predicted_speedup(per_position, lengths, cost.draft_ms, lambda n: cost.T(n, context), tree, once)
    elif rounds and cost is not None:  # the cost-aware length drafted nothing: one plain step a round, as ar
        predicted = 1.0
    if drafted and not tree and c is not None:
        bound = speedup_bound(alpha, gamma, c)
        ref_rounds = sum(s.rounds for s in reference)
        ref_step = sum(s.verify_seconds for s in reference) / ref_rounds if ref_rounds else 0.0
        if ref_step > 0:
            bound_v = expected_tokens_per_round(alpha, gamma) / (gamma * c + (verify_s / rounds) / ref_step)
    mine, theirs = rate(stats), rate(reference) if reference else None
    return dict(decode_tokens_per_second=mine, decode_speedup=mine / theirs if mine and theirs else None,
                predicted_speedup=predicted, alpha=alpha, tau=sum(s.new_tokens for s in stats) / rounds if rounds
                else None, mean_gamma=gamma, cost_ratio=c, per_position=per_position, bound=bound,
                bound_with_verify=bound_v, draft_seconds=draft_s, verify_seconds=verify_s,
                prefill_seconds=sum(s.prefill_seconds for s in stats))
