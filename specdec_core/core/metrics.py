"""Statistics computed from a trace (a list of Rounds). Nothing here times or runs anything."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from specdec_core.core.trace import Round


@dataclass(frozen=True)
class Stats:
    new_tokens: int
    rounds: int
    target_forwards: int  # one per round (the prompt pass not counted)
    drafted: int
    accepted: int
    acceptance_rate: float | None  # alpha = accepted / drafted (None when nothing was drafted)
    mean_tokens_per_round: float  # tau, including the correction/bonus token
    per_position_acceptance: list[float]  # P(draft token i accepted | it was drafted)
    draft_lengths: dict[int, int]  # tokens (tree nodes) drafted in a round -> how many rounds
    draft_seconds: float
    verify_seconds: float
    prefill_seconds: float
    wall_seconds: float  # sum of the above: the time the engine spent generating
    tokens_per_second: float  # new_tokens / (wall_seconds - prefill_seconds): decoding speed
    near_ties: list[int] = field(default_factory=list)  # output positions chosen on a near-tie (target not bit-exact)

    def to_dict(self) -> dict:  # JSON-ready: object keys are strings
        return {**asdict(self), "draft_lengths": {str(k): v for k, v in self.draft_lengths.items()}}

    @staticmethod
    def from_dict(d: dict) -> "Stats":
        """Back from to_dict (a bench JSON, a checkpoint); a file written before `draft_lengths` or `near_ties` existed
        reads back with them empty."""
        known = {k: v for k, v in d.items() if k in Stats.__dataclass_fields__}
        return Stats(**{**known, "draft_lengths": {int(k): v for k, v in (d.get("draft_lengths") or {}).items()}})


def token_sources(rounds: list[Round]) -> list[str]:
    return [s for r in rounds for s in r.sources]


def near_ties(rounds: list[Round]) -> set[int]:
    """Output positions whose greedy choice was a near-tie on a target that is not bit-exact (see Round.near_ties)."""
    out, start = set(), 0
    for r in rounds:
        out.update(start + i for i in r.near_ties)
        start += len(r.emitted)
    return out


def compute_stats(rounds: list[Round]) -> Stats:
    drafted = sum(r.num_drafted for r in rounds)
    accepted = sum(min(r.num_accepted, len(r.emitted)) for r in rounds)
    new_tokens = sum(len(r.emitted) for r in rounds)
    depth = max((r.depth for r in rounds), default=0)
    per_position = []
    for i in range(depth):
        tried = [r for r in rounds if r.depth > i and r.num_accepted >= i]  # position i was examined
        per_position.append(sum(r.num_accepted > i for r in tried) / len(tried) if tried else 0.0)
    draft_s = sum(r.draft_seconds for r in rounds)
    verify_s = sum(r.verify_seconds for r in rounds)
    prefill_s = sum(r.prefill_seconds for r in rounds)
    decode_s = draft_s + verify_s
    return Stats(
        new_tokens=new_tokens,
        rounds=len(rounds),
        target_forwards=len(rounds),
        drafted=drafted,
        accepted=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_tokens_per_round=new_tokens / len(rounds) if rounds else 0.0,
        per_position_acceptance=per_position,
        draft_lengths=dict(sorted(Counter(r.num_drafted for r in rounds).items())),
        draft_seconds=draft_s,
        verify_seconds=verify_s,
        prefill_seconds=prefill_s,
        wall_seconds=decode_s + prefill_s,
        tokens_per_second=new_tokens / decode_s if decode_s > 0 else 0.0,
        near_ties=sorted(near_ties(rounds)),
    )


def expected_tokens_per_round(alpha: float, gamma: int) -> float:
    """(1 - alpha^(gamma+1)) / (1 - alpha): tokens per round with i.i.d. acceptance alpha (Leviathan et al. 2023)."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def speedup_bound(alpha: float, gamma: int, cost_ratio: float) -> float:
    """(1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)): expected walltime improvement over plain decoding, where c
    is the cost of one drafting step relative to one target forward (verification assumed as cheap as one step)."""
    return expected_tokens_per_round(alpha, gamma) / (gamma * cost_ratio + 1.0)


def expected_tokens_from_positions(per_position: list[float], depth: int) -> float:
    """E[tokens per round] for drafts of `depth` tokens: 1 + sum over k of P(first k accepted), from the conditional
    per-position acceptance (a position never measured counts as never accepted)."""
    total, survive = 1.0, 1.0
    for i in range(depth):
        survive *= per_position[i] if i < len(per_position) else 0.0
        total += survive
    return total


def predicted_speedup(per_position: list[float], draft_lengths: dict[int, int], draft_ms: float, target_ms,
                      tree: bool = False) -> float:
    """Decode speedup over plain decoding predicted from a cost profile: E[tokens per round] x T(1) /
    (γ x T_draft + T(γ + 1)), averaged over the rounds' draft lengths γ (`draft_lengths`: γ -> rounds; a round that
    drafted nothing is one plain step). `target_ms(n)` is the measured cost of a target forward of n tokens. A token
    tree of γ nodes is verified in one forward of γ + 1 and yields up to its depth (len(per_position)) tokens."""
    tokens = ms = 0.0
    for length, rounds in draft_lengths.items():
        length = int(length)
        depth = min(length, len(per_position)) if tree else length
        tokens += rounds * expected_tokens_from_positions(per_position, depth)
        ms += rounds * (length * draft_ms + target_ms(length + 1))
    return tokens * target_ms(1) / ms if ms > 0 else 1.0


def pooled_positions(runs: list[Stats]) -> list[float]:
    """Per-position acceptance over several runs, each run's rate weighted by its rounds."""
    depth = max((len(s.per_position_acceptance) for s in runs), default=0)
    out = []
    for i in range(depth):
        have = [s for s in runs if len(s.per_position_acceptance) > i]
        weight = sum(s.rounds for s in have)
        out.append(sum(s.per_position_acceptance[i] * s.rounds for s in have) / weight if weight else 0.0)
    return out


@dataclass(frozen=True)
class Comparison:
    """A method against plain decoding of the same target, over one or more runs: the one definition the race, the
    bench and the Theory tab use (chains and trees alike)."""

    decode_speedup: float | None  # decode tokens/s over the reference's (prompt passes excluded)
    end_to_end_speedup: float | None  # tokens over all engine time, prompt passes included
    alpha: float | None  # accepted / drafted
    tau: float | None  # tokens per round (per target forward), the correction/bonus included
    mean_gamma: float | None  # tokens (tree nodes) drafted per round, over every round
    cost_ratio: float | None  # c: seconds per drafted token / seconds per verify forward
    per_position: list[float]  # P(position i accepted | examined), pooled over the runs
    predicted: float | None  # from this machine's cost profile and the measured per-position acceptance
    bound: float | None  # Leviathan et al. at mean γ and measured α, c (chains only)
    bound_with_verify: float | None  # the same with the verify forward's measured cost relative to a plain step


def _rate(runs: list[Stats], seconds) -> float | None:
    total = sum(seconds(s) for s in runs)
    return sum(s.new_tokens for s in runs) / total if total > 0 else None


def compare(runs: list[Stats], reference: list[Stats], tree: bool = False, cost=None) -> Comparison:
    """`runs` of a method and `reference` runs of plain decoding (same prompts); this machine's `cost` for the method
    (a schedule.Cost: T(n) and draft ms per token, from `profile.cost`) gives the prediction."""
    decode = lambda s: s.draft_seconds + s.verify_seconds  # noqa: E731
    ratio = lambda a, b: a / b if a and b else None  # noqa: E731
    rounds = sum(s.rounds for s in runs)
    drafted = sum(s.drafted for s in runs)
    draft_s, verify_s = sum(s.draft_seconds for s in runs), sum(s.verify_seconds for s in runs)
    alpha = sum(s.accepted for s in runs) / drafted if drafted else None
    gamma = drafted / rounds if rounds else None
    c = (draft_s / drafted) / (verify_s / rounds) if drafted and verify_s > 0 else None
    per_position = pooled_positions(runs)
    predicted = bound = bound_v = None
    if drafted and cost is not None:
        lengths = Counter()
        for s in runs:
            lengths.update(s.draft_lengths)
        predicted = predicted_speedup(per_position, lengths, cost.draft_ms, cost.target_ms, tree)
    if drafted and not tree and c is not None:
        bound = speedup_bound(alpha, gamma, c)
        ref_rounds = sum(s.rounds for s in reference)
        ref_step = sum(s.verify_seconds for s in reference) / ref_rounds if ref_rounds else 0.0
        if ref_step > 0:
            bound_v = expected_tokens_per_round(alpha, gamma) / (gamma * c + (verify_s / rounds) / ref_step)
    return Comparison(
        decode_speedup=ratio(_rate(runs, decode), _rate(reference, decode)),
        end_to_end_speedup=ratio(_rate(runs, lambda s: s.wall_seconds), _rate(reference, lambda s: s.wall_seconds)),
        alpha=alpha, tau=sum(s.new_tokens for s in runs) / rounds if rounds else None, mean_gamma=gamma,
        cost_ratio=c, per_position=per_position, predicted=predicted, bound=bound, bound_with_verify=bound_v)
