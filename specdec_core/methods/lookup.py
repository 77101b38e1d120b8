"""Prompt lookup: find the earliest occurrence of the last n tokens in prompt + output and propose what followed it.
No model, no q (a deterministic proposal: the verifier treats q as one-hot)."""
from __future__ import annotations

from specdec_core.core.config import LookupConfig
from specdec_core.core.drafter import Draft, DraftContext, Stateless


def find_continuation(tokens: list[int], max_ngram: int, min_ngram: int, max_tokens: int) -> list[int]:
    """What followed the earliest occurrence of the longest matching suffix n-gram (n from max_ngram down).

    Earliest, as transformers does: in an edit or copy task the source text sits in the prompt, ahead of our own copy
    of it (simulated on the summarise suite's greedy outputs: 103 rounds for 384 tokens vs 110 taking the latest
    match; docs/performance.md)."""
    if max_tokens <= 0:
        return []
    for n in range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1):
        suffix = tokens[-n:]
        for start in range(len(tokens) - n):  # earliest first, excluding the suffix itself
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + max_tokens]
    return []


class LookupDrafter(Stateless):
    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config

    def propose(self, state, context: DraftContext) -> Draft:
        tokens = find_continuation(
            context.tokens, self.config.max_ngram_size, self.config.min_ngram_size, context.max_tokens
        )
        return Draft(tokens, None)
