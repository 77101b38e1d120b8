"""The demo's models: read-only globals, loaded once in a background thread so the page serves (and shows progress)
while the embedded pair is converted on first start.

Which models: SPECDEC_TARGET / SPECDEC_DRAFT (embedded names, local directories or Hugging Face Hub ids; defaults:
the embedded Qwen2.5-Coder 1.5B / 0.5B pair); SPECDEC_TARGET_REPR: the target's representation (default auto: the
fastest bit-exact one on this machine). SPECDEC_TARGET=tiny-random serves a tiny random-weight model with the
embedded tokenizer (for tests; its text is gibberish and the page says so).

Which backend: SPECDEC_BACKEND (default auto: the backend whose plain decoding is fastest on this machine,
backends/choice.py). The page can race on another backend too: `store(backend)` loads it on first use."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import torch
from transformers import AutoTokenizer

from specdec_core.backends import choice, llamacpp
from specdec_core.backends.exact import make_exact, self_check
from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.models import embedded_dir, perturbed_copy, tiny_model
from specdec_core.backends.representation import describe, load_draft, load_target
from specdec_core.core.kv import crop, new_cache
from specdec_core.core.session import eos_token_ids
from specdec_core.methods import timing
from specdec_core.methods.registry import build_drafter
from specdec_core.settings import (BACKENDS, DEFAULT_TARGET, draft_representation, page_backend, page_draft,
                                   page_draft_repr, page_target, page_target_repr)

TINY = "tiny-random"


@dataclass(frozen=True)
class Models:
    target: LanguageModel
    draft: LanguageModel
    tokenizer: object
    eos: tuple[int, ...]
    label: str  # what the page says is running
    backend: str = "torch"  # backends/: torch or llamacpp
    backend_reason: str = ""  # why (auto's measurement, or asked for)
    _drafters: dict = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def drafter(self, method: str):
        """The method's drafter, built once and shared by every request (its per-request state comes from start())."""
        with self._lock:
            if method not in self._drafters:
                self._drafters[method] = build_drafter(method, self.target, self.draft)
            return self._drafters[method]

    @property
    def device_label(self) -> str:
        dev = self.target.device
        where = f"GPU ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
        return f"{where}, {choice.display(self.backend)}, target {describe(self.target)}"


def _load(target_name: str, draft_name: str, backend: str = "torch", reason: str = "") -> Models:
    if backend == "llamacpp":
        if target_name == TINY:
            raise ValueError("llama.cpp runs the embedded GGUF files only, not the tiny random-weight test model")
        target, tokenizer = llamacpp.load(target_name)
        draft, _ = llamacpp.load(draft_name, target=False)
        warm_up(target, draft)
        return Models(target, draft, tokenizer, eos_token_ids(tokenizer, target),
                      f"target {target_name} · draft {draft_name} (GGUF)", "llamacpp", reason)
    if target_name == TINY:
        tokenizer = _embedded_tokenizer()
        target = tiny_model(seed=0, vocab_size=len(tokenizer), num_layers=4, hidden_size=64)
        draft = perturbed_copy(target)
        make_exact(target)
        target.rounding = self_check(target).logits
        label = "tiny random-weight test model (gibberish text; for tests only)"
    else:
        target, tokenizer = load_target(target_name, None, page_target_repr())
        draft, how = _cheap_draft(draft_name, target.device.type)
        label = f"target {target_name} · draft {draft_name}{how}"
    warm_up(target, draft)
    return Models(target, draft, tokenizer, eos_token_ids(tokenizer, target), label, "torch", reason)


def resolve(requested: str) -> choice.Choice:
    """auto -> the backend whose plain decoding is fastest here (measured once per machine, cached)."""
    if requested != choice.AUTO:
        return choice.Choice(requested, f"asked for {choice.display(requested)}")
    name = page_target()
    if name == TINY:
        return choice.Choice("torch", "auto: PyTorch (the tiny test model has no GGUF)")
    loaders = {"torch": lambda: load_target(name, None, page_target_repr())[0], "llamacpp": lambda: llamacpp.load(name)[0]}
    return choice.choose(name, loaders, target_repr=page_target_repr(), say=lambda m: None)


def _cheap_draft(name: str, device: str) -> tuple[LanguageModel, str]:
    """The draft in the representation settings.draft_representation picks (the CLI's policy too): dynamic int8 on a
    CPU (a step 118 → 48 ms, α 0.79 → 0.77; docs/performance.md e3); it only changes the guesses, never the output.
    SPECDEC_DRAFT_QUANT=none keeps it dense."""
    requested = page_draft_repr()
    how = " (int8)" if draft_representation(requested, device) == "int8" else ""
    return load_draft(name, None, requested), how


def _embedded_tokenizer():
    return AutoTokenizer.from_pretrained(embedded_dir(DEFAULT_TARGET))


def warm_up(*models: LanguageModel) -> None:
    """Forwards of 1..8 tokens after a short prompt, so the first timed race does not pay one-time kernel set-up for
    the shapes a verify forward uses (the first race on this page once measured 1.02x where later ones gave 1.3-1.5x)."""
    for lm in models:
        cache = new_cache(lm)
        lm.prefill([1, 2, 3, 4], cache)
        for n in range(1, min(8, getattr(lm, "max_verify_tokens", None) or 8) + 1):
            lm.forward(list(range(5, 5 + n)), cache)
            crop(cache, 4)


class ModelStore:
    """Loads once in the background; `get()` returns the models or raises NotReady with the current status."""

    def __init__(self, backend: str = choice.AUTO):
        self.backend = backend  # asked for: auto, torch or llamacpp
        self._models: Models | None = None
        self._error: str | None = None
        self._started = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.profile = None  # this machine's cost profile, measured (or read from the cache) after the models load
        self.profile_settled = False  # measured, read or failed: nothing more will change in the status line
        self._profile_note = ""
        self._phase = ""

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._started = time.time()
                self._thread = threading.Thread(target=self._run, daemon=True, name="specdec-load")
                self._thread.start()

    def _run(self) -> None:
        try:
            self._phase = "Loading: choosing the backend, timing plain decoding on each (once per machine, about a minute)"
            picked = resolve(choice.parse(self.backend))
            self._phase = ""
            self._models = _load(page_target(), page_draft(), picked.backend, picked.reason)
        except Exception as e:  # noqa: BLE001 - shown on the page, the app keeps serving
            self._error = str(e)
            return
        self._measure_profile()

    def _measure_profile(self) -> None:
        """T(n) and drafter costs for the page's prediction; a failure is shown and the page keeps serving."""
        models = self._models
        self._profile_note = " Measuring this machine's cost profile (about a minute, once; races can run meanwhile)."
        try:
            self.profile = timing.profile(models.target, models.draft, progress=False,
                                          say=lambda m: setattr(self, "_profile_note", " " + m))
            self._profile_note = (f" Cost profile: T(1) {self.profile.T(1):.0f} ms, T(6) {self.profile.T(6):.0f} ms, "
                                  f"utilization {self.profile.utilization:.0%}.")
        except Exception as e:  # noqa: BLE001 - the prediction falls back to the bound
            self._profile_note = f" Cost profile failed ({str(e)[:120]}); predictions use the Leviathan bound."
        finally:
            self.profile_settled = True

    @property
    def settled(self) -> bool:
        """Models loaded (or failed) and the profile measured (or failed)."""
        return self._error is not None or (self._models is not None and self.profile_settled)

    @property
    def ready(self) -> bool:
        return self._models is not None

    def status(self) -> str:
        if self._models is not None:
            m = self._models
            return (f"● Models ready: {m.label} on {m.device_label} ({m.backend_reason}).{self._profile_note}")
        if self._error is not None:
            return f"✗ Could not load the models: {self._error}"
        waited = time.time() - self._started if self._started else 0
        if self._phase:
            return f"… {self._phase}: {waited:.0f}s."
        return (f"… Loading models: {waited:.0f}s. The first start converts the embedded Qwen2.5-Coder pair "
                "(about three minutes, once); later starts take seconds.")

    def get(self) -> Models:
        self.start()
        if self._models is None:
            raise NotReady(self.status())
        return self._models

    def wait(self, timeout: float = 900) -> Models:
        self.start()
        self._thread.join(timeout)
        return self.get()


class NotReady(RuntimeError):
    pass


STORE = ModelStore(page_backend())  # the page's default backend (auto: the fastest plain decoding here)
_STORES: dict[str, ModelStore] = {}
_STORES_LOCK = threading.Lock()


def store(backend: str | None = None) -> ModelStore:
    """The models for a backend the page offers (auto or None: the default store), loaded on first use."""
    backend = choice.parse(backend)
    if backend == choice.AUTO or backend == STORE.backend:
        return STORE
    if STORE.ready and STORE.get().backend == backend:
        return STORE
    with _STORES_LOCK:
        if backend not in _STORES:
            _STORES[backend] = ModelStore(backend)
    return _STORES[backend]
