"""Benchmark runs (one `Run` per method x prompt x repeat) -> one `Row` per method (core/run.py, the Row every front
end formats), overall and per category. Pure: no timing, no models."""
from __future__ import annotations

from collections import defaultdict

from specdec_core.core.run import REFERENCE, Row, Run, compare, differences
from specdec_core.methods.registry import METHODS, is_tree
from specdec_core.methods.timing import cost

OTHER_WEIGHTS = ("llamacpp-ar", "llamacpp-lookup")  # run the GGUF's own quantisation: timed, never compared


def is_peer(method: str) -> bool:
    """Another library's method (transformers, llama.cpp): a difference from ar is a finding about it, not a failure
    of this engine."""
    return method not in METHODS


def find_mismatches(runs: list[Run], reference: str = REFERENCE) -> dict[str, list[str]]:
    """method -> ["prompt (repeat r): differs at token i"] against the reference's output for the same prompt."""
    refs = [r for r in runs if r.method == reference]
    out: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        if r.method == reference or r.method in OTHER_WEIGHTS:
            continue
        out[r.method] += [str(d) for d in differences([r], refs)]
    return {m: v for m, v in out.items() if v}


def summarise(runs: list[Run], greedy: bool, reference: str = REFERENCE, profile=None,
              llamacpp_target: bool = False) -> list[Row]:
    """One Row per method, in first-seen order, each paired prompt by prompt with the reference's runs. The llama.cpp
    peers run the GGUF's own weights: compared token for token only when our target runs them too (`llamacpp_target`)."""
    by_method: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_method[r.method].append(r)
    refs = by_method.get(reference, [])
    return [compare(these, refs, tree=is_tree(method), cost=cost(profile, method), greedy=greedy,
                    peer=is_peer(method), comparable=llamacpp_target or method not in OTHER_WEIGHTS,
                    profiled=profile is not None)
            for method, these in by_method.items()]


def peer_mismatches(rows: list[Row]) -> dict[str, list[str]]:
    """Each peer's differences from ar (a finding to show: e.g. transformers' assisted generation is not bit-exact)."""
    return {r.method: r.mismatches for r in rows if r.peer and r.mismatches}


def our_mismatches(rows: list[Row]) -> dict[str, list[str]]:
    """This engine's methods that differ from ar: a failure (the bench exits 1)."""
    return {r.method: r.mismatches for r in rows if not r.peer and r.mismatches}


def by_category(runs: list[Run], categories: dict[str, str], greedy: bool, profile=None,
                llamacpp_target: bool = False) -> dict[str, list[Row]]:
    """Per category (Spec-Bench's task categories), the per-method Rows of its prompts' runs (a conversation's turns
    `id#k` count for its prompt). Prompts without a category are left out; none at all gives {}."""
    def category(prompt_id: str) -> str:
        return categories.get(prompt_id) or categories.get(prompt_id.rsplit("#", 1)[0], "")

    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if category(r.prompt_id):
            out[category(r.prompt_id)].append(r)
    order = list(dict.fromkeys([REFERENCE] + [r.method for r in runs]))  # the same method order in every category
    return {c: sorted(summarise(rs, greedy=greedy, profile=profile, llamacpp_target=llamacpp_target), key=lambda row: order.index(row.method))
            for c, rs in out.items()}
