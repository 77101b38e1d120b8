"""KV caches and their verbs: crop (roll back to a length) and keep (retain a prefix plus chosen positions)."""
from __future__ import annotations

import copy

import torch
from transformers import DynamicCache


def new_cache() -> DynamicCache:
    """An empty cache that grows per layer as the model writes to it."""
    return DynamicCache()


def copy_cache(cache: DynamicCache) -> DynamicCache:
    """An independent copy (its own tensors): one prompt pass can seed many runs, each growing its own copy."""
    return copy.deepcopy(cache)


def cache_length(cache: DynamicCache) -> int:
    return cache.get_seq_length()


def crop(cache: DynamicCache, length: int) -> None:
    """Drop cached positions >= length, in place. (transformers 5 takes the count to remove, as a negative number.)"""
    excess = cache.get_seq_length() - length
    if excess < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if excess:
        cache.crop(-excess)


def keep(cache: DynamicCache, prefix: int, positions: list[int]) -> None:
    """Retain cached positions [0, prefix) followed by `positions` (each >= prefix, ascending), in place: after a tree
    verification this keeps the accepted path's keys and values and drops its siblings'."""
    if positions == list(range(prefix, prefix + len(positions))):
        return crop(cache, prefix + len(positions))
    index = None
    for layer in cache.layers:
        if index is None or index.device != layer.keys.device:
            index = torch.tensor(list(range(prefix)) + positions, device=layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)
