"""The CPU anchor: llama.cpp (llama-cpp-python) on the very GGUF files the embedded models ship as, plain decoding
(`llamacpp-ar`) and its prompt-lookup drafting (`llamacpp-lookup`). Optional: without the package these rows are
skipped with the command that installs it. Its weights are the GGUF's own quantisation, not our target's
representation, so its output is not compared token for token; the table labels it."""
from __future__ import annotations

import functools

from specdec_core.core.config import GenerationConfig
from specdec_core.backends.llamacpp import INSTALL, available, gguf_file, quantisation  # noqa: F401 - the CLI reads them here

LLAMACPP_METHODS = ("llamacpp-ar", "llamacpp-lookup")
LOOKUP_TOKENS = 10  # llama-cpp-python's LlamaPromptLookupDecoding default


@functools.lru_cache(maxsize=2)
def _llama(path: str, lookup: bool, threads: int):
    from llama_cpp import Llama

    kwargs = {}
    if lookup:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        kwargs["draft_model"] = LlamaPromptLookupDecoding(num_pred_tokens=LOOKUP_TOKENS)
    # llama-cpp-python's defaults, as a user runs it: weights repacked for the CPU (`Llama` takes no use_extra_bufts;
    # a keyword of that name is swallowed by its **kwargs), flash attention off
    return Llama(model_path=path, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False, **kwargs)


def label(name: str) -> str:
    return f"llama.cpp {quantisation(gguf_file(name))} GGUF"


def generate(method: str, name: str, prompt_ids: list[int], config: GenerationConfig, eos: tuple[int, ...],
             threads: int) -> list[int]:
    """New token ids from llama.cpp, greedy (top-k 1), prompt pass included in the call."""
    if method not in LLAMACPP_METHODS:
        raise ValueError(f"unknown llama.cpp method {method!r}")
    llm = _llama(str(gguf_file(name)), method == "llamacpp-lookup", threads)
    llm.reset()
    out: list[int] = []
    for token in llm.generate(prompt_ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
        if token in eos:
            out.append(token)
            break
        out.append(token)
        if len(out) >= config.max_new_tokens:
            break
    return out
