"""Frozen configuration dataclasses, validated once at the edge. Their defaults and ranges are read from
settings.py, the one place a number is written."""
from __future__ import annotations

from dataclasses import dataclass, field

from specdec_core import settings as S


class ConfigError(ValueError):
    """A user-facing configuration problem, with a one-line reason."""


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become a distribution. temperature == 0 means greedy (argmax)."""

    temperature: float = S.TEMPERATURE.default
    top_k: int = 0  # 0 = off
    top_p: float = S.TOP_P.default  # 1.0 = off

    def __post_init__(self) -> None:
        if not (self.temperature >= S.TEMPERATURE.lo) or self.temperature > S.TEMPERATURE.hi:
            raise ConfigError(f"temperature must be in [{S.TEMPERATURE.lo:g}, {S.TEMPERATURE.hi:g}], got {self.temperature}")
        if not 0 <= self.top_k <= S.MAX_TOP_K:
            raise ConfigError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not (S.TOP_P.lo < self.top_p <= S.TOP_P.hi):
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class DraftConfig:
    """How many tokens a drafter proposes per round, and whether that adapts. The edges (CLI, bench, selfcheck, the
    page) default to the cost-aware length; this dataclass alone defaults to a fixed γ, for tests and library use."""

    num_draft_tokens: int = int(S.NUM_DRAFT_TOKENS.default)
    adaptive: bool = False  # +2 after a fully accepted draft, -1 otherwise; stop drafting below confidence
    confidence_threshold: float = S.CONFIDENCE_THRESHOLD.default  # only used when adaptive
    max_adaptive_tokens: int = S.MAX_DRAFT_TOKENS  # also the longest draft the cost-aware length considers
    cost_aware: bool = False  # length per round from this machine's cost profile (--num-draft-tokens auto)

    def __post_init__(self) -> None:
        lo, hi = int(S.NUM_DRAFT_TOKENS.lo), int(S.NUM_DRAFT_TOKENS.hi)
        if not (lo <= self.num_draft_tokens <= hi):
            raise ConfigError(f"num_draft_tokens must be in [{lo}, {hi}], got {self.num_draft_tokens}")
        if not S.CONFIDENCE_THRESHOLD.contains(self.confidence_threshold):
            raise ConfigError(f"confidence_threshold must be in [0, 1), got {self.confidence_threshold}")
        if not (1 <= self.max_adaptive_tokens <= S.MAX_DRAFT_TOKENS):
            raise ConfigError(f"max_adaptive_tokens must be in [1, {S.MAX_DRAFT_TOKENS}]")
        if self.cost_aware and self.adaptive:
            raise ConfigError("choose one: a cost-aware draft length (auto) or the adaptive +2/-1 schedule")

    @property
    def label(self) -> int | str:
        """What the JSON and the page call this setting: "auto" (cost-aware), or the fixed γ."""
        return S.DRAFT_TOKENS_AUTO if self.cost_aware else self.num_draft_tokens

    @property
    def kind(self) -> str:
        return "cost-aware" if self.cost_aware else "adaptive" if self.adaptive else "fixed"


@dataclass(frozen=True)
class LookupConfig:
    """Prompt lookup: match the last n-gram (n = max_ngram_size down to min_ngram_size) in prompt + output."""

    max_ngram_size: int = S.NGRAM[1]
    min_ngram_size: int = S.NGRAM[0]

    def __post_init__(self) -> None:
        if not (1 <= self.min_ngram_size <= self.max_ngram_size <= S.MAX_NGRAM):
            raise ConfigError(f"need 1 <= min_ngram_size <= max_ngram_size <= {S.MAX_NGRAM}")


@dataclass(frozen=True)
class LayerSkipConfig:
    """Self-speculation: the target drafts with some of its layers skipped. None = a default for the depth."""

    skip_layers: tuple[int, ...] | None = None


def _check_tree(nodes: int, top_k: int) -> None:
    if not (1 <= nodes <= S.MAX_TREE_NODES):
        raise ConfigError(f"tree_nodes must be in [1, {S.MAX_TREE_NODES}], got {nodes}")
    if not (1 <= top_k <= S.MAX_TREE_TOP_K):
        raise ConfigError(f"tree_top_k must be in [1, {S.MAX_TREE_TOP_K}], got {top_k}")


@dataclass(frozen=True)
class MedusaConfig:
    """Medusa heads: a weights file (None = the one shipped for the target) and the token-tree shape (medusa-tree)."""

    heads: str | None = None
    tree_nodes: int = S.MEDUSA_TREE[0]  # candidates per round in tree mode
    tree_top_k: int = S.MEDUSA_TREE[1]  # children per node at most

    def __post_init__(self) -> None:
        _check_tree(self.tree_nodes, self.tree_top_k)


@dataclass(frozen=True)
class EagleConfig:
    """An EAGLE head: a weights file (None = the one shipped for the target) and EAGLE-2's tree shape (eagle-tree)."""

    heads: str | None = None
    tree_nodes: int = S.EAGLE_TREE[0]  # candidates kept per round in tree mode
    tree_top_k: int = S.EAGLE_TREE[1]  # nodes expanded per depth, and children per expanded node

    def __post_init__(self) -> None:
        _check_tree(self.tree_nodes, self.tree_top_k)


@dataclass(frozen=True)
class GenerationConfig:
    """One request: what to generate and how."""

    max_new_tokens: int = int(S.MAX_NEW_TOKENS.default)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        lo, hi = int(S.MAX_NEW_TOKENS.lo), int(S.MAX_NEW_TOKENS.hi)
        if not (lo <= self.max_new_tokens <= hi):
            raise ConfigError(f"max_new_tokens must be in [{lo}, {hi}], got {self.max_new_tokens}")
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
