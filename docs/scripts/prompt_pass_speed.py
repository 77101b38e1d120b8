"""Prompt-pass speed of the bit-exact target: row blocks (as every verify forward runs, `exact.fused`) vs the stock
kernels on all rows at once (`exact.prompt_pass`, what `LanguageModel.prefill` uses), interleaved, best of 3.
Run from the repo root: PYTHONPATH=. python docs/scripts/prompt_pass_speed.py [auto|bf16|int8]"""
import sys, time
from specdec_core.backends.exact import fused, prompt_pass
from specdec_core.core.kv import new_cache
from specdec_core.backends.representation import describe, load_target

lm, _ = load_target("qwen2.5-coder-1.5b", "cpu", sys.argv[1] if len(sys.argv) > 1 else "auto")
print(describe(lm), "|", lm.representation_note)
for n in (120, 500):
    ids = [(1000 + 37 * i) % 30000 for i in range(n)]
    best = {"blocked": float("inf"), "stock": float("inf")}
    for _ in range(3):
        for name, ctx in (("blocked", fused), ("stock", prompt_pass)):
            t0 = time.perf_counter()
            with ctx():
                lm.forward(ids, new_cache(), logits_rows=0)
            best[name] = min(best[name], time.perf_counter() - t0)
    print(f"{n}-token prompt pass: row blocks {best['blocked']:.2f} s ({n / best['blocked']:.0f} tok/s), "
          f"stock {best['stock']:.2f} s ({n / best['stock']:.0f} tok/s)")
