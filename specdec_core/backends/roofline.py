"""A roofline for one decoding forward, so the page and `whatif` can say why speculation pays on one device and not on
another, with every input stated.

    T(n) ≈ overhead + max(bytes read / bandwidth, FLOPs(n) / peak)

- bytes read: the target's weights in its representation, once per forward (every row shares the read), plus the KV
  cache of `context` earlier tokens (K and V, every layer, bf16);
- FLOPs(n) = 2 · parameters · n + attention (4 · layers · heads · head_dim · n · (context + n));
- bandwidth and peak: a catalogue device's datasheet numbers (each with its source; `estimate` where the datasheet
  gives none and we derived it), or this machine's measured ones (`this_machine`): the profile's copy rate and, per
  row count n, the rate the target's own matmul kernels reach on n rows with their weights in cache (the profile's
  matmul probe: ggml's kernels for llama.cpp, the first layer's linears for PyTorch). A hardware peak is the wrong
  number on a CPU: llama.cpp's Q4_K kernels for 1-3 rows unpack the 4-bit weights once per row and reach a third of
  the rate of its many-row kernel, so each verified row costs nearly a step of arithmetic. Without a probe (an older
  profile) the peak is the prompt pass's rate (2 · parameters · prompt tokens/s);
- overhead: per forward, what neither term explains: calibrated on this machine from the measured T(1); on a GPU an
  estimate of kernel launches (eager PyTorch, one batch-1 forward).

Utilization = bytes read per second / bandwidth (what the seed's "10–15% → 30–40%" measures).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from specdec_core.backends.models import EMBEDDED, embedded_dir

GB = 1e9
KV_BYTES = 2  # bf16 K and V entries


@dataclass(frozen=True)
class Shape:
    """What a decoder's arithmetic needs: parameters in its linear layers (lm_head included, embeddings excluded: a
    forward reads n embedding rows, not the table), layers, attention heads and head size."""

    params: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int

    @staticmethod
    def from_config(c: dict) -> "Shape":
        h, inter, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
        heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        d = c.get("head_dim") or h // heads
        attn = h * heads * d + 2 * h * kv * d + heads * d * h
        mlp = 3 * h * inter
        return Shape(layers * (attn + mlp) + h * vocab, layers, heads, kv, d)

    def kv_bytes(self, tokens: int) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * KV_BYTES * tokens

    def flops(self, n: int, context: int) -> float:
        return 2 * self.params * n + 4 * self.layers * self.heads * self.head_dim * n * (context + n)


def shape_of(name_or_dir) -> Shape:
    """The Shape of an embedded model (by name) or a local model directory (its config.json)."""
    path = Path(embedded_dir(name_or_dir) if name_or_dir in EMBEDDED else name_or_dir) / "config.json"
    return Shape.from_config(json.loads(path.read_text()))


def shape_of_model(name: str, lm) -> Shape:
    """The Shape of a loaded model: its transformers config, or (llama.cpp) the embedded model's config.json."""
    config = getattr(getattr(lm, "model", None), "config", None)
    return Shape.from_config(config.to_dict()) if config is not None else shape_of(name)


# Bytes per weight of each representation (int8 weight-only: + one bf16 scale per output row, negligible; Q4_K_M: 4.85
# bits as llama.cpp's quantize tool reports for this mix, the file is what one forward reads).
BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "int8": 1.0, "Q4_K_M": 4.85 / 8}


@dataclass(frozen=True)
class Device:
    name: str
    kind: str  # "roofline" (datasheet) or "measured" (this machine)
    bandwidth_gb_s: float
    peak_tflops: float  # dense, in the weights' compute dtype (bf16 tensor cores on GPUs; fp32 FMA on CPUs)
    source: str
    weights: str = "bf16"  # the target's representation there (what our auto picks on such a device)
    overhead_ms: float = 0.0
    estimate: bool = False  # a number derived by us, not printed on a datasheet
    note: str = ""
    weight_bytes: float | None = None  # measured: what one forward of the target reads (else params x BYTES_PER_PARAM)
    peak_by_rows: dict[int, float] | None = None  # measured: TFLOPS the target's kernels reach on n rows (the probe)

    def to_dict(self) -> dict:
        return asdict(self)

    def peak(self, n: int) -> float:
        """TFLOPS on n rows: the probe's rate at the largest probed row count <= n (its smallest below), else the
        device's peak."""
        if not self.peak_by_rows:
            return self.peak_tflops
        probed = sorted(self.peak_by_rows)
        return self.peak_by_rows[max([r for r in probed if r <= n], default=probed[0])]


GPU_OVERHEAD_MS = 2.0  # estimate: ~28 layers x ~12 kernels x ~6 us launch each, eager PyTorch at batch 1

CATALOGUE = (
    Device("NVIDIA H100 SXM", "roofline", 3350, 989, "NVIDIA H100 Tensor Core GPU datasheet: 3.35 TB/s HBM3, 989 "
           "TFLOPS BF16 dense (1979 with sparsity)", overhead_ms=GPU_OVERHEAD_MS),
    Device("NVIDIA A100 80GB SXM", "roofline", 2039, 312, "NVIDIA A100 datasheet: 2039 GB/s HBM2e, 312 TFLOPS BF16 "
           "dense", overhead_ms=GPU_OVERHEAD_MS),
    Device("NVIDIA L4", "roofline", 300, 121, "NVIDIA L4 datasheet: 300 GB/s GDDR6, 242 TFLOPS BF16 with sparsity "
           "(121 dense)", overhead_ms=GPU_OVERHEAD_MS),
    Device("NVIDIA RTX 4090", "roofline", 1008, 165, "NVIDIA Ada Lovelace architecture whitepaper: 1008 GB/s GDDR6X, "
           "165.2 TFLOPS FP16/BF16 tensor, FP32 accumulate, dense", overhead_ms=GPU_OVERHEAD_MS),
    Device("Apple M2 (GPU)", "roofline", 100, 3.6, "Apple M2 announcement (June 2022): 100 GB/s unified memory, GPU "
           "3.6 TFLOPS (FP32)", overhead_ms=GPU_OVERHEAD_MS),
    Device("Apple M2 (CPU)", "roofline", 100, 0.45, "Apple M2: 100 GB/s unified memory (datasheet); CPU peak "
           "estimated: 4 performance cores x 3.49 GHz x 4 128-bit FMA pipes x 8 FLOPs", weights="int8",
           estimate=True, note="peak is our estimate; one CPU cluster may not reach the full 100 GB/s"),
    Device("Laptop CPU, AVX2 (4 cores)", "roofline", 51.2, 0.38, "dual-channel DDR4-3200: 2 x 25.6 GB/s (JEDEC); "
           "peak estimated: 4 cores x 3.0 GHz x 2 AVX2 FMA units x 8 fp32 lanes x 2 FLOPs", weights="int8",
           estimate=True, note="a generic laptop: bandwidth from the memory standard, peak our estimate"),
)


def bytes_read(shape: Shape, weights_bytes: float, n: int, context: int) -> float:
    """One forward of n new tokens after `context` cached ones: the weights once, the cache, the n new K/V written."""
    return weights_bytes + shape.kv_bytes(context + n)


def t_ms(device: Device, shape: Shape, n: int, context: int = 120, weights_bytes: float | None = None) -> float:
    """The roofline's time for a forward of n new tokens, ms."""
    w = weights_bytes if weights_bytes is not None else device.weight_bytes or shape.params * BYTES_PER_PARAM[device.weights]
    memory = bytes_read(shape, w, n, context) / (device.bandwidth_gb_s * GB)
    compute = shape.flops(n, context) / (device.peak(n) * 1e12)
    return device.overhead_ms + max(memory, compute) * 1e3


def t_ratio(device: Device, shape: Shape, sizes=(2, 4, 8), context: int = 120,
            weights_bytes: float | None = None) -> dict[str, float]:
    one = t_ms(device, shape, 1, context, weights_bytes)
    return {str(n): round(t_ms(device, shape, n, context, weights_bytes) / one, 3) for n in sizes}


def utilization(device: Device, shape: Shape, bytes_per_second: float) -> float:
    return bytes_per_second / (device.bandwidth_gb_s * GB)


def this_machine(profile, shape: Shape, name: str = "this machine") -> Device:
    """This machine as a Device: the profile's copy rate as bandwidth, its matmul probe's rate per row count as the
    peak (the prompt pass's rate where an older profile has no probe), and the overhead that makes the roofline's T(1)
    equal the measured one."""
    probe = dict(profile.kernel_tflops) or None
    if probe:
        peak = max(probe.values())
        how = ("matmul probe (the target's kernels on n rows, weights in cache), TFLOPS: "
               + ", ".join(f"{v:.3f} ({n})" for n, v in sorted(probe.items())))
    else:
        peak = round(2 * shape.params * profile.prefill_tokens_per_s / 1e12, 4)
        how = f"effective peak = 2 x params x prompt pass {profile.prefill_tokens_per_s:.0f} tokens/s"
    device = Device(name, "measured", round(profile.bandwidth_gb_s, 2), peak,
                    f"measured here: memory copy rate {profile.bandwidth_gb_s:.1f} GB/s; {how}; {profile.isa}, "
                    f"{profile.device}", weights=profile.target_repr, weight_bytes=profile.target_bytes,
                    peak_by_rows=probe)
    overhead = max(0.0, profile.T(1) - t_ms(device, shape, 1))
    return replace(device, overhead_ms=overhead)
