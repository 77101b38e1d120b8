"""Warping known answers: temperature, top-k, top-p; greedy keeps the plain softmax."""
from __future__ import annotations

import torch

from specdec_core.core.config import SamplingConfig
from specdec_core.core.sampling import logits_to_probs, sample

LOGITS = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))


def test_greedy_is_softmax_and_argmax():
    probs = logits_to_probs(LOGITS, SamplingConfig())
    torch.testing.assert_close(probs, torch.tensor([0.5, 0.25, 0.15, 0.1]))
    assert sample(probs, None, greedy=True) == 0


def test_top_k_and_top_p():
    torch.testing.assert_close(logits_to_probs(LOGITS, SamplingConfig(1.0, top_k=2)), torch.tensor([2 / 3, 1 / 3, 0, 0]))
    # top-p 0.7 keeps the smallest set reaching 0.7: {0.5, 0.25}
    torch.testing.assert_close(logits_to_probs(LOGITS, SamplingConfig(1.0, top_p=0.7)), torch.tensor([2 / 3, 1 / 3, 0, 0]))
    torch.testing.assert_close(logits_to_probs(LOGITS, SamplingConfig(1.0, top_p=0.5)), torch.tensor([1.0, 0, 0, 0]))


def test_temperature_sharpens():
    hot, cold = logits_to_probs(LOGITS, SamplingConfig(2.0)), logits_to_probs(LOGITS, SamplingConfig(0.5))
    assert cold[0] > 0.5 > hot[0]
    torch.testing.assert_close(cold, torch.tensor([0.25, 0.0625, 0.0225, 0.01]) / 0.345)


def test_sampling_uses_the_generator():
    probs = torch.full((50,), 1 / 50)
    a = [sample(probs, torch.Generator().manual_seed(3)) for _ in range(3)]
    assert len(set(a)) == 1
