"""Token trees: a draft with several candidates per position, verified in one target forward.

A tree is a list of `parents`: node i's parent is node parents[i], or -1 for the root (the last committed token).
Nodes come in topological order (a parent before its children). A chain is the tree [-1, 0, 1, ...].
"""
from __future__ import annotations

import torch


def chain_parents(n: int) -> list[int]:
    return list(range(-1, n - 1))


def depths(parents: list[int]) -> list[int]:
    """Distance from the root (children of the root have depth 1)."""
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def ancestors_mask(parents: list[int]) -> torch.Tensor:
    """[n+1, n+1] bool: row j may attend to column k (root = 0, node i = i+1): k is j itself or an ancestor of j."""
    n = len(parents)
    mask = torch.zeros(n + 1, n + 1, dtype=torch.bool)
    mask[:, 0] = True
    for i, p in enumerate(parents):
        row = i + 1
        if p >= 0:
            mask[row] = mask[p + 1]
        mask[row, row] = True
    return mask


def attention_mask(parents: list[int], past: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive 4-D mask [1, 1, n+1, past+n+1] for (root + nodes) attending to `past` cached positions + the tree."""
    tree = ancestors_mask(parents)
    allowed = torch.cat([torch.ones(tree.shape[0], past, dtype=torch.bool), tree], dim=1)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def children(parents: list[int]) -> dict[int, list[int]]:
    """Node -> its children in order (key -1 for the root)."""
    out: dict[int, list[int]] = {-1: []}
    for i, p in enumerate(parents):
        out.setdefault(p, []).append(i)
        out.setdefault(i, [])
    return out
