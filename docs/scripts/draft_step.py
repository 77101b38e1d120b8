"""What one step of the draft model costs here, per representation: ms for a forward of n = 1, 2, 3 tokens after a
123-token context (n > 1 is the sync after an accepted round), with logits for the last row, and the LM head's share.
Both drafts are loaded in one process and timed interleaved, best of 3 × 15 forwards each.
Run from the repo root: PYTHONPATH=. python docs/scripts/draft_step.py   (under ../shared/tools/avx2 for the AVX2 case)"""
import time

import torch

from specdec_core.core.kv import crop, new_cache
from specdec_core.settings import DEFAULT_DRAFT
from specdec_core.backends.quantize import load_int4, load_int8
from specdec_core.backends.representation import isa

drafts = {"int8 dynamic": load_int8(DEFAULT_DRAFT), "int4 weight-only": load_int4(DEFAULT_DRAFT)}
caches = {}
for name, lm in drafts.items():
    caches[name] = new_cache()
    lm.forward(list(range(1000, 1123)), caches[name], logits_rows=0)


def step_ms(lm, cache, n: int, logits_rows: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(15):
            lm.forward(list(range(500, 500 + n)), cache, logits_rows=logits_rows)
            crop(cache, 123)
        best = min(best, (time.perf_counter() - t0) / 15 * 1e3)
    return best


rows = {name: [] for name in drafts}
for rnd in range(2):  # interleaved: each representation twice, in alternating order
    for name in (list(drafts) if rnd == 0 else list(drafts)[::-1]):
        lm, cache = drafts[name], caches[name]
        rows[name].append([step_ms(lm, cache, n, 1) for n in (1, 2, 3)] + [step_ms(lm, cache, 1, 0)])
print(f"draft {DEFAULT_DRAFT} on {isa()}, {torch.get_num_threads()} threads; ms (best of 3 x 15, min of 2 rounds)")
print("| representation | n=1 | n=2 | n=3 | n=1 without the LM head |")
print("|---|---|---|---|---|")
for name, r in rows.items():
    best = [min(x[i] for x in r) for i in range(4)]
    print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in best) + " |")
