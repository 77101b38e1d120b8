"""Write assets/acceptance_priors.json from bench JSON files: per kind of prompt (code, prose), per method, the
per-position acceptance those runs measured. The page's recommendation (specdec_core/recommend.py) reads it.

    PYTHONPATH=. python docs/scripts/acceptance_priors.py --code out/check-exact-humaneval.json [more.json ...] \
        --prose out/check-exact-chat12.json [more.json ...]
(several files per kind are pooled: e.g. a check-exact run of five methods plus one of the EAGLE methods)

With --merge, the shipped file is kept and only the methods these files measured are replaced (their sources added):

    PYTHONPATH=. python docs/scripts/acceptance_priors.py --merge --code out/priors-eagle-code.json \
        --prose out/priors-eagle-prose.json
"""
from __future__ import annotations

import argparse
import json
import time

from specdec_core.methods.recommend import PRIORS, priors_from_bench

parser = argparse.ArgumentParser()
parser.add_argument("--code", required=True, nargs="+", help="bench JSON on code prompts (e.g. --suite humaneval)")
parser.add_argument("--prose", required=True, nargs="+", help="bench JSON on instructions (e.g. --suite chat)")
parser.add_argument("--merge", action="store_true", help="keep the shipped priors; replace only these files' methods")
args = parser.parse_args()
out = {"about": "per-position acceptance P(draft token i accepted | drafted), measured by bench runs; "
                "written by docs/scripts/acceptance_priors.py", "written": time.strftime("%Y-%m-%d"),
       "kinds": {}, "sources": {}}
if args.merge:
    out["kinds"], out["sources"] = (json.loads(PRIORS.read_text())[k] for k in ("kinds", "sources"))
for kind, paths in (("code", args.code), ("prose", args.prose)):
    out["kinds"].setdefault(kind, {}).update(priors_from_bench(*paths))
    out["sources"].setdefault(kind, [])
    for path in paths:
        meta = json.load(open(path))["meta"]
        out["sources"][kind].append({"command": meta["command"], "prompts": len(meta["prompts"]),
                                     "methods": meta["methods"], "target_repr": meta.get("target_repr"),
                                     "draft_repr": meta.get("draft_repr"), "date": meta.get("date")})
PRIORS.write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out["kinds"], indent=1))
