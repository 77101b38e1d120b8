"""Pool bench JSONs that ran disjoint prompts of one suite (e.g. a long-context sample measured in two runs): every
prompt keeps its own run's `ar` (each method is paired prompt by prompt with the `ar` of the same run), and the rows
are pooled per category: decode speedup = the method's decode tokens/s over `ar`'s, all runs' tokens and decode
seconds summed; predicted = each run's per-category prediction (its own profile), weighted by the tokens it decoded.

    python docs/scripts/pool_runs.py SUITE.jsonl RUN1.json RUN2.json ..."""
import json
import sys

from specdec_core.backends.profile import Profile
from specdec_core.bench.aggregate import by_category
from specdec_core.core.run import Run


def main(suite: str, paths: list[str]) -> None:
    categories = {json.loads(line)["id"]: json.loads(line)["category"] for line in open(suite) if line.strip()}
    decode: dict[tuple[str, str], list[float]] = {}  # (category, method) -> [tokens, decode seconds]
    predicted: dict[tuple[str, str], list[tuple[float, int]]] = {}  # -> [(a run's prediction, its tokens)]
    for path in paths:
        data = json.load(open(path))
        profile = Profile.from_dict(data["meta"]["profile"])
        runs = [Run.from_dict(r) for r in data["runs"]]
        for r in runs:
            total = decode.setdefault((categories[r.prompt_id], r.method), [0, 0.0])
            total[0] += r.stats.new_tokens
            total[1] += r.stats.draft_seconds + r.stats.verify_seconds  # what the bench's decode speed counts
        for cat, rows in by_category(runs, categories, greedy=True, profile=profile).items():
            for row in rows:
                if row.predicted_speedup is not None:
                    tokens = sum(r.stats.new_tokens for r in runs
                                 if categories[r.prompt_id] == cat and r.method == row.method)
                    predicted.setdefault((cat, row.method), []).append((row.predicted_speedup, tokens))
    print("| category | method | decode speedup | predicted | predicted / measured |")
    print("|---|---|---|---|---|")
    for (cat, method), (tokens, seconds) in decode.items():
        if method == "ar":
            continue
        ar_tokens, ar_seconds = decode[(cat, "ar")]
        measured = (tokens / seconds) / (ar_tokens / ar_seconds)
        parts = predicted.get((cat, method), [])
        guess = sum(p * t for p, t in parts) / sum(t for _, t in parts) if parts else None
        print(f"| {cat} | {method} | {measured:.2f}× | {'–' if guess is None else f'{guess:.2f}×'} | "
              f"{'–' if guess is None else f'{guess / measured - 1:+.0%}'} |")

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
