"""KV caches and their one verb: crop (roll back to a length)."""
from __future__ import annotations

from transformers import DynamicCache


def new_cache() -> DynamicCache:
    """An empty cache that grows per layer as the model writes to it."""
    return DynamicCache()


def cache_length(cache: DynamicCache) -> int:
    return cache.get_seq_length()


def crop(cache: DynamicCache, length: int) -> None:
    """Drop cached positions >= length, in place. (transformers 5 takes the count to remove, as a negative number.)"""
    excess = cache.get_seq_length() - length
    if excess < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if excess:
        cache.crop(-excess)
