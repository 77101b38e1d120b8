"""Shared proposing loop for drafters that run a network token by token with their own KV cache
(a separate draft model, or the target with layers skipped)."""
from __future__ import annotations

from typing import Callable

import torch
from transformers import DynamicCache

from ..kv import cache_length, crop, new_cache
from ..lm import ForwardOutput
from ..sampling import logits_to_probs, sample
from .base import Draft, DraftContext

ForwardFn = Callable[..., ForwardOutput]  # (token_ids, cache, logits_rows=None) -> ForwardOutput


class NeuralDrafter:
    """Autoregressive proposer. Its cache holds KV for `self.cached` tokens; each round it rolls back to the longest
    prefix shared with the committed tokens (rejected draft tokens are dropped) and forwards what is missing."""

    source = "draft"

    def __init__(self, forward: ForwardFn, vocab_size: int):
        self._forward = forward
        self.vocab_size = vocab_size  # the target's: q rows are padded/truncated to it
        self.cache = new_cache()
        self.cached: list[int] = []

    def _sync(self, tokens: list[int]) -> torch.Tensor:
        """Make the cache cover tokens[:-1] plus tokens[-1]; return the logits after tokens[-1]."""
        keep = 0
        limit = min(len(self.cached), len(tokens) - 1)  # always re-forward at least the last token
        while keep < limit and self.cached[keep] == tokens[keep]:
            keep += 1
        crop(self.cache, keep)
        out = self._forward(tokens[keep:], self.cache, logits_rows=1)
        self.cached = list(tokens)
        assert cache_length(self.cache) == len(tokens)
        return out.logits[-1]

    def _fit(self, probs: torch.Tensor) -> torch.Tensor:
        n = probs.shape[-1]
        if n == self.vocab_size:
            return probs
        if n > self.vocab_size:
            return probs[: self.vocab_size] / probs[: self.vocab_size].sum()
        return torch.nn.functional.pad(probs, (0, self.vocab_size - n))

    def propose(self, context: DraftContext) -> Draft:
        if context.max_tokens <= 0:
            return Draft.empty()
        logits = self._sync(context.tokens)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        while True:
            q = self._fit(logits_to_probs(logits, context.sampling))
            token = sample(q, context.generator, greedy=context.sampling.greedy)
            tokens.append(token)
            rows.append(q)
            if len(tokens) >= context.max_tokens or float(q[token]) < context.confidence_threshold:
                break
            logits = self._forward([token], self.cache).logits[-1]
            self.cached.append(token)
        return Draft(tokens, torch.stack(rows))

    def observe(self, num_accepted: int) -> None:
        pass
