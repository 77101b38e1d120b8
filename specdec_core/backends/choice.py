"""`--backend auto`: per machine, the backend whose plain decoding is fastest end to end, so every speedup the page,
the CLI and the bench show is measured against the fastest plain decoding this machine offers.

The rule, in order:
1. a CUDA device: torch (the llama.cpp build here is a CPU build);
2. llama-cpp-python not installed, or a target llama.cpp cannot run (it runs the embedded GGUF files): torch, and the
   reason says how to get the other;
3. otherwise both are measured on this machine: one REFERENCE_PROMPT-token prompt pass and REFERENCE_STEPS one-token
   steps each, and the one with the higher end-to-end tokens/s for a REFERENCE_PROMPT-token prompt and
   REFERENCE_NEW new tokens wins. The result is cached per (CPU, threads, torch, llama.cpp, target, representation)
   under the cache dir, so it is measured once (about half a minute) and every later start reads it.
"""
from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from specdec_core.backends import llamacpp
from specdec_core.backends.models import EMBEDDED, auto_device
from specdec_core.backends.representation import cpuinfo, isa
from specdec_core.core.kv import new_cache
from specdec_core.settings import BACKENDS, cache_root

AUTO = "auto"
REFERENCE_PROMPT = 120  # tokens: the profile's prompt length
REFERENCE_NEW = 128  # tokens: the CLI's default answer
REFERENCE_STEPS = 12  # one-token steps timed (median) per backend
VERSION = 3  # 2: llama.cpp's weights repacked (its default); 3: keyed by llama.cpp's kernels too (`build()`)


@dataclass(frozen=True)
class Choice:
    backend: str
    reason: str  # one line for the status line, the CLI's stderr and the JSON
    measured: dict[str, dict] = field(default_factory=dict)  # backend -> {prefill_ms, step_ms, tokens_per_s}
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def parse(name: str | None) -> str:
    name = (name or AUTO).strip().lower()
    if name not in (AUTO,) + BACKENDS:
        raise ValueError(f"unknown backend {name!r}: one of {AUTO}, {', '.join(BACKENDS)}")
    return name


@torch.inference_mode()
def plain_speed(target) -> dict:
    """A prompt pass of REFERENCE_PROMPT tokens (best of 2) and the median of REFERENCE_STEPS one-token forwards on
    `target` (any backend), and the end-to-end tokens/s they give for the reference request."""
    vocab = target.vocab_size
    prompt = [(7 + 31 * i) % vocab for i in range(REFERENCE_PROMPT)]
    prefill = []
    for _ in range(2):
        cache = new_cache(target)
        t0 = time.perf_counter()
        target.prefill(prompt, cache)
        prefill.append(time.perf_counter() - t0)
    steps = []
    for i in range(REFERENCE_STEPS + 1):  # the first warms up and is not counted
        t0 = time.perf_counter()
        target.forward([(11 + 17 * i) % vocab], cache)
        steps.append(time.perf_counter() - t0)
    prefill_s, step_s = min(prefill), statistics.median(steps[1:])
    seconds = prefill_s + REFERENCE_NEW * step_s  # the prompt pass gives the first token; +1 step per further one
    return {"prefill_ms": round(prefill_s * 1e3, 2), "step_ms": round(step_s * 1e3, 2),
            "tokens_per_s": round(REFERENCE_NEW / seconds, 3)}


def pick(measured: dict[str, dict]) -> str:
    """The backend with the highest end-to-end tokens/s (torch on a tie: it offers every method)."""
    return max(measured, key=lambda b: (measured[b]["tokens_per_s"], b == "torch"))


def reason_of(measured: dict[str, dict], best: str) -> str:
    shown = " vs ".join(f"{display(b)} {m['tokens_per_s']:.1f} tok/s (T(1) {m['step_ms']:.0f} ms)"
                        for b, m in sorted(measured.items(), key=lambda x: -x[1]["tokens_per_s"]))
    return (f"auto: {display(best)}, the fastest plain decoding here ({shown}; {REFERENCE_PROMPT}-token prompt + "
            f"{REFERENCE_NEW} tokens, measured on {isa()})")


def display(backend: str) -> str:
    """What the page and the CLI call a backend."""
    return {"torch": "PyTorch", "llamacpp": "llama.cpp", AUTO: "auto"}.get(backend, backend)


def key(target_name: str, target_repr: str, threads: int) -> dict:
    return {"cpu": platform.processor() or platform.machine(), "isa": isa(), "threads": threads,
            "torch": torch.__version__, "llamacpp": llamacpp.version(), "llamacpp_build": llamacpp.build(),
            "target": target_name, "target_repr": target_repr, "cpu_model": cpuinfo("model name"),
            "cpu_flags": hashlib.md5(cpuinfo("flags").encode()).hexdigest()[:12], "version": VERSION}


def cache_path(k: dict) -> Path:
    return cache_root() / "backend-choice" / (hashlib.sha256(json.dumps(k, sort_keys=True).encode()).hexdigest()[:16]
                                              + ".json")


def rule(target_name: str, device: str | None = None, target_repr: str | None = AUTO) -> Choice | None:
    """The choice where no measurement is needed (steps 1 and 2), else None."""
    dev = torch.device(device) if device else auto_device()
    if dev.type != "cpu":
        return Choice("torch", f"auto: PyTorch on {dev.type} (the llama.cpp build here runs on the CPU)")
    if not llamacpp.available():
        return Choice("torch", f"auto: PyTorch (llama.cpp is not installed; to race it too: {llamacpp.INSTALL})")
    if target_repr not in (AUTO, None):
        return Choice("torch", f"auto: PyTorch (--target-repr {target_repr} is a PyTorch representation)")
    if target_name not in EMBEDDED:
        return Choice("torch", f"auto: PyTorch (llama.cpp runs the embedded GGUF files only, not {target_name!r})")
    return None


def choose(target_name: str, loaders: dict, device: str | None = None, target_repr: str = AUTO,
           refresh: bool = False, say=print) -> Choice:
    """The auto choice for this machine; `loaders[backend]()` gives that backend's target model (called only when
    both must be measured and no cached choice matches)."""
    fixed = rule(target_name, device, target_repr)
    if fixed is not None:
        return fixed
    k = key(target_name, target_repr, torch.get_num_threads())
    path = cache_path(k)
    if path.is_file() and not refresh:
        try:
            d = json.loads(path.read_text())
            if d.get("key") == k and d["backend"] in BACKENDS:
                return Choice(d["backend"], d["reason"], d["measured"], cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            say(f"specdec: the cached backend choice {path} is unreadable; measuring again")
    say("specdec: measuring plain decoding on each backend to pick the fastest (once per machine, ~30 s)")
    measured = {b: plain_speed(loaders[b]()) for b in BACKENDS}
    best = pick(measured)
    choice = Choice(best, reason_of(measured, best), measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": k, **choice.to_dict()}, indent=1) + "\n")
    return choice
