"""The drafter protocol every proposer implements: start() -> per-request state, propose(state, context) -> Draft.

A drafter object holds only read-only things (weights, heads, options) and can serve many requests at once; whatever
changes during one request (a KV cache, the tokens it covers) lives in the state `start()` returns, which the engine
keeps for that request and hands back on every `propose`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from specdec_core.core.config import ConfigError, SamplingConfig
from specdec_core.core.features import Features
from specdec_core.core.tree import depths


@dataclass(frozen=True)
class DraftContext:
    """What a drafter may look at when proposing the next tokens."""

    tokens: list[int]  # committed tokens: prompt + generated so far
    max_tokens: int  # at most this many per branch: a chain's length, a tree's depth (0 => plain decoding)
    sampling: SamplingConfig
    generator: torch.Generator | None
    confidence_threshold: float = 0.0  # stop drafting when the drafter's own top probability falls below it
    last_hidden: torch.Tensor | None = None  # target's final hidden state that produced tokens[-1] (Medusa heads)
    max_nodes: int | None = None  # a tree's node budget this round (the cost-aware length); None: its own size
    features: Features | None = None  # the target's hidden state at every committed token but the last (EAGLE)


@dataclass(frozen=True)
class Draft:
    tokens: list[int]
    q_draft: torch.Tensor | None  # [len(tokens), vocab] warped draft distributions; None = deterministic (one-hot)
    parents: list[int] | None = None  # a token tree (see tree.py; candidates deterministic); None = a chain

    @staticmethod
    def empty() -> "Draft":
        return Draft([], None)

    @property
    def depth(self) -> int:
        """Longest branch: the number of tokens a round can accept at most (a chain's length)."""
        return max(depths(self.parents), default=0) if self.parents is not None else len(self.tokens)

    def target_rows(self) -> list[int]:
        """For each draft token, the row of the verify forward's output that scores it (its parent's position)."""
        if self.parents is None:
            return list(range(len(self.tokens)))
        return [p + 1 for p in self.parents]


@runtime_checkable
class Drafter(Protocol):
    def start(self) -> object: ...  # fresh per-request state (None: the drafter keeps none)

    def propose(self, state, context: DraftContext) -> Draft: ...


class Stateless:
    """For drafters that keep nothing between rounds (prompt lookup, Medusa heads): the state is None."""

    def start(self) -> None:
        return None


class NoDrafter(Stateless):
    """Proposes nothing: the round loop then is plain autoregressive decoding."""

    def propose(self, state, context: DraftContext) -> Draft:
        return Draft.empty()


def from_file(path: Path, what: str, trainer: str, target_name: str, build):
    """A drafter made by `build()` from a trained-heads file (Medusa, EAGLE): a missing file names the command that
    trains one; any unreadable or mismatched file becomes one ConfigError (a ConfigError of its own passes through)."""
    if not path.is_file():
        raise ConfigError(f"no {what} for {target_name!r} at {path}; train with "
                          f"`python -m specdec_core.{trainer} --target {target_name}` or pass a file")
    try:
        return build()
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - one message, never a traceback on the page
        raise ConfigError(f"cannot use {what} {path}: {str(e).splitlines()[0][:200]}") from None
