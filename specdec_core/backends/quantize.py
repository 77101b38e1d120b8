"""Cheaper draft models: dynamic int8 quantisation of every Linear layer (int8 weights, per output channel;
activations quantised per call). Only ever applied to the draft: it changes q, and exact verification keeps the
output the target's."""
from __future__ import annotations

import warnings

import torch

from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.models import load_model


def int8_dynamic(lm: LanguageModel, per_channel: bool = True) -> LanguageModel:
    """Quantise `lm`'s Linear layers (the LM head included) in place; `lm` must be a float32 CPU model."""
    if lm.device.type != "cpu" or lm.dtype != torch.float32:
        raise ValueError("dynamic int8 quantisation needs a float32 model on the CPU")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

        qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
        model = quantize_dynamic(lm.model, {torch.nn.Linear: qconfig}, dtype=torch.qint8, inplace=True)
    out = LanguageModel(model, f"{lm.name}-int8")
    out.representation = f"int8 dynamic (per {'channel' if per_channel else 'tensor'})"
    return out


def load_int8(name: str, device: str | None = None, per_channel: bool = True) -> LanguageModel:
    """A private float32 copy of model `name` (not the shared cached one), quantised in place."""
    return int8_dynamic(load_model.__wrapped__(name, device, "float32")[0], per_channel)


class WeightOnlyLinear(torch.nn.Module):
    """A Linear whose weights are stored quantised and whose activations stay bf16: subclasses pack the weights and
    give `_matmul(rows)` (rows: a contiguous [n, in_features] bf16 matrix); the bias and the shapes are handled here."""

    activation_dtype = torch.bfloat16

    def _keep(self, linear: torch.nn.Linear) -> None:
        self.in_features, self.out_features = linear.in_features, linear.out_features
        bias = None if linear.bias is None else linear.bias.detach().to(self.activation_dtype)
        self.register_buffer("bias", bias)

    def _matmul(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(self.activation_dtype)
        if flat.shape[0] == 0:
            return flat.new_zeros(*x.shape[:-1], self.out_features)
        y = self._matmul(flat.contiguous())
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


class Int8WeightOnlyLinear(WeightOnlyLinear):
    """A Linear with int8 weights (symmetric, one scale per output channel) and bf16 activations, through
    `torch.ops.aten._weight_int8pack_mm`: every output row depends on its own input row only (no activation
    quantisation across rows), so it can serve as an exact target. On an AVX2 CPU it is ~1.7x faster than dense
    bf16 for one row and ~3x for six (docs/performance.md)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self._keep(linear)
        w = linear.weight.detach().float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127
        self.register_buffer("weight", torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8).contiguous())
        self.register_buffer("scales", scales.to(self.activation_dtype))

    def dense_rows(self, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight, bias) dequantised to bf16, for output rows `ids` (all when None)."""
        w, s, b = (self.weight, self.scales, self.bias) if ids is None else (
            self.weight[ids], self.scales[ids], None if self.bias is None else self.bias[ids])
        return (w.float() * s.float()[:, None]).to(self.activation_dtype), b

    def _matmul(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int8pack_mm(rows, self.weight, self.scales)


class Int4WeightOnlyLinear(WeightOnlyLinear):
    """A Linear with 4-bit weights (asymmetric, one scale and zero per group of `group` inputs of an output channel)
    and bf16 activations, through `torch.ops.aten._weight_int4pack_mm_for_cpu`. For drafts only (it changes q, never
    the output). On a Zen 5 (AVX-512) it runs the 0.5B draft's step in 17 ms against 21 for dynamic int8, but the
    draft then agrees with the target less often and the race is slower (docs/performance.md); with AVX2 kernels it
    is slower still (33 ms). So it is offered (`--draft-repr int4`), never picked by `auto`."""

    group = 64

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self._keep(linear)
        if self.in_features % self.group:
            raise ValueError(f"int4 needs in_features divisible by {self.group}, got {self.in_features}")
        w = linear.weight.detach().float().reshape(self.out_features, -1, self.group)
        low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        scale = ((high - low) / 15).clamp(min=1e-8)
        q = torch.round((w - low) / scale).clamp(0, 15).to(torch.int32).reshape(self.out_features, self.in_features)
        zero = low + 8 * scale  # the kernel computes w = (q - 8) * scale + zero
        self.register_buffer("weight", torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1))
        sz = torch.stack([scale.squeeze(-1), zero.squeeze(-1)], dim=-1)  # [out, groups, 2]
        self.register_buffer("scales_zeros", sz.transpose(0, 1).contiguous().to(self.activation_dtype))

    def _matmul(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.weight, self.group, self.scales_zeros)


def int4_weight_only(lm: LanguageModel) -> LanguageModel:
    """Replace every Linear of a bf16 CPU draft model (the LM head included) by an Int4WeightOnlyLinear, in place."""
    if lm.device.type != "cpu" or lm.dtype != torch.bfloat16:
        raise ValueError("int4 weight-only quantisation needs a bfloat16 model on the CPU")
    replace_linears(lm.model, Int4WeightOnlyLinear)
    out = LanguageModel(lm.model, f"{lm.name}-int4")
    out.representation = f"int4 weight-only (group {Int4WeightOnlyLinear.group})"
    return out


def load_int4(name: str, device: str | None = None) -> LanguageModel:
    """A private bf16 copy of model `name`, its linear layers int4 weight-only (a draft representation)."""
    return int4_weight_only(load_model.__wrapped__(name, device, "bfloat16")[0])


def int8_weight_only(lm: LanguageModel) -> LanguageModel:
    """Replace every Linear of a bf16 CPU model (the LM head included) by an Int8WeightOnlyLinear, in place."""
    if lm.device.type != "cpu" or lm.dtype != torch.bfloat16:
        raise ValueError("int8 weight-only quantisation needs a bfloat16 model on the CPU")
    int8_linears(lm.model)  # a tied LM head gets its own int8 copy; the input embedding stays bf16
    return LanguageModel(lm.model, f"{lm.name}-int8wo")


def int8_linears(module: torch.nn.Module) -> None:
    """Replace every Linear inside `module` by an Int8WeightOnlyLinear, in place (a target, or a head that runs as
    the target does)."""
    replace_linears(module, Int8WeightOnlyLinear)


def replace_linears(module: torch.nn.Module, kind: type[WeightOnlyLinear]) -> None:
    """Replace every torch.nn.Linear inside `module` by `kind(linear)`, in place."""
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, kind(child))
