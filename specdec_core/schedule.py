"""Draft length per round: fixed, or adaptive (+2 after a fully accepted draft, -1 otherwise, HF's heuristic)."""
from __future__ import annotations

from .config import DraftConfig


class DraftLengthSchedule:
    def __init__(self, config: DraftConfig):
        self.config = config
        self.length = config.num_draft_tokens

    @property
    def confidence_threshold(self) -> float:
        return self.config.confidence_threshold if self.config.adaptive else 0.0

    def update(self, num_drafted: int, num_accepted: int) -> None:
        if not self.config.adaptive or num_drafted == 0:
            return
        if num_accepted == num_drafted:
            self.length = min(self.length + 2, self.config.max_adaptive_tokens)
        else:
            self.length = max(self.length - 1, 1)
