"""Draft length per round: fixed; adaptive (+2 after a fully accepted draft, -1 otherwise, HF's heuristic); or
cost-aware: the length that maximises expected tokens per second from this machine's measured costs and the running
per-position acceptance (as SGLang's adaptive speculation and EAGLE's cost model do)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .config import DraftConfig
from .metrics import expected_tokens_from_positions

PRIOR_TRIED, PRIOR_ACCEPTED = 4.0, 2.8  # before any round: each position accepted 70% of the time
PROBE_EVERY = 8  # when drafting is predicted not to pay, still draft one token this often, to keep measuring


@dataclass(frozen=True)
class Cost:
    """What a round costs here: target_ms(n) for a forward of n tokens, draft_ms per drafted token."""

    target_ms: Callable[[int], float]
    draft_ms: float


class DraftLengthSchedule:
    def __init__(self, config: DraftConfig, cost: Cost | None = None):
        self.config = config
        self.cost = cost if config.cost_aware else None
        self.tried = [PRIOR_TRIED] * config.max_adaptive_tokens
        self.accepted = [PRIOR_ACCEPTED] * config.max_adaptive_tokens
        self.rounds = 0
        self.length = self._best() if self.cost else config.num_draft_tokens

    @property
    def confidence_threshold(self) -> float:
        return self.config.confidence_threshold if self.config.adaptive else 0.0

    def expected_rate(self, length: int) -> float:
        """Predicted tokens per ms when drafting `length` tokens per round."""
        rates = [a / t for a, t in zip(self.accepted, self.tried)]
        expected = expected_tokens_from_positions(rates, length)
        return expected / (length * self.cost.draft_ms + self.cost.target_ms(length + 1))

    def _best(self) -> int:
        best = max(range(self.config.max_adaptive_tokens + 1), key=self.expected_rate)
        return best if best or self.rounds % PROBE_EVERY else 1

    def update(self, num_drafted: int, num_accepted: int) -> None:
        self.rounds += 1
        if self.cost is not None:
            for i in range(min(num_drafted, num_accepted + 1)):  # positions examined this round
                self.tried[i] += 1
                self.accepted[i] += i < num_accepted
            self.length = self._best()
            return
        if not self.config.adaptive or num_drafted == 0:
            return
        if num_accepted == num_drafted:
            self.length = min(self.length + 2, self.config.max_adaptive_tokens)
        else:
            self.length = max(self.length - 1, 1)
