"""The peers: transformers' own `generate` with assisted decoding (`assistant_model=`) and prompt lookup
(`prompt_lookup_num_tokens=`), on the same model objects (same weights, dtype, device and threads) as our engine."""
from __future__ import annotations

import torch

from specdec_core.core.config import GenerationConfig, LookupConfig
from specdec_core.backends.lm import LanguageModel

HF_METHODS = ("hf-ar", "hf-assisted", "hf-lookup")


def hf_settings(method: str, config: GenerationConfig, lookup: LookupConfig) -> dict:
    """What we ask of transformers, recorded in the benchmark JSON: the same draft length and adaptivity as ours."""
    d = config.draft
    if method == "hf-assisted":
        return {"num_assistant_tokens": d.num_draft_tokens,
                "num_assistant_tokens_schedule": "heuristic" if d.adaptive else "constant",
                "assistant_confidence_threshold": d.confidence_threshold if d.adaptive else 0.0}
    if method == "hf-lookup":
        return {"prompt_lookup_num_tokens": d.num_draft_tokens, "max_matching_ngram_size": lookup.max_ngram_size}
    return {}


def hf_generate(method: str, target: LanguageModel, draft: LanguageModel | None, prompt_ids: list[int],
                config: GenerationConfig, eos: tuple[int, ...], lookup: LookupConfig = LookupConfig()) -> list[int]:
    """New token ids from `target.model.generate` (greedy, or sampled with HF's global RNG seeded from config.seed)."""
    from transformers import GenerationConfig as HFGenerationConfig

    s = config.sampling
    settings = hf_settings(method, config, lookup)
    gen = HFGenerationConfig(
        max_new_tokens=config.max_new_tokens, do_sample=not s.greedy, eos_token_id=list(eos) or None,
        pad_token_id=eos[0] if eos else 0,
        **({} if s.greedy else {"temperature": s.temperature, "top_k": s.top_k or None, "top_p": s.top_p}),
    )
    kwargs = {}
    if method == "hf-assisted":
        if draft is None:
            raise ValueError("hf-assisted needs a draft model")
        for key, value in settings.items():
            setattr(draft.model.generation_config, key, value)
        kwargs["assistant_model"] = draft.model
    elif method == "hf-lookup":
        gen.prompt_lookup_num_tokens = settings["prompt_lookup_num_tokens"]
        gen.max_matching_ngram_size = settings["max_matching_ngram_size"]
    elif method != "hf-ar":
        raise ValueError(f"unknown transformers method {method!r}")
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=target.device)
    if not s.greedy:
        torch.manual_seed(config.seed)
    with torch.inference_mode():
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen, **kwargs)
    return out[0, len(prompt_ids):].tolist()
