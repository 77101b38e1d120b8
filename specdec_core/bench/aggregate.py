"""Benchmark records (one per method x prompt x repeat) and their per-method summary. Pure: no timing, no models."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from specdec_core.core.metrics import Stats, compare
from specdec_core.methods.timing import cost

REFERENCE = "ar"
OTHER_WEIGHTS = ("llamacpp-ar", "llamacpp-lookup")  # run the GGUF's own quantisation: timed, never compared


@dataclass(frozen=True)
class RunRecord:
    method: str
    prompt_id: str
    repeat: int
    token_ids: list[int]
    seconds: float  # wall clock around the whole call: prompt pass + decoding (the same for every method)
    forward_seconds: float  # of which inside model forwards (target + draft); the rest is engine overhead
    peak_rss_mb: float  # process peak resident memory during this run (all loaded models included)
    stats: dict | None = None  # the engine's Stats (None for transformers' methods)
    target_forwards: int | None = None  # target LM-head calls (prompt pass included), counted by a hook

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MethodSummary:
    method: str
    runs: int
    tokens: int
    seconds: float
    tokens_per_second: float
    speedup: float | None  # tokens/s over the reference's (ar) in the same run
    alpha: float | None  # accepted / drafted
    tau: float | None  # tokens per target forward (prompt pass not counted)
    target_forwards: int | None  # target forwards, prompt passes included (counted alike for every method)
    draft_seconds: float | None
    verify_seconds: float | None
    overhead: float  # share of wall time outside model forwards
    peak_rss_mb: float
    cost_ratio: float | None  # c: seconds per drafted token / seconds per verify forward
    bound: float | None  # Leviathan et al.: (1 - a^(g+1)) / ((1 - a)(g c + 1)), measured a and c
    bound_with_verify: float | None  # the same with the verify forward's measured cost relative to one ar step
    mismatches: list[str] = field(default_factory=list)  # greedy outputs differing from the reference's
    compared: int = 0  # greedy outputs compared with the reference's (0 when sampling or for the reference)
    decode_tokens_per_second: float | None = None  # prompt passes excluded (engine methods only)
    decode_speedup: float | None = None  # decode tokens/s over ar's: what the prediction predicts
    predicted_speedup: float | None = None  # from the cost profile and this run's per-position acceptance

    @property
    def mismatch_count(self) -> int:
        return len(self.mismatches)

    def to_dict(self) -> dict:
        return {**asdict(self), "mismatch_count": self.mismatch_count}


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def find_mismatches(records: list[RunRecord], reference: str = REFERENCE) -> dict[str, list[str]]:
    """method -> ["prompt (repeat r): differs at token i"] against the reference's output for the same prompt."""
    refs = {(r.prompt_id, r.repeat): r for r in records if r.method == reference}
    out: dict[str, list[str]] = defaultdict(list)
    for r in records:
        ref = refs.get((r.prompt_id, r.repeat))
        if r.method == reference or r.method in OTHER_WEIGHTS or ref is None:
            continue
        i = first_difference(r.token_ids, ref.token_ids)
        if i is not None:
            ties = {t for x in (r, ref) for t in ((x.stats or {}).get("near_ties") or [])}
            tie = " (a near-tie within the target's measured rounding)" if i in ties else ""
            out[r.method].append(f"{r.prompt_id} (repeat {r.repeat}): differs at token {i}{tie}")
    return dict(out)


def summarise(records: list[RunRecord], greedy: bool, no_bound: tuple[str, ...] = ("medusa-tree",),
              reference: str = REFERENCE, profile=None) -> list[MethodSummary]:
    """One row per method, in first-seen order. The bound uses gamma = mean tokens drafted per round (the configured
    length, less rounds cut short by confidence, end of output or no n-gram match); methods in `no_bound` (token
    trees: the chain formula does not apply) get none."""
    by_method: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        by_method[r.method].append(r)
    mismatches = find_mismatches(records, reference) if greedy else {}
    ref_stats = [Stats.from_dict(r.stats) for r in by_method.get(reference, []) if r.stats]
    ref_tps = None
    rows = []
    for method, runs in by_method.items():
        tokens = sum(len(r.token_ids) for r in runs)
        seconds = sum(r.seconds for r in runs)
        tps = tokens / seconds if seconds > 0 else 0.0
        if method == reference:
            ref_tps = tps
        cmp, decode_tps, draft_s, verify_s = None, None, None, None
        if all(r.stats for r in runs):  # our engine's runs: the one comparison model (metrics.compare)
            stats = [Stats.from_dict(r.stats) for r in runs]
            cmp = compare(stats, ref_stats, method in no_bound, cost(profile, method))
            draft_s, verify_s = sum(s.draft_seconds for s in stats), sum(s.verify_seconds for s in stats)
            decode_tps = sum(s.new_tokens for s in stats) / (draft_s + verify_s) if draft_s + verify_s > 0 else None
        forward = sum(r.forward_seconds for r in runs)
        counted = [r.target_forwards for r in runs]
        forwards = sum(counted) if all(c is not None for c in counted) else None
        rows.append(dict(method=method, runs=len(runs), tokens=tokens, seconds=seconds, tokens_per_second=tps,
                         alpha=cmp and cmp.alpha, tau=cmp and cmp.tau, target_forwards=forwards, draft_seconds=draft_s,
                         verify_seconds=verify_s, overhead=1.0 - forward / seconds if seconds > 0 else 0.0,
                         peak_rss_mb=max(r.peak_rss_mb for r in runs), cost_ratio=cmp and cmp.cost_ratio,
                         bound=cmp and cmp.bound, bound_with_verify=cmp and cmp.bound_with_verify,
                         mismatches=mismatches.get(method, []),
                         compared=len(runs) if greedy and method not in (reference, *OTHER_WEIGHTS)
                         and reference in by_method else 0,
                         decode_tokens_per_second=decode_tps,
                         decode_speedup=cmp.decode_speedup if cmp and ref_stats else None,
                         predicted_speedup=1.0 if method == reference and profile is not None else
                         cmp and cmp.predicted))
    return [MethodSummary(speedup=(row["tokens_per_second"] / ref_tps) if ref_tps else None, **row) for row in rows]


def by_category(records: list[RunRecord], categories: dict[str, str], greedy: bool,
                profile=None) -> dict[str, list[MethodSummary]]:
    """Per category (Spec-Bench's task categories), the per-method summary of its prompts' runs (a conversation's
    turns `id#k` count for its prompt). Prompts without a category are left out; none at all gives {}."""
    def category(prompt_id: str) -> str:
        return categories.get(prompt_id) or categories.get(prompt_id.rsplit("#", 1)[0], "")

    out: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        if category(r.prompt_id):
            out[category(r.prompt_id)].append(r)
    order = list(dict.fromkeys([REFERENCE] + [r.method for r in records]))  # the same method order in every category
    return {c: sorted(summarise(rs, greedy=greedy, profile=profile), key=lambda row: order.index(row.method))
            for c, rs in out.items()}
