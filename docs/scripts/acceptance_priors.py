"""Write assets/acceptance_priors.json from bench JSON files: per kind of prompt (code, prose), per method, the
per-position acceptance those runs measured. The page's recommendation (specdec_core/recommend.py) reads it.

    PYTHONPATH=. python docs/scripts/acceptance_priors.py --code out/check-exact-humaneval.json [more.json ...] \
        --prose out/check-exact-chat12.json [more.json ...]
(several files per kind are pooled: e.g. a check-exact run of five methods plus one of the EAGLE methods)
"""
from __future__ import annotations

import argparse
import json
import time

from specdec_core.recommend import PRIORS, priors_from_bench

parser = argparse.ArgumentParser()
parser.add_argument("--code", required=True, nargs="+", help="bench JSON on code prompts (e.g. --suite humaneval)")
parser.add_argument("--prose", required=True, nargs="+", help="bench JSON on instructions (e.g. --suite chat)")
args = parser.parse_args()
out = {"about": "per-position acceptance P(draft token i accepted | drafted), measured by bench runs; "
                "written by docs/scripts/acceptance_priors.py", "written": time.strftime("%Y-%m-%d"),
       "kinds": {}, "sources": {}}
for kind, paths in (("code", args.code), ("prose", args.prose)):
    out["kinds"][kind] = priors_from_bench(*paths)
    out["sources"][kind] = []
    for path in paths:
        meta = json.load(open(path))["meta"]
        out["sources"][kind].append({"command": meta["command"], "prompts": len(meta["prompts"]),
                                     "methods": meta["methods"], "target_repr": meta.get("target_repr"),
                                     "draft_repr": meta.get("draft_repr"), "date": meta.get("date")})
PRIORS.write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out["kinds"], indent=1))
