"""Cheaper draft models: dynamic int8 quantisation of every Linear layer (int8 weights, per output channel;
activations quantised per call). Only ever applied to the draft: it changes q, and exact verification keeps the
output the target's."""
from __future__ import annotations

import warnings

import torch

from .lm import LanguageModel


def int8_dynamic(lm: LanguageModel, per_channel: bool = True) -> LanguageModel:
    """Quantise `lm`'s Linear layers (the LM head included) in place; `lm` must be a float32 CPU model."""
    if lm.device.type != "cpu" or lm.dtype != torch.float32:
        raise ValueError("dynamic int8 quantisation needs a float32 model on the CPU")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

        qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
        model = quantize_dynamic(lm.model, {torch.nn.Linear: qconfig}, dtype=torch.qint8, inplace=True)
    return LanguageModel(model, f"{lm.name}-int8")


def load_int8(name: str, device: str | None = None, per_channel: bool = True) -> LanguageModel:
    """A private float32 copy of model `name` (not the shared cached one), quantised in place."""
    from .models import load_model

    return int8_dynamic(load_model.__wrapped__(name, device, "float32")[0], per_channel)
