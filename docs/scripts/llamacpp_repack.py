"""llama.cpp with its weights repacked for this CPU (its default) and as stored: a one-token step, prompt passes, the
bitwise-equal verify batch the load probe finds, and T(n), on the embedded target GGUF; then llama-cpp-python's own
`Llama` (what the bench's `llamacpp-ar` runs) for its step. Needs requirements-llamacpp.txt.

    PYTHONPATH=. python docs/scripts/llamacpp_repack.py"""
import time

from specdec_core.backends import llamacpp
from specdec_core.backends.exact import SELF_CHECK

STEPS = 64


def measure(repack: bool) -> None:
    llamacpp.repack_weights = lambda: repack  # what LlamaCppModel reads at load
    m = llamacpp.LlamaCppModel(llamacpp.gguf_file("qwen2.5-coder-1.5b"), "target", 2)
    out = {}
    for n in (150, 150, 1000):  # the first 150-token pass warms up
        prompt = [(1000 + 37 * i) % 30000 for i in range(n)]
        cache = m.new_cache()
        t0 = time.perf_counter()
        m.prefill(prompt, cache)
        out[f"prompt {n}"] = f"{time.perf_counter() - t0:.2f} s"
    token = prompt[-1]
    t0 = time.perf_counter()
    for _ in range(STEPS):
        token = int(m._decode(cache, [token], 1)[0].argmax())
    out["step"] = f"{(time.perf_counter() - t0) / STEPS * 1e3:.1f} ms"
    prefix, chain = SELF_CHECK
    out["exact rows"] = m.measure_exactness([t % m.vocab_size for t in prefix + chain])
    short = m.new_cache()
    m.prefill(prompt[:150], short)
    for n in (1, 2, 3, 4, 8):
        t0 = time.perf_counter()
        for _ in range(4):
            m._decode(short, list(range(100, 100 + n)), n)
            short.crop(150)
        out[f"T({n})"] = f"{(time.perf_counter() - t0) / 4 * 1e3:.1f} ms"
    print(f"repacked {repack}: " + ", ".join(f"{k} {v}" for k, v in out.items()), flush=True)


def llama_step() -> None:
    from llama_cpp import Llama

    llm = Llama(model_path=str(llamacpp.gguf_file("qwen2.5-coder-1.5b")), n_ctx=4096, n_threads=2,
                n_threads_batch=2, verbose=False)
    llm.eval([(1000 + 37 * i) % 30000 for i in range(150)])
    t0 = time.perf_counter()
    for _ in range(STEPS):
        llm.eval([1234])
    print(f"Llama (llama-cpp-python defaults, use_extra_bufts {llm.model_params.use_extra_bufts}): step "
          f"{(time.perf_counter() - t0) / STEPS * 1e3:.1f} ms")


if __name__ == "__main__":
    measure(True)
    measure(False)
    llama_step()
