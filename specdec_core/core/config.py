"""Frozen configuration dataclasses: every default lives here, validated once at the edge."""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_NEW_TOKENS_LIMIT = 4096
MAX_DRAFT_TOKENS_LIMIT = 64


class ConfigError(ValueError):
    """A user-facing configuration problem, with a one-line reason."""


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become a distribution. temperature == 0 means greedy (argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0) or self.temperature > 100:
            raise ConfigError(f"temperature must be in [0, 100], got {self.temperature}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not (0.0 < self.top_p <= 1.0):
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class DraftConfig:
    """How many tokens a drafter proposes per round, and whether that adapts."""

    num_draft_tokens: int = 5
    adaptive: bool = False  # +2 after a fully accepted draft, -1 otherwise; stop drafting below confidence
    confidence_threshold: float = 0.4  # only used when adaptive
    max_adaptive_tokens: int = 16  # also the longest draft the cost-aware length considers
    cost_aware: bool = False  # length per round from this machine's cost profile (--num-draft-tokens auto)

    def __post_init__(self) -> None:
        if not (0 <= self.num_draft_tokens <= MAX_DRAFT_TOKENS_LIMIT):
            raise ConfigError(f"num_draft_tokens must be in [0, {MAX_DRAFT_TOKENS_LIMIT}], got {self.num_draft_tokens}")
        if not (0.0 <= self.confidence_threshold < 1.0):
            raise ConfigError(f"confidence_threshold must be in [0, 1), got {self.confidence_threshold}")
        if not (1 <= self.max_adaptive_tokens <= MAX_DRAFT_TOKENS_LIMIT):
            raise ConfigError(f"max_adaptive_tokens must be in [1, {MAX_DRAFT_TOKENS_LIMIT}]")
        if self.cost_aware and self.adaptive:
            raise ConfigError("choose one: a cost-aware draft length (auto) or the adaptive +2/-1 schedule")


@dataclass(frozen=True)
class LookupConfig:
    """Prompt lookup: match the last n-gram (n = max_ngram_size down to min_ngram_size) in prompt + output."""

    max_ngram_size: int = 3
    min_ngram_size: int = 1

    def __post_init__(self) -> None:
        if not (1 <= self.min_ngram_size <= self.max_ngram_size <= 32):
            raise ConfigError("need 1 <= min_ngram_size <= max_ngram_size <= 32")


@dataclass(frozen=True)
class LayerSkipConfig:
    """Self-speculation: the target drafts with some of its layers skipped. None = a default for the depth."""

    skip_layers: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MedusaConfig:
    """Medusa heads: a weights file (None = the one shipped for the target) and the token-tree shape (medusa-tree)."""

    heads: str | None = None
    tree_nodes: int = 10  # candidates per round in tree mode
    tree_top_k: int = 3  # children per node at most

    def __post_init__(self) -> None:
        if not (1 <= self.tree_nodes <= MAX_DRAFT_TOKENS_LIMIT):
            raise ConfigError(f"tree_nodes must be in [1, {MAX_DRAFT_TOKENS_LIMIT}], got {self.tree_nodes}")
        if not (1 <= self.tree_top_k <= 16):
            raise ConfigError(f"tree_top_k must be in [1, 16], got {self.tree_top_k}")


@dataclass(frozen=True)
class EagleConfig:
    """An EAGLE head: a weights file (None = the one shipped for the target) and EAGLE-2's tree shape (eagle-tree)."""

    heads: str | None = None
    tree_nodes: int = 16  # candidates kept per round in tree mode
    tree_top_k: int = 4  # nodes expanded per depth, and children per expanded node

    def __post_init__(self) -> None:
        if not (1 <= self.tree_nodes <= MAX_DRAFT_TOKENS_LIMIT):
            raise ConfigError(f"tree_nodes must be in [1, {MAX_DRAFT_TOKENS_LIMIT}], got {self.tree_nodes}")
        if not (1 <= self.tree_top_k <= 16):
            raise ConfigError(f"tree_top_k must be in [1, 16], got {self.tree_top_k}")


@dataclass(frozen=True)
class GenerationConfig:
    """One request: what to generate and how."""

    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        if not (1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT):
            raise ConfigError(f"max_new_tokens must be in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}")
        if self.seed < 0:
            raise ConfigError(f"seed must be >= 0, got {self.seed}")


def parse_layers(text: str) -> tuple[int, ...]:
    """'4-9,12,14' -> (4, 5, 6, 7, 8, 9, 12, 14)."""
    layers: list[int] = []
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            lo, _, hi = part.partition("-")
            layers.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"cannot parse layer list {text!r}; use e.g. '4-9,12'") from None
    return tuple(sorted(set(layers)))
