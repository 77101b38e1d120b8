"""Wiring used by every front end (CLI, benchmark, web demo): method name -> drafter, text -> prompt ids,
and one generation collected into a `Run`."""
from __future__ import annotations

import time

from specdec_core.core.backend import Model
from specdec_core.core.config import ConfigError, GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.run import Run
from specdec_core.settings import MAX_PROMPT_CHARS



END_MARKERS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "</s>")


def eos_token_ids(tokenizer, target: Model) -> tuple[int, ...]:
    """Ids that end generation: the model's and tokenizer's EOS plus well-known end-of-text markers in the vocab
    (a GGUF-converted Qwen names only <|im_end|>, yet a code completion ends with <|endoftext|>)."""
    ids = set()
    for source in (getattr(getattr(target, "model", None), "generation_config", None), tokenizer):
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
        return encode_conversation(tokenizer, [text], [])
    return tokenizer(text, add_special_tokens=True).input_ids


def encode_conversation(tokenizer, turns: list[str], answers: list[str]) -> list[int]:
    """Chat-template ids for user turns interleaved with the model's own earlier answers, ready for the next answer."""
    messages = []
    for i, text in enumerate(turns):
        messages.append({"role": "user", "content": check_prompt_text(text)})
        if i < len(answers):
            messages.append({"role": "assistant", "content": answers[i]})
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))


def run(engine: SpeculativeEngine, method: str, prompt_ids: list[int], config: GenerationConfig) -> Run:
    """One generation, collected: its rounds, statistics and the wall clock around the whole loop."""
    t0 = time.perf_counter()
    rounds = list(engine.generate(prompt_ids, config))
    return Run.of(method, prompt_ids, rounds, seconds=time.perf_counter() - t0)
