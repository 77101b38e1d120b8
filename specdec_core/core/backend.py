"""The backend protocol: what the round loop needs from a model, whatever runs it (backends/ holds the
implementations; today PyTorch + transformers, `backends/lm.py`).

A model forwards new tokens after its cache and returns logits and final hidden states for each; a token tree goes
in one forward with `parents` (core/tree.py). The cache is the backend's own object, created, copied, kept to an
accepted branch and cropped through the functions in core/kv.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class ForwardOutput:
    logits: torch.Tensor  # [n, vocab] float32, one row per input position
    hidden: torch.Tensor  # [n, hidden] final-norm hidden states (what the LM head reads; Medusa heads read it too)


class Model(Protocol):
    """A causal LM behind one small interface (batch size 1, no padding)."""

    name: str
    representation: str  # what the page and the JSON name, e.g. "int8 weight-only"
    rounding: float | None  # measured max |Δlogit|, n tokens together vs alone (0.0: bit-exact; None: not measured)
    max_verify_tokens: int | None  # the most rows one forward computes exactly as 1-token forwards do (None: any)
    # optional: verify_rows(cached) -> int | None, the same after `cached` tokens where it depends on the cache length
    # (llama.cpp on 2+ threads: 1 past the length where its one-token attention splits the cache across threads)

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def hidden_size(self) -> int: ...

    @property
    def max_positions(self) -> int: ...

    def prefill(self, token_ids: list[int], cache) -> torch.Tensor:
        """Fill the cache with a prompt; return its final hidden states (no logits)."""

    def forward(self, token_ids: list[int], cache, parents: list[int] | None = None,
                logits_rows: int | None = None) -> ForwardOutput:
        """Append `token_ids` after the cached positions (a tree with `parents`); logits and hidden states per row."""

    def new_cache(self):
        """An empty cache of this backend's kind (core/kv.py's verbs work on it)."""
