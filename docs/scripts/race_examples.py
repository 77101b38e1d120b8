#!/usr/bin/env python3
"""Start app.py on a free port and race every built-in example of the Race tab through its `race` API (each with the
method and chat setting the example selects, the page's other defaults), then the Compare tab's specbench-mini suite
(every method on one prompt per category); print per run whether the speculative tokens are identical to plain
decoding's. The bit-exact issue's "identical on every built-in example and suite". From the project root:
`python docs/scripts/race_examples.py` (under ../shared/tools/avx2 for the AVX2 setting). Exit 1 on any difference."""
import os
import sys
import time

from serve import app_server, find, predict, summary_of


sys.path.insert(0, os.getcwd())
from app.compare import SUITES  # noqa: E402
from app.ui import load_examples  # noqa: E402

bad = 0
with app_server() as url:
    from gradio_client import Client

    c = Client(url, verbose=False)
    for ex in load_examples():
        out, wall = predict(c, prompt=ex["text"], method=ex["method"], chat=ex["chat"], api_name="/race")
        s = summary_of(out)
        same = find(s, "identical")
        bad += same is not True
        print(f"race  {ex['name'][:44]:44s} {ex['method']:8s} identical {same}  decode speedup {find(s, 'decode_speedup'):.2f}x  "
              f"wall {wall:.0f}s", flush=True)
    t = time.time()
    s = summary_of(c.predict(prompt=load_examples()[0]["text"], prompt_set=list(SUITES)[1], api_name="/compare"))
    for r in s["methods"]:
        bad += r["identical"] is False or bool(r["error"])
        print(f"compare specbench-mini {r['method']:12s} identical {r['identical']}  {r['error'] or ''}", flush=True)
    print(f"compare wall {time.time() - t:.0f}s on {s['device']}; {'all identical' if not bad else f'{bad} differ'}")
sys.exit(1 if bad else 0)
