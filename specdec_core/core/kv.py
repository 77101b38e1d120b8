"""KV caches and their verbs: crop (roll back to a length) and keep (retain a prefix plus chosen positions).

A transformers `DynamicCache` is handled here; another backend's cache (backends/llamacpp.py) is an object with the
same verbs as methods (`length`, `crop`, `keep`, `copy`), made by its model's `new_cache()`."""
from __future__ import annotations

import copy

import torch
from transformers import DynamicCache


def new_cache(model=None):
    """An empty cache for `model`: its backend's own (`model.new_cache()`), else a transformers cache that grows per
    layer as the model writes to it."""
    make = getattr(model, "new_cache", None)
    return make() if make is not None else DynamicCache()


def copy_cache(cache):
    """An independent copy (its own tensors): one prompt pass can seed many runs, each growing its own copy."""
    return copy.deepcopy(cache) if isinstance(cache, DynamicCache) else cache.copy()


def cache_length(cache) -> int:
    return cache.get_seq_length() if isinstance(cache, DynamicCache) else cache.length


def crop(cache, length: int) -> None:
    """Drop cached positions >= length, in place. (transformers 5 takes the count to remove, as a negative number.)"""
    if not isinstance(cache, DynamicCache):
        return cache.crop(length)
    excess = cache.get_seq_length() - length
    if excess < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if excess:
        cache.crop(-excess)


def keep(cache, prefix: int, positions: list[int]) -> None:
    """Retain cached positions [0, prefix) followed by `positions` (each >= prefix, ascending), in place: after a tree
    verification this keeps the accepted path's keys and values and drops its siblings'."""
    if not isinstance(cache, DynamicCache):
        return cache.keep(prefix, positions)
    if positions == list(range(prefix, prefix + len(positions))):
        return crop(cache, prefix + len(positions))
    index = None
    for layer in cache.layers:
        if index is None or index.device != layer.keys.device:
            index = torch.tensor(list(range(prefix)) + positions, device=layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)
