"""How the target's weights are represented on this machine, and the choice `auto` makes.

Representations: `bf16`, `fp16`, `fp32` (dense) and `int8` (weight-only int8 per output channel with bf16
activations, CPU; `quantize.Int8WeightOnlyLinear`). Every one runs bit-exact (`exact.make_exact`): a verify forward
computes each position as plain decoding does, so both lanes of a race, which always share the target, agree token
for token. `auto` takes bf16 (fp16 without bf16 support) on a GPU; on a CPU it times one of the target's own MLP layers
in bf16 and in int8 for 1, 6 and 16 rows (plain decoding, a verify forward, a big tree) and keeps the faster: bf16
where it runs in hardware (AMX), int8 where bf16 is emulated (AVX2 laptops, where int8 is ~2x faster).
"""
from __future__ import annotations

import copy
import functools
import math
import time
from dataclasses import dataclass

import torch

from specdec_core.backends.exact import Blocked, make_exact, probe_linear, self_check
from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.models import auto_device, load_model
from specdec_core.backends.quantize import Int8WeightOnlyLinear, int8_weight_only, load_int4, load_int8
from specdec_core.core.config import ConfigError
from specdec_core.settings import TARGET_REPRESENTATIONS, draft_representation

REPRESENTATIONS = TARGET_REPRESENTATIONS
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "int8": torch.bfloat16}
LABELS = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "int8": "int8 weight-only"}
TIMED_ROWS = (1, 6, 16)


def offered(device: torch.device) -> tuple[str, ...]:
    """The representations this device can run as an exact target."""
    if device.type == "cpu":
        return ("bf16", "fp32", "int8")
    if device.type == "cuda":
        return ("bf16", "fp16", "fp32") if torch.cuda.is_bf16_supported() else ("fp16", "fp32")
    return ("fp16", "fp32")


def parse(name: str, device: torch.device) -> str:
    """A representation name for this device ('auto' stays 'auto'), or ConfigError naming those offered."""
    if name == "auto":
        return name
    choices = offered(device)
    if name not in choices:
        known = "unknown" if name not in REPRESENTATIONS else f"not supported on {device.type}"
        raise ConfigError(f"target representation {name!r} is {known}; this machine offers auto, {', '.join(choices)}")
    return name


def cpuinfo(field_name: str) -> str:
    """The first value of a /proc/cpuinfo field, e.g. "flags" (the CPU's features) or "model name"; empty where there
    is none."""
    try:
        lines = open("/proc/cpuinfo").read().splitlines()
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(field_name)), "")


def isa() -> str:
    """The CPU instruction set PyTorch dispatches to (e.g. AVX2, AVX512), with AMX noted where the CPU has it."""
    cap = torch.backends.cpu.get_cpu_capability()
    return f"{cap}+AMX" if "amx_bf16" in cpuinfo("flags").split() and cap.startswith("AVX512") else cap


@dataclass(frozen=True)
class Choice:
    representation: str
    reason: str  # one line: what was measured, or that it was asked for
    ms: dict[str, list[float]] | None = None  # measured: representation -> ms per TIMED_ROWS


def _time_ms(layers: dict[str, torch.nn.Module], rows: int, dtype: torch.dtype, reps: int = 9) -> dict[str, float]:
    """Fastest of `reps` calls per layer, the layers taking turns: a burst of other work on the machine (a browser
    starting, another process) slows one call of each, not one layer's every call, so it cannot flip the choice."""
    x = torch.randn(rows, next(iter(layers.values())).in_features, dtype=dtype)
    best = {name: float("inf") for name in layers}
    for _ in range(reps + 1):  # the first round warms up and counts like any other: min ignores it if slow
        for name, layer in layers.items():
            t0 = time.perf_counter()
            layer(x)
            best[name] = min(best[name], (time.perf_counter() - t0) * 1e3)
    return best


def faster(ms: dict[str, list[float]]) -> str:
    """bf16 or int8, from their ms per TIMED_ROWS: int8 if the geometric mean of its per-row-count ratio to bf16 is
    below 1. A sum of milliseconds let the slowest case decide, and that case grows most when another program shares
    the cores (a browser on the same laptop: int8's 16 rows went 3.4 -> 7.7 ms on a 2-core Zen 4 and flipped the
    choice); ratios weigh each row count alike."""
    ratios = [i / b for i, b in zip(ms["int8"], ms["bf16"])]
    return "int8" if math.prod(ratios) ** (1 / len(ratios)) < 1.0 else "bf16"


@torch.inference_mode()
def choose_cpu(model: torch.nn.Module) -> Choice:
    """bf16 or int8 for this CPU: time the model's largest decoder Linear both ways for TIMED_ROWS rows, each as the
    bit-exact target will run it (a layer that is not row-invariant here runs in fixed blocks: time those)."""
    def as_run(lay: torch.nn.Module) -> torch.nn.Module:
        rows = probe_linear(lay).rows
        return Blocked(lay, rows) if rows else lay

    layer = max((m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "lm_head" not in n),
                key=lambda m: m.in_features * m.out_features)
    dense = copy.deepcopy(layer).to(torch.bfloat16)
    int8 = Int8WeightOnlyLinear(dense)
    runs = {"bf16": as_run(dense), "int8": as_run(int8)}
    timed = [_time_ms(runs, r, torch.bfloat16) for r in TIMED_ROWS]
    ms = {name: [t[name] for t in timed] for name in runs}
    best = faster(ms)
    shown = "; ".join(f"{k} " + "/".join(f"{v:.2f}" for v in ms[k]) for k in ms)
    rows = "/".join(map(str, TIMED_ROWS))
    return Choice(best, f"auto on {isa()}: one {layer.in_features}→{layer.out_features} layer, {rows} rows, ms: {shown}",
                  ms)


@functools.lru_cache(maxsize=4)
def load_target(name: str, device: str | None = None, representation: str = "auto") -> tuple[LanguageModel, object]:
    """(exact target LanguageModel, tokenizer): a private copy in the asked representation, made bit-exact.
    `lm.representation` names it and `lm.representation_note` says why and how each layer kind runs."""
    dev = torch.device(device) if device else auto_device()
    rep = parse(representation, dev)
    if rep == "auto" and dev.type != "cpu":
        choice = Choice(offered(dev)[0], f"auto on {dev.type}: {offered(dev)[0]}")
    elif rep == "auto":
        choice = None
    else:
        choice = Choice(rep, f"asked for {rep}")
    dtype = DTYPES[choice.representation] if choice else torch.bfloat16
    lm, tokenizer = load_model.__wrapped__(name, str(dev), str(dtype).replace("torch.", ""))
    if choice is None:
        choice = choose_cpu(lm.model)
    if choice.representation == "int8":
        lm = int8_weight_only(lm)
    strategies = make_exact(lm)
    lm.rounding = self_check(lm).logits  # measured, not assumed: 0.0 on every CPU path so far
    lm.name = name
    lm.representation = LABELS[choice.representation]
    blocked = sorted({s for s in strategies.values() if s != "direct"})
    lm.representation_note = choice.reason + ("; linear layers row-invariant as they are" if not blocked
                                              else f"; linear layers run {', '.join(blocked)} where needed")
    return lm, tokenizer


def exactness(lm: LanguageModel) -> str:
    """'bit-exact' only where a 9-token forward was measured equal to 1-token forwards to the last bit."""
    if not lm.exact:
        return "not bit-exact"
    if lm.rounding is None:
        return "exact mode (not measured)"
    if lm.rounding != 0.0:
        return f"identical up to rounding (|Δlogit| ≤ {lm.rounding:.3g})"
    rows = lm.max_verify_tokens  # a backend whose larger batches round differently verifies at most this many
    until = getattr(lm, "exact_until", None)  # ... and only while the cache is this short (llama.cpp, 2+ threads)
    if rows is None:
        return "bit-exact"
    return f"bit-exact (≤ {rows} tokens per forward" + (f" up to {until} cached, then 1)" if until else ")")


def kernels(lm) -> str:
    """Where a model's kernels run: the instruction set of its backend's CPU kernels (PyTorch's dispatch; llama.cpp's
    build, its `isa`), or the GPU type."""
    if lm.device.type != "cpu":
        return lm.device.type
    return getattr(lm, "isa", None) or isa()


def describe(lm: LanguageModel) -> str:
    """'int8 weight-only · bit-exact · AVX2' (what the page, the CLI and the JSON say about the target)."""
    return f"{lm.representation} · {exactness(lm)} · {kernels(lm)}"


DENSE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def load_draft(name: str, device: str | None = None, representation: str = "auto", dtype: str | None = None,
               per_channel: bool = True) -> LanguageModel:
    """The draft model in its representation (settings.draft_representation decides what `auto` means here): dynamic
    int8, int4 weight-only, or dense in `dtype` (or the representation's dtype; None: the device's default). The
    draft only changes the guesses, never the output."""
    dev = torch.device(device) if device else auto_device()
    rep = draft_representation(representation, dev.type, dtype)
    if rep == "int4":
        return load_int4(name, device)
    if rep == "int8":
        return load_int8(name, device, per_channel=per_channel)
    return load_model(name, device, dtype or DENSE.get(rep))[0]
