"""Shared proposing loop for drafters that run a network token by token with their own KV cache
(a separate draft model, or the target with layers skipped)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from specdec_core.core.kv import cache_length, crop, new_cache
from specdec_core.core.backend import ForwardOutput
from specdec_core.core.sampling import logits_to_probs, sample
from specdec_core.core.drafter import Draft, DraftContext

ForwardFn = Callable[..., ForwardOutput]  # (token_ids, cache, logits_rows=None) -> ForwardOutput


@dataclass
class NeuralState:
    """One request's draft KV cache and the tokens it holds."""

    cache: object = field(default_factory=new_cache)  # a DynamicCache, or the drafting backend's own
    cached: list[int] = field(default_factory=list)


class NeuralDrafter:
    """Autoregressive proposer. A request's cache holds KV for `state.cached` tokens; each round it rolls back to the
    longest prefix shared with the committed tokens (rejected draft tokens are dropped) and forwards what is missing."""


    def __init__(self, forward: ForwardFn, vocab_size: int, make_cache: Callable[[], object] = new_cache):
        self._forward = forward
        self.vocab_size = vocab_size  # the target's: q rows are padded/truncated to it
        self._make_cache = make_cache  # the drafting model's backend's cache

    def start(self) -> NeuralState:
        return NeuralState(self._make_cache())

    def _sync(self, state: NeuralState, tokens: list[int]) -> torch.Tensor:
        """Make the cache cover tokens[:-1] plus tokens[-1]; return the logits after tokens[-1]."""
        keep = 0
        limit = min(len(state.cached), len(tokens) - 1)  # always re-forward at least the last token
        while keep < limit and state.cached[keep] == tokens[keep]:
            keep += 1
        crop(state.cache, keep)
        out = self._forward(tokens[keep:], state.cache, logits_rows=1)
        state.cached = list(tokens)
        assert cache_length(state.cache) == len(tokens)
        return out.logits[-1]

    def _fit(self, probs: torch.Tensor) -> torch.Tensor:
        n = probs.shape[-1]
        if n == self.vocab_size:
            return probs
        if n > self.vocab_size:
            return probs[: self.vocab_size] / probs[: self.vocab_size].sum()
        return torch.nn.functional.pad(probs, (0, self.vocab_size - n))

    def propose(self, state: NeuralState, context: DraftContext) -> Draft:
        if context.max_tokens <= 0:
            return Draft.empty()
        logits = self._sync(state, context.tokens)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        while True:
            q = self._fit(logits_to_probs(logits, context.sampling))
            token = sample(q, context.generator, greedy=context.sampling.greedy)
            tokens.append(token)
            rows.append(q)
            if len(tokens) >= context.max_tokens or float(q[token]) < context.confidence_threshold:
                break
            logits = self._forward([token], state.cache).logits[-1]
            state.cached.append(token)
        return Draft(tokens, torch.stack(rows))
