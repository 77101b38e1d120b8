"""Prompt lookup: find the latest earlier occurrence of the last n tokens in prompt + output and propose what
followed it. No model, no q (a deterministic proposal: the verifier treats q as one-hot)."""
from __future__ import annotations

from ..config import LookupConfig
from .base import Draft, DraftContext


def find_continuation(tokens: list[int], max_ngram: int, min_ngram: int, max_tokens: int) -> list[int]:
    """What followed an earlier occurrence of the longest matching suffix n-gram: the latest occurrence with a full
    `max_tokens` continuation, else the one with the longest continuation."""
    if max_tokens <= 0:
        return []
    for n in range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1):
        suffix = tokens[-n:]
        best: list[int] = []
        for start in range(len(tokens) - n - 1, -1, -1):  # latest first, excluding the suffix itself
            if tokens[start : start + n] == suffix:
                follow = tokens[start + n : start + n + max_tokens]
                if len(follow) == max_tokens:
                    return follow
                best = follow if len(follow) > len(best) else best
        if best:
            return best
    return []


class LookupDrafter:
    source = "lookup"

    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config

    def propose(self, context: DraftContext) -> Draft:
        tokens = find_continuation(
            context.tokens, self.config.max_ngram_size, self.config.min_ngram_size, context.max_tokens
        )
        return Draft(tokens, None)

    def observe(self, num_accepted: int) -> None:
        pass
