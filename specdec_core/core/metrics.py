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
                      tree: bool = False, once_ms: float = 0.0) -> float:
    """Decode speedup over plain decoding predicted from a cost profile: E[tokens per round] x T(1) /
    (γ x T_draft + T(γ + 1)), averaged over the rounds' draft lengths γ (`draft_lengths`: γ -> rounds; a round that
    drafted nothing is one plain step). `target_ms(n)` is the measured cost of a target forward of n tokens. A token
    tree of γ nodes is verified in one forward of γ + 1 and yields up to its depth (len(per_position)) tokens.
    `once_ms`: what the runs spent once, outside any round's steady cost (a drafter's catch-up over the prompt)."""
    tokens, ms = 0.0, once_ms
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
