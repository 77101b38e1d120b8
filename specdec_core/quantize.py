"""Cheaper draft models: dynamic int8 quantisation of every Linear layer (weights int8, activations quantised per
call). Only ever applied to the draft: it changes q, and exact verification keeps the output the target's."""
from __future__ import annotations

import copy
import warnings

import torch

from .lm import LanguageModel


def int8_dynamic(lm: LanguageModel) -> LanguageModel:
    """A float32 copy of `lm` with torch's dynamic int8 Linear layers (CPU; the LM head included)."""
    if lm.device.type != "cpu":
        raise ValueError("dynamic int8 quantisation runs on the CPU only")
    model = copy.deepcopy(lm.model).float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        from torch.ao.quantization import quantize_dynamic

        model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return LanguageModel(model, f"{lm.name}-int8")
