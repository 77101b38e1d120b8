"""The target's features: its final hidden state (what the LM head reads) at every committed position but the last.

Row i is what the target computed after token i, the state that predicted token i+1. The prompt pass yields the rows
for the prompt, each verify forward the rows along the accepted branch, so a run collects them for free. Medusa heads
read the last row; an EAGLE head feeds every row since its own cache ends."""
from __future__ import annotations

import torch


class Features:
    """Append-only rows, kept as chunks (no copy of the whole history per round)."""

    def __init__(self, rows: torch.Tensor | None = None):
        self._chunks: list[tuple[int, torch.Tensor]] = []  # (offset of the chunk's first row, rows)
        self.length = 0
        if rows is not None:
            self.extend(rows)

    def __len__(self) -> int:
        return self.length

    def extend(self, rows: torch.Tensor) -> None:
        if rows.shape[0]:
            self._chunks.append((self.length, rows))
            self.length += rows.shape[0]

    def last(self) -> torch.Tensor | None:
        return self._chunks[-1][1][-1] if self._chunks else None

    def since(self, start: int) -> torch.Tensor:
        """Rows start .. len-1 as one [n, hidden] tensor."""
        if not 0 <= start <= self.length:
            raise IndexError(f"rows from {start} requested; {self.length} held")
        parts = [rows[max(0, start - offset):] for offset, rows in self._chunks if offset + rows.shape[0] > start]
        if not parts:
            return self._chunks[-1][1][:0] if self._chunks else torch.empty(0)
        return parts[0] if len(parts) == 1 else torch.cat(parts)
