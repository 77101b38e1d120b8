"""KV rollback: crop then re-forward equals a fresh forward (full model and a layer subset)."""
from __future__ import annotations

import pytest
import torch

from conftest import PROMPT
from specdec_core.core.kv import cache_length, crop, new_cache


@pytest.mark.parametrize("layers", [None, (0, 2, 3)], ids=["all-layers", "layer-subset"])
def test_crop_then_reforward_equals_fresh_forward(target, layers):
    def forward(ids, cache):
        return target.forward(ids, cache) if layers is None else target.forward_layers(ids, cache, layers)

    fresh = forward(PROMPT + [7, 8, 9], new_cache()).logits
    cache = new_cache()
    forward(PROMPT, cache)
    forward([50, 51, 52, 53], cache)  # a rejected draft
    crop(cache, len(PROMPT))
    assert cache_length(cache) == len(PROMPT)
    again = forward([7, 8, 9], cache).logits
    torch.testing.assert_close(again, fresh[len(PROMPT):], rtol=1e-5, atol=1e-5)


def test_crop_rejects_growing(target):
    cache = new_cache()
    target.forward(PROMPT, cache)
    crop(cache, len(PROMPT))  # no-op
    with pytest.raises(ValueError):
        crop(cache, len(PROMPT) + 1)
