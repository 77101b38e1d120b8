#!/usr/bin/env python3
"""The landing race through the page's API: start app.py on a free port, race HumanEval/0 (the Race tab's first
example) with the page's own defaults RUNS times (default 3), and print per race the measured decode speedup, whether
the tokens are identical to plain decoding's, the page's prediction and the wall time. From the project root:
`RUNS=3 python docs/scripts/race_api.py` (under ../shared/tools/avx2, or ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2, for an AVX2 laptop's kernels). Exit 1 if any race's tokens differ."""
import os
import sys

from serve import app_server, find, predict, summary_of

sys.path.insert(0, os.getcwd())
from app.ui import load_examples  # noqa: E402

prompt = load_examples()[0]["text"]
differ = 0
with app_server() as url:
    from gradio_client import Client

    c = Client(url, verbose=False)
    for _ in range(int(os.environ.get("RUNS", "3"))):
        out, wall = predict(c, prompt=prompt, api_name="/race")
        s = summary_of(out)
        differ += find(s, "identical") is not True
        pred = find(s, "predicted_speedup")
        print(f"{find(s, 'method')}: decode speedup {find(s, 'decode_speedup'):.2f}x, identical {find(s, 'identical')}, "
              f"predicted {'-' if pred is None else f'{pred:.2f}x'}, on {find(s, 'device')}, wall {wall:.0f}s",
              flush=True)
sys.exit(1 if differ else 0)
