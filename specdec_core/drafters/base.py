"""The drafter protocol every proposer implements: propose(context) -> Draft, observe(num_accepted)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from ..config import SamplingConfig


@dataclass(frozen=True)
class DraftContext:
    """What a drafter may look at when proposing the next tokens."""

    tokens: list[int]  # committed tokens: prompt + generated so far
    max_tokens: int  # propose at most this many (0 => an empty draft, i.e. plain decoding)
    sampling: SamplingConfig
    generator: torch.Generator | None
    confidence_threshold: float = 0.0  # stop drafting when the drafter's own top probability falls below it
    last_hidden: torch.Tensor | None = None  # target's final hidden state that produced tokens[-1] (Medusa heads)


@dataclass(frozen=True)
class Draft:
    tokens: list[int]
    q_draft: torch.Tensor | None  # [len(tokens), vocab] warped draft distributions; None = deterministic (one-hot)

    @staticmethod
    def empty() -> "Draft":
        return Draft([], None)


@runtime_checkable
class Drafter(Protocol):
    source: str  # what accepted tokens are labelled in the trace: "draft", "lookup", "self", "medusa"

    def propose(self, context: DraftContext) -> Draft: ...

    def observe(self, num_accepted: int) -> None: ...


class NoDrafter:
    """Proposes nothing: the round loop then is plain autoregressive decoding."""

    source = "ar"

    def propose(self, context: DraftContext) -> Draft:
        return Draft.empty()

    def observe(self, num_accepted: int) -> None:
        pass
