"""This machine's cost curve: what a target forward of n tokens costs, what a drafting step costs, how fast a prompt
pass runs, and how much of the memory bandwidth one decoding step uses.

`python -m specdec_core profile [--json FILE]` measures it (a progress bar; ~1 minute on 2 cores) and caches it under
the cache dir per (device, ISA, torch version, model, representations); a cached profile from another machine,
torch version or representation is never used, and a corrupt one is measured again with a message. The prediction
(metrics.predicted_speedup) and the cost-aware draft length read T(n) from here.
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.representation import kernels
from specdec_core.core.kv import crop, new_cache
from specdec_core.settings import cache_root

SIZES = (1, 2, 3, 4, 6, 8, 11, 16, 17)  # plain step, chains up to 16 drafts, trees up to 16 nodes + root (17: the
# exact target runs row blocks of 16 where its kernel is not row-invariant, so T can step there)
PROMPT_TOKENS = 120
LONG_CONTEXT = 1024  # T(n) measured again after this many cached tokens: how a verify forward grows with the context
LONG_SIZES = (1, 2, 4, 8)
ROOFLINE_SIZES = (1, 2, 3, 4, 8)  # rows the matmul probe times (and T(n) is timed for, past an exact verify batch)
VERSION = 8  # 3: EAGLE drafters timed with the prompt's features (they proposed nothing before); 4: T(17) measured;
# 5: T(n) after LONG_CONTEXT tokens too; 6: llama.cpp's weights repacked (its default); 7: drafters' catch-up timed;
# 8: the matmul probe (kernel_tflops) and T(n) past llama.cpp's exact batch (unverified_ms), for the roofline


@dataclass(frozen=True)
class Timers:
    """What the profile times per method, each a fn(prompt ids) -> ms: a drafting step per drafted token (`step`), and
    for a drafter with its own cache the catch-up per token it forwards (`catch_up`)."""

    step: dict[str, Callable[[list[int]], float]]
    catch_up: dict[str, Callable[[list[int]], float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    device: str
    isa: str
    torch: str
    model: str
    target_repr: str
    draft_repr: str
    methods: list[str]  # the registered methods when measured: a newly registered one gets its cost measured
    target_ms: dict[int, float]  # n new tokens after a PROMPT_TOKENS prompt -> ms (best of 3)
    draft_ms: dict[str, float]  # method -> ms per drafted token
    prefill_tokens_per_s: float
    bandwidth_gb_s: float  # a large tensor copy: bytes read + written per second
    utilization: float  # bytes one 1-token target forward reads / T(1) / bandwidth
    target_bytes: int
    long_context_ms: dict[int, float] = field(default_factory=dict)  # n -> ms after LONG_CONTEXT cached tokens
    catch_up_ms: dict[str, float] = field(default_factory=dict)  # method -> ms per token its own cache catches up
    kernel_tflops: dict[int, float] = field(default_factory=dict)  # n -> TFLOPS the target's matmuls reach on n rows
    # with their weights in cache (the matmul probe: the roofline's compute term here)
    unverified_ms: dict[int, float] = field(default_factory=dict)  # n -> ms of a forward past the exact verify batch
    # (llama.cpp): timed for the roofline's check only, never used to verify
    version: int = VERSION

    def T(self, n: int, context: int | None = None) -> float:
        """ms for a target forward of n tokens after the profile's prompt (PROMPT_TOKENS), interpolated linearly
        between measured sizes (extrapolated past); with `context`, moved along the line through the two context
        lengths measured at that n (the KV read grows linearly with the cache), never below 60% of the short one."""
        short = _interpolate(self.target_ms, n)
        if context is None or not self.long_context_ms:
            return short
        m = min(n, max(self.long_context_ms))  # past the largest size measured long: its growth, scaled per row
        slope = ((_interpolate(self.long_context_ms, m) - _interpolate(self.target_ms, m))
                 / (LONG_CONTEXT - PROMPT_TOKENS) * n / m)
        return max(0.6 * short, short + slope * (context - PROMPT_TOKENS))

    @property
    def timed_ms(self) -> dict[int, float]:
        """n -> ms of every forward timed, past an exact verify batch too (llama.cpp's `unverified_ms`): what the page
        shows and the roofline is checked against, never what a verify plans with (`T`)."""
        return {**self.unverified_ms, **self.target_ms}

    def timed(self, n: int) -> float:
        """ms for a forward of n tokens along `timed_ms`, interpolated between the sizes timed."""
        return _interpolate(self.timed_ms, n)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "Profile":
        d = dict(d)
        d["target_ms"] = {int(k): float(v) for k, v in d["target_ms"].items()}
        d["draft_ms"] = {str(k): float(v) for k, v in d["draft_ms"].items()}
        d["long_context_ms"] = {int(k): float(v) for k, v in d.get("long_context_ms", {}).items()}
        d["catch_up_ms"] = {str(k): float(v) for k, v in d.get("catch_up_ms", {}).items()}
        for k in ("kernel_tflops", "unverified_ms"):
            d[k] = {int(n): float(v) for n, v in d.get(k, {}).items()}
        d["methods"] = [str(m) for m in d["methods"]]
        return Profile(**d)


def _interpolate(ms: dict[int, float], n: int) -> float:
    xs = sorted(ms)
    if n in ms:
        return ms[n]
    if len(xs) == 1:
        return ms[xs[0]]
    lo = max([x for x in xs if x < n], default=xs[0])
    hi = min([x for x in xs if x > n], default=None)
    if hi is None:  # past the largest: the slope of the last two sizes
        lo, hi = xs[-2], xs[-1]
    slope = (ms[hi] - ms[lo]) / (hi - lo)
    return ms[lo] + slope * (n - lo)


def machine_key(target: LanguageModel, draft_repr: str, methods: list[str]) -> dict:
    """What a cached profile must match: device, ISA, torch, model, representations, and the methods it timed (a
    newly registered method gets its cost measured)."""
    device = str(target.device)
    if target.device.type == "cuda":
        device += f" ({torch.cuda.get_device_name(target.device)})"
    else:
        device += f" ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    return {"device": device, "isa": kernels(target),
            "torch": torch.__version__, "model": target.name, "target_repr": target.representation,
            "draft_repr": draft_repr, "methods": sorted(methods)}


def cache_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "profiles" / f"{digest}.json"


def load_cached(key: dict, say=print) -> Profile | None:
    """The cached profile for exactly this key, or None (a corrupt or foreign file is reported and ignored)."""
    path = cache_path(key)
    if not path.is_file():
        return None
    try:
        profile = Profile.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError) as e:
        say(f"specdec: the cached profile {path} is unreadable ({type(e).__name__}); measuring again")
        return None
    if profile.version != VERSION or any(getattr(profile, k) != v for k, v in key.items()):
        say(f"specdec: the cached profile {path} is from another machine or version; measuring again")
        return None
    return profile


def best_ms(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def bandwidth_gb_s(device: torch.device, megabytes: int = 256) -> float:
    src = torch.empty(megabytes << 20, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    ms = best_ms(lambda: dst.copy_(src), 5)
    return 2 * src.numel() / (ms / 1e3) / 1e9


def weight_bytes(lm: LanguageModel) -> int:
    """Bytes of parameters and buffers a 1-token forward reads: everything but the input embedding table (of which one
    row is read). A backend holding its weights elsewhere says it (`weight_bytes`: a GGUF file's size)."""
    if hasattr(lm, "weight_bytes"):
        return lm.weight_bytes
    embed = lm.model.get_input_embeddings().weight
    seen, total = set(), 0
    for t in list(lm.model.parameters()) + list(lm.model.buffers()):
        if t.data_ptr() in seen or t.data_ptr() == embed.data_ptr():
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total


@torch.inference_mode()
def measure(target: LanguageModel, timers: Timers, draft_repr: str, methods: list[str],
            progress: bool = True) -> Profile:
    """Time the target for SIZES, each drafter's step and catch-up (`timers`), a prompt pass, the target's matmul
    kernels (the roofline's probe) and a memory copy."""
    vocab = min(target.vocab_size, 30000)
    prompt = [(1000 + 37 * i) % vocab for i in range(PROMPT_TOKENS)]
    new = lambda last, n: [last] + [(7 + 13 * i) % vocab for i in range(n - 1)]  # noqa: E731 - a forward's n tokens
    rows = getattr(target, "max_verify_tokens", None)  # a backend verifying at most this many rows exactly
    sizes = [n for n in SIZES if rows is None or n <= rows] + ([rows] if rows and rows not in SIZES else [])
    unverified = [n for n in ROOFLINE_SIZES if n not in sizes] if hasattr(target, "forward_unverified") else []
    steps = len(sizes) + len(timers.step) + len(timers.catch_up) + 4
    with tqdm(total=steps, desc="profile", unit="step", disable=not progress) as bar:
        cache = new_cache(target)
        t0 = time.perf_counter()
        target.prefill(prompt[:-1], cache)
        prefill = (PROMPT_TOKENS - 1) / (time.perf_counter() - t0)
        bar.update()
        base = len(prompt) - 1
        target_ms = {}
        for sweep in range(2):  # two sweeps, best of both: a shape's first forwards can pay set-up (T(1) > T(2) seen)
            for n in sizes:
                ids = new(prompt[-1], n)

                def step():
                    target.forward(ids, cache)
                    crop(cache, base)

                if sweep == 0:
                    step()  # warm-up for this shape
                target_ms[n] = round(min(best_ms(step, 3), target_ms.get(n, float("inf"))), 2)
                bar.update(sweep)
        unverified_ms = {}
        for n in unverified:
            ids = new(prompt[-1], n)

            def wide_step():
                target.forward_unverified(ids, cache)
                crop(cache, base)

            wide_step()
            unverified_ms[n] = round(best_ms(wide_step, 3), 2)
        kernel = target.kernel_tflops(ROOFLINE_SIZES) if hasattr(target, "kernel_tflops") else {}
        bar.update()
        long_ms = {}
        if target.max_positions > LONG_CONTEXT + max(sizes):
            long_prompt = [(1000 + 37 * i) % vocab for i in range(LONG_CONTEXT)]
            cache = new_cache(target)
            target.prefill(long_prompt[:-1], cache)
            verify_rows = getattr(target, "verify_rows", lambda cached: None)
            exact_rows = verify_rows(LONG_CONTEXT - 1) or max(sizes)
            for n in [n for n in LONG_SIZES if n in sizes and n <= exact_rows]:
                ids = new(long_prompt[-1], n)

                def long_step():
                    target.forward(ids, cache)
                    crop(cache, LONG_CONTEXT - 1)

                long_step()
                long_ms[n] = round(best_ms(long_step, 3), 2)
        bar.update()
        draft_ms, catch_up_ms = {}, {}
        for method, fn in timers.step.items():
            draft_ms[method] = round(fn(prompt), 2)
            bar.update()
        for method, fn in timers.catch_up.items():
            catch_up_ms[method] = round(fn(prompt), 3)
            bar.update()
        bw = bandwidth_gb_s(target.device)
        bar.update()
    nbytes = weight_bytes(target)
    util = nbytes / (target_ms[1] / 1e3) / (bw * 1e9)
    return Profile(**machine_key(target, draft_repr, methods), target_ms=target_ms, draft_ms=draft_ms,
                   prefill_tokens_per_s=round(prefill, 1), bandwidth_gb_s=round(bw, 2), utilization=round(util, 3),
                   target_bytes=nbytes, long_context_ms=long_ms, catch_up_ms=catch_up_ms, kernel_tflops=kernel,
                   unverified_ms=unverified_ms)


def get(target: LanguageModel, timers: Timers | Callable[[], Timers], draft_repr: str, methods: list[str],
        progress: bool = True, say=print, refresh: bool = False) -> Profile:
    """The cached profile for this machine and these models, measured (and cached) when missing. `timers`: the
    drafters' timers, or a function making them (called only when measuring); `methods`: every registered method
    (part of the cache key)."""
    key = machine_key(target, draft_repr, methods)
    if not refresh and (cached := load_cached(key, say)) is not None:
        return cached
    profile = measure(target, timers() if callable(timers) else timers, draft_repr, methods, progress)
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(profile.to_dict(), indent=1))
    tmp.replace(path)
    return profile
