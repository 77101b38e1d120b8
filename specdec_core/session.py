"""Wiring used by every front end (CLI, benchmark, web demo): method name -> drafter, text -> prompt ids,
and one generation collected into a result."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError, GenerationConfig, LayerSkipConfig, LookupConfig, MedusaConfig, parse_method
from .drafters import DraftModelDrafter, Drafter, LayerSkipDrafter, LookupDrafter, NoDrafter
from .drafters.medusa import MedusaDrafter, MedusaHeads, TreeShape, default_heads_path
from .engine import SpeculativeEngine
from .lm import LanguageModel
from .metrics import Stats, compute_stats
from .trace import Round

MAX_PROMPT_CHARS = 200_000


@dataclass(frozen=True)
class MethodOptions:
    lookup: LookupConfig = field(default_factory=LookupConfig)
    layerskip: LayerSkipConfig = field(default_factory=LayerSkipConfig)
    medusa: MedusaConfig = field(default_factory=MedusaConfig)


def build_drafter(
    method: str, target: LanguageModel, draft: LanguageModel | None = None, options: MethodOptions = MethodOptions()
) -> Drafter:
    method = parse_method(method)
    if method == "ar":
        return NoDrafter()
    if method == "lookup":
        return LookupDrafter(options.lookup)
    if method == "layerskip":
        return LayerSkipDrafter(target, options.layerskip)
    if method in ("medusa", "medusa-tree"):
        return medusa_drafter(target, options.medusa, tree=method == "medusa-tree")
    if draft is None:
        raise ConfigError("method 'draft' needs a draft model")
    return DraftModelDrafter(draft, target.vocab_size)


def medusa_drafter(target: LanguageModel, config: MedusaConfig, tree: bool) -> MedusaDrafter:
    path = Path(config.heads) if config.heads else default_heads_path(target.name)
    if not path.is_file():
        raise ConfigError(f"no Medusa heads for {target.name!r} at {path}; train them with "
                          f"`python -m specdec_core.train_medusa --target {target.name}` or pass a heads file")
    try:
        heads = load_heads(path)
        return MedusaDrafter(target, heads, TreeShape(config.tree_nodes, config.tree_top_k) if tree else None)
    except Exception as e:  # noqa: BLE001 - any unreadable or mismatched file becomes one message
        raise ConfigError(f"cannot use Medusa heads {path}: {str(e).splitlines()[0][:200]}") from None


@functools.lru_cache(maxsize=4)
def load_heads(path: Path) -> MedusaHeads:
    return MedusaHeads.load(path)


END_MARKERS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "</s>")


def eos_token_ids(tokenizer, target: LanguageModel) -> tuple[int, ...]:
    """Ids that end generation: the model's and tokenizer's EOS plus well-known end-of-text markers in the vocab
    (a GGUF-converted Qwen names only <|im_end|>, yet a code completion ends with <|endoftext|>)."""
    ids = set()
    for source in (getattr(target.model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        ids.update(value if isinstance(value, (list, tuple)) else [value] if value is not None else [])
    vocab = tokenizer.get_vocab()
    ids.update(vocab[m] for m in END_MARKERS if m in vocab)
    return tuple(sorted(ids))


def check_prompt_text(text: str | None) -> str:
    """The prompt text, or ConfigError if it is empty or oversized (cheap: callable before models load)."""
    if not text or not text.strip():
        raise ConfigError("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise ConfigError(f"the prompt has {len(text)} characters; the limit is {MAX_PROMPT_CHARS}")
    return text


def encode_prompt(tokenizer, text: str, chat: bool = False) -> list[int]:
    check_prompt_text(text)
    if chat:
        return list(tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=False
        ))
    return tokenizer(text, add_special_tokens=True).input_ids


@dataclass(frozen=True)
class Result:
    method: str
    prompt_ids: list[int]
    token_ids: list[int]  # generated ids
    rounds: list[Round]
    stats: Stats
    elapsed_seconds: float  # wall clock around the whole generate loop, as the caller saw it


def run(engine: SpeculativeEngine, method: str, prompt_ids: list[int], config: GenerationConfig) -> Result:
    t0 = time.perf_counter()
    rounds = list(engine.generate(prompt_ids, config))
    elapsed = time.perf_counter() - t0
    tokens = [t for r in rounds for t in r.emitted]
    return Result(method, list(prompt_ids), tokens, rounds, compute_stats(rounds), elapsed)
