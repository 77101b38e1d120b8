"""Streaming detokenisation: turn token ids into text pieces one round at a time, decoding only the new tokens.

Byte-level BPE can split one character over several tokens; a piece is emitted once its bytes are complete, so a
token may show an empty piece and the next one carry the character (as vLLM and TGI do)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Detokenizer:
    tokenizer: object
    ids: list[int] = field(default_factory=list)
    prefix_offset: int = 0
    read_offset: int = 0

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def add(self, token_id: int) -> str:
        """Append one token; return the new text it completes ("" while a character is still partial)."""
        self.ids.append(token_id)
        prefix = self._decode(self.ids[self.prefix_offset : self.read_offset])
        text = self._decode(self.ids[self.prefix_offset :])
        if text.endswith("\ufffd") or len(text) <= len(prefix):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return text[len(prefix) :]

    def piece(self, token_id: int) -> str:
        """One token's own text, out of context (for rejected draft tokens and probability tables)."""
        return self._decode([token_id])
