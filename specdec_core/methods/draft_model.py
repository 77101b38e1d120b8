"""A smaller model sharing the target's tokenizer proposes tokens (classic speculative decoding)."""
from __future__ import annotations

from specdec_core.backends.lm import LanguageModel
from specdec_core.methods.neural import NeuralDrafter


class DraftModelDrafter(NeuralDrafter):
    def __init__(self, draft: LanguageModel, target_vocab_size: int):
        super().__init__(draft.forward, target_vocab_size, draft.new_cache)
        self.model = draft
