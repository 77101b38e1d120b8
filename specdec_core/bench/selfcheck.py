"""`python -m specdec_core selfcheck`: the one prepared check for a new machine (a laptop, a lent GPU). Within a few
minutes: is the target bit-exact here (the load-time self-check), this machine's cost profile, greedy equality of
every method against plain decoding on three prompts (two code, one chat), and the speedups those same runs measured,
with the profile's prediction beside each. One JSON holds it all."""
from __future__ import annotations

import platform
import time

import torch

from specdec_core.bench.aggregate import summarise
from specdec_core.bench.prompts import BenchPrompt, suite
from specdec_core.bench.runner import BenchConfig, run_bench
from specdec_core.core.config import GenerationConfig
from specdec_core.methods.registry import buildable
from specdec_core.backends.representation import describe, kernels

PROMPTS = (("humaneval", 2), ("chat", 1))  # the first two HumanEval problems and the first chat instruction


def check(target, draft, tokenizer, profile, generation: GenerationConfig, options, progress: bool = True,
          prompts: list[BenchPrompt] | None = None) -> dict:
    """Run every engine method on the prompts (default PROMPTS; interleaved, as the bench does) and report equality
    and speed."""
    prompts = prompts or [p for name, n in PROMPTS for p in suite(name, n)]
    drafters, skipped = buildable(target, draft, options)
    config = BenchConfig(("ar",) + tuple(drafters), generation, options, profile=profile)
    t0 = time.perf_counter()
    records = run_bench(prompts, config, target, draft, tokenizer, progress=progress)
    rows = summarise(records, greedy=generation.sampling.greedy, profile=profile)
    compared = sum(r.compared for r in rows)
    mismatches = [f"{r.method}: {m}" for r in rows for m in r.mismatches]
    return {
        "ok": not mismatches and target.rounding == 0.0,
        "device": str(target.device),
        "device_name": torch.cuda.get_device_name(target.device) if target.device.type == "cuda" else platform.processor()
        or platform.machine(),
        "isa": kernels(target) if target.device.type == "cpu" else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "target_repr": describe(target),
        "target_rounding": target.rounding,  # max |Δlogit|, 9 tokens in one forward vs one at a time (0.0: bit-exact)
        "draft_repr": draft.representation,
        "prompts": [p.id for p in prompts],
        "max_new_tokens": generation.max_new_tokens,
        "exactness": {"compared": compared, "mismatches": mismatches},
        "skipped": skipped,
        "methods": [{k: v for k, v in r.to_dict().items() if k in KEPT} for r in rows],
        "profile": profile.to_dict(),
        "seconds": time.perf_counter() - t0,
        "timing": "wall clock per call, prompt pass included, one method after another on the same prompts "
                  "(end_to_end_*); decode_speedup excludes prompt passes; predicted_speedup (a decode speedup) from "
                  "the profile",
    }


KEPT = ("method", "end_to_end_tokens_per_second", "end_to_end_speedup", "decode_tokens_per_second", "decode_speedup",
        "predicted_speedup", "alpha", "tau", "identical", "first_difference", "mismatch_count", "compared")


def lines(report: dict) -> list[str]:
    """The report as a few lines for the terminal."""
    p = report["profile"]
    out = [f"device {report['device']} ({report['device_name']}) · ISA {report['isa'] or '-'} · torch {report['torch']}"
           f" · target {report['target_repr']} · draft {report['draft_repr']}",
           "T(n) ms: " + ", ".join(f"{n}: {v:.0f}" for n, v in p["target_ms"].items()),
           "| method | tok/s (end to end) | speedup (end to end) | decode speedup | predicted | α | τ | identical |",
           "|---|---|---|---|---|---|---|---|"]
    f = lambda v, s="{:.2f}": "—" if v is None else s.format(v)  # noqa: E731
    for m in report["methods"]:
        same = "ref" if m["method"] == "ar" else ("✓" if not m["mismatch_count"] else f"✗ {m['mismatch_count']}")
        out.append(f"| {m['method']} | {f(m['end_to_end_tokens_per_second'])} | {f(m['end_to_end_speedup'], '{:.2f}×')} | "
                   f"{f(m['decode_speedup'], '{:.2f}×')} | {f(m['predicted_speedup'], '{:.2f}×')} | {f(m['alpha'])} | "
                   f"{f(m['tau'])} | {same} |")
    e = report["exactness"]
    out.append(f"exactness: {len(e['mismatches'])} mismatches in {e['compared']} comparisons; "
               f"self-check |Δlogit| {report['target_rounding']}")
    out += [f"MISMATCH {m}" for m in e["mismatches"]]
    out += [f"skipped {m}: {why}" for m, why in report["skipped"].items()]
    out.append(f"{'OK' if report['ok'] else 'NOT OK'} in {report['seconds']:.0f} s")
    return out
