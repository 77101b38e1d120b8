"""Run every method on every prompt, interleaved per prompt (the starting method rotates), and record each run.

Timing is wall clock around the whole call (prompt pass included) for our engine and transformers alike; model
forward time is summed by hooks on the decoder layers, norms and LM heads, so the rest is engine overhead."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from specdec_core.core.config import ConfigError, GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.backends.lm import LanguageModel
from specdec_core.methods.registry import METHODS, REGISTRY, MethodOptions, build_drafter
from specdec_core.core.session import encode_conversation, encode_prompt, eos_token_ids, run
from specdec_core.core.run import Run
from specdec_core.bench.checkpoint import Checkpoint
from specdec_core.backends.exact import fused
from specdec_core.bench.hf import HF_METHODS, hf_generate
from specdec_core.bench import llamacpp
from specdec_core.bench.llamacpp import LLAMACPP_METHODS
from specdec_core.methods.recommend import prompt_kind
from specdec_core.methods.timing import cost
from specdec_core.bench.prompts import BenchPrompt

ALL_METHODS = METHODS + HF_METHODS + LLAMACPP_METHODS
NEEDS_DRAFT = tuple(n for n, spec in REGISTRY.items() if spec.needs_draft_model) + ("hf-assisted",)


def parse_methods(text: str) -> tuple[str, ...]:
    """'draft,lookup' -> ('ar', 'draft', 'lookup'): ar is always run, as the reference the others are checked against."""
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ConfigError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(ALL_METHODS)}")
    if len(set(methods)) != len(methods):
        raise ConfigError("a method is listed twice")
    return tuple(["ar"] + [m for m in methods if m != "ar"])


@dataclass(frozen=True)
class BenchConfig:
    methods: tuple[str, ...]
    generation: GenerationConfig
    options: MethodOptions = field(default_factory=MethodOptions)
    repeats: int = 1
    warmup: bool = True
    profile: object | None = None  # this machine's cost profile: the cost-aware draft length reads it

    def __post_init__(self) -> None:
        if not 1 <= self.repeats <= 100:
            raise ConfigError(f"--repeats must be in [1, 100], got {self.repeats}")


class ForwardTimer:
    """Sums seconds spent inside the given modules (hooks around each call), plus the time a non-torch backend's
    models count themselves (`decode_seconds`, and the target's `decode_calls`: its forwards with logits)."""

    def __init__(self, modules: list[torch.nn.Module], device: torch.device, count: torch.nn.Module | None = None,
                 models: list | None = None, target=None):
        self.hooked = 0.0
        self.hooked_calls = 0  # calls of `count` (the target's LM head: one per target forward)
        self._models = [lm for lm in models or [] if hasattr(lm, "decode_seconds")]
        self._seconds0 = sum(lm.decode_seconds for lm in self._models)
        self._target = target if hasattr(target, "decode_calls") else None
        self._calls0 = self._target.decode_calls if self._target is not None else 0
        self._count = count
        self.cuda = device.type == "cuda"
        self._start: dict[int, float] = {}
        self._handles = []
        for m in {id(m): m for m in modules}.values():  # each module timed once
            self._handles.append(m.register_forward_pre_hook(self._pre))
            self._handles.append(m.register_forward_hook(self._post))

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def _pre(self, module, args):
        self._start[id(module)] = self._now()

    def _post(self, module, args, output):
        self.hooked += self._now() - self._start.pop(id(module))
        self.hooked_calls += module is self._count

    @property
    def seconds(self) -> float:
        return self.hooked + sum(lm.decode_seconds for lm in self._models) - self._seconds0

    @property
    def calls(self) -> int:
        return self.hooked_calls + (self._target.decode_calls - self._calls0 if self._target is not None else 0)

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def drafter_modules(drafter) -> list[torch.nn.Module]:
    """The torch modules a drafter runs itself (Medusa heads, an EAGLE head and its embedding), so their time counts
    as forward time, not engine overhead."""
    return [m for m in vars(drafter).values() if isinstance(m, torch.nn.Module)]


def compute_modules(lm: LanguageModel) -> list[torch.nn.Module]:
    """A torch model's decoder layers, norm and LM head (another backend's model times itself: none)."""
    dec = getattr(lm, "decoder", None)
    if dec is None:
        return []
    mods = list(getattr(dec, "layers", [])) + [lm.lm_head]
    return mods + ([dec.norm] if hasattr(dec, "norm") else [])


class PeakMemory:
    """Peak memory of one run: CUDA allocated, or the process's peak RSS (VmHWM, reset via /proc/self/clear_refs)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.kind = "peak CUDA memory allocated" if self.cuda else "peak process RSS (all loaded models included)"

    def reset(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass

    def read_mb(self) -> float:
        if self.cuda:
            return torch.cuda.max_memory_allocated() / 2**20
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_once(method: str, target: LanguageModel, draft: LanguageModel | None, eos: tuple[int, ...],
             prompt_ids: list[int], config: BenchConfig, generation: GenerationConfig, memory: PeakMemory,
             chat: bool = False) -> Run:
    if method in LLAMACPP_METHODS:
        return run_llamacpp(method, target, eos, prompt_ids, generation, memory)
    models = [target] + ([draft] if draft is not None and method in NEEDS_DRAFT else [])
    modules = [m for lm in models for m in compute_modules(lm)]
    engine = None
    if method in METHODS:
        drafter = build_drafter(method, target, draft, config.options)
        modules += drafter_modules(drafter)
        engine = SpeculativeEngine(target, drafter, eos, cost(config.profile, method, prompt_kind(chat)), method)
    timer = ForwardTimer(modules, target.device, getattr(target, "lm_head", None), models, target)
    memory.reset()
    try:
        t0 = time.perf_counter()
        if engine is not None:
            result = run(engine, method, prompt_ids, generation)
            tokens, stats = result.token_ids, result.stats  # the rounds are not kept: a bench holds many runs
        else:  # transformers' generate as a user runs it: same weights and representation, its stock attention
            with fused():
                tokens = hf_generate(method, target, draft, prompt_ids, generation, eos, config.options.lookup)
            stats = None
            if target.device.type == "cuda":
                torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    finally:
        timer.close()
    return Run(method, list(prompt_ids), tokens, seconds, stats, forward_seconds=timer.seconds,
               peak_rss_mb=memory.read_mb(), target_forwards=timer.calls)


def run_llamacpp(method: str, target: LanguageModel, eos: tuple[int, ...], prompt_ids: list[int],
                 generation: GenerationConfig, memory: PeakMemory) -> Run:
    """llama.cpp on the target's GGUF, same prompt ids and threads; all its time counts as forward time."""
    memory.reset()
    t0 = time.perf_counter()
    tokens = llamacpp.generate(method, target.name, prompt_ids, generation, eos, torch.get_num_threads())
    seconds = time.perf_counter() - t0
    return Run(method, list(prompt_ids), tokens, seconds, forward_seconds=seconds, peak_rss_mb=memory.read_mb())


def run_turns(method: str, prompt: BenchPrompt, first_ids: list[int], tokenizer, target, draft, eos, config: BenchConfig,
              memory: PeakMemory, repeat: int) -> list[Run]:
    """One record per turn: a later turn is asked after this method's own answers (Spec-Bench's multi-turn), each turn
    timed on its own; a one-turn prompt keeps its id, turn k of a conversation is `id#k`."""
    records, answers = [], []
    for k, _ in enumerate(prompt.all_turns):
        ids = first_ids if k == 0 else encode_conversation(tokenizer, list(prompt.all_turns[: k + 1]), answers)
        if len(ids) >= target.max_positions:
            raise ConfigError(f"{prompt.id}: turn {k + 1} is longer than the model's context")
        r = run_once(method, target, draft, eos, ids, config, config.generation, memory, prompt.chat)
        pid = prompt.id if len(prompt.all_turns) == 1 else f"{prompt.id}#{k + 1}"
        records.append(dataclasses.replace(r, prompt_id=pid, repeat=repeat))
        answers.append(tokenizer.decode(r.token_ids, skip_special_tokens=True))
    return records


def run_bench(prompts: list[BenchPrompt], config: BenchConfig, target: LanguageModel, draft: LanguageModel | None,
              tokenizer, progress: bool = True, checkpoint: Checkpoint | None = None) -> list[Run]:
    """Every method on every prompt; with a checkpoint, prompts it holds are read back instead of run again."""
    if draft is None and any(m in NEEDS_DRAFT for m in config.methods):
        raise ConfigError("draft and hf-assisted need a draft model")
    memory = PeakMemory(target.device)
    eos = eos_token_ids(tokenizer, target)
    encoded = [encode_prompt(tokenizer, p.prompt, chat=p.chat) for p in prompts]  # (a conversation: its first turn)
    too_long = [p.id for p, ids in zip(prompts, encoded) if len(ids) >= target.max_positions]
    if too_long:
        raise ConfigError(f"prompt(s) longer than the model's context: {', '.join(too_long)}")
    if config.warmup:  # first calls pay one-off costs (kernel selection, allocations): keep them out of the table
        short = GenerationConfig(max_new_tokens=4, sampling=config.generation.sampling, draft=config.generation.draft)
        for method in config.methods:
            run_once(method, target, draft, eos, encoded[0], config, short, memory, prompts[0].chat)
    records: list[Run] = []
    n = len(config.methods)
    total = config.repeats * len(prompts) * n
    with tqdm(total=total, desc="bench", unit="run", disable=not progress) as bar:
        for repeat in range(config.repeats):
            for i, (prompt, ids) in enumerate(zip(prompts, encoded)):
                saved = checkpoint.records(prompt.id, repeat) if checkpoint else None
                if saved is not None:
                    records += saved
                    bar.update(n)
                    continue
                shift = (repeat * len(prompts) + i) % n
                these = []
                for method in config.methods[shift:] + config.methods[:shift]:
                    bar.set_postfix_str(f"{prompt.id} · {method}")
                    these += run_turns(method, prompt, ids, tokenizer, target, draft, eos, config, memory, repeat)
                    bar.update()
                records += these
                if checkpoint:
                    checkpoint.save(prompt.id, repeat, these)
    return records
