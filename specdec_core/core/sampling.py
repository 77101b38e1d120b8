"""Logits -> probabilities and sampling. Written once; prefill, draft, verify and plain decoding all use it,
so the draft's q and the target's p are warped identically (the acceptance ratio p/q depends on it)."""
from __future__ import annotations

import torch

from specdec_core.core.config import SamplingConfig


def logits_to_probs(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """float32 probabilities over the last dim after temperature, top-k and top-p.

    Greedy (temperature 0) returns the untempered softmax: decisions use argmax, the probabilities are for display.
    """
    logits = logits.float()
    if sampling.greedy:
        return torch.softmax(logits, dim=-1)
    logits = logits / sampling.temperature
    if sampling.top_k > 0 and sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= sampling.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def expand_vocab(probs: torch.Tensor, ids: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """Probabilities over a vocabulary subset `ids` (a head's draft vocabulary) -> rows over the whole vocabulary,
    zero outside the subset (None: already whole)."""
    if ids is None:
        return probs
    out = torch.zeros(*probs.shape[:-1], vocab_size, device=probs.device)
    return out.index_copy_(-1, ids, probs)


def sample(probs: torch.Tensor, generator: torch.Generator | None, greedy: bool = False) -> int:
    """One token id from a 1-D distribution (argmax when greedy)."""
    if greedy:
        return int(torch.argmax(probs))
    return int(torch.multinomial(probs, 1, generator=generator))


def uniform(generator: torch.Generator | None) -> float:
    """One U(0, 1) draw from the request's generator."""
    device = generator.device if generator is not None else "cpu"
    return float(torch.rand((), generator=generator, device=device))
