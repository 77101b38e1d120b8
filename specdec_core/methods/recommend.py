"""Which method to race here, before racing: this machine's measured costs (the profile) x how often each method's
guesses were accepted on prompts of the same kind (code or prose), as measured by bench runs and shipped in
assets/acceptance_priors.json. For each method, the best draft length (chains: 0..MAX_LENGTH, 0 = plain decoding,
which is what the cost-aware length falls back to) and the speedup the one prediction gives it."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from specdec_core.core.metrics import Stats, pooled_positions, predicted_speedup
from specdec_core.methods.registry import REGISTRY, MethodOptions
from specdec_core.settings import MAX_DRAFT_TOKENS, PRIORS_FILE

PRIORS = PRIORS_FILE
KINDS = ("code", "prose")
MAX_LENGTH = MAX_DRAFT_TOKENS  # the longest chain considered: the same as the cost-aware length's
PAYS = 1.05  # a predicted speedup below this is within the prediction's error: not worth recommending


@dataclass(frozen=True)
class Prediction:
    method: str
    speedup: float  # predicted decode speedup over plain decoding at the best length
    length: int  # draft tokens (tree nodes) per round at that speedup; 0: drafting does not pay


@dataclass(frozen=True)
class Recommendation:
    kind: str  # "code" or "prose"
    predictions: list[Prediction]  # fastest first
    where: str  # "AVX2 · int8 weight-only"

    @property
    def best(self) -> Prediction | None:
        """The method predicted fastest, if it is predicted to pay at all."""
        top = self.predictions[0] if self.predictions else None
        return top if top and top.speedup >= PAYS else None

    def text(self) -> str:
        if not self.predictions:
            return "No prediction yet: the cost profile is still being measured."
        listed = ", ".join(f"{p.method} {p.speedup:.2f}×" for p in self.predictions)
        if self.best is None:
            return (f"No method is predicted to pay on this machine ({self.where}) for {self.kind} prompts "
                    f"(predicted: {listed}); the cost-aware length then mostly decodes plainly. Race to see.")
        b = self.best
        return (f"Predicted fastest here ({self.where}) for {self.kind} prompts: **{b.method}** {b.speedup:.2f}× at "
                f"{b.length} draft token{'s' * (b.length != 1)} per round (all: {listed}).")


def load_priors(path: Path = PRIORS) -> dict:
    return json.loads(Path(path).read_text())


@functools.lru_cache(maxsize=1)
def _shipped() -> dict:
    return load_priors()


def prompt_kind(chat: bool) -> str:
    """An instruction in the chat template is prose; a raw completion is code (the bench suites' split)."""
    return "prose" if chat else "code"


def prior(method: str, kind: str) -> tuple[float, ...]:
    """The shipped per-position acceptance of a method on this kind of prompt; () where none was measured."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return tuple(_shipped()["kinds"][kind].get(method, ()))


def tree_size(method: str) -> int | None:
    """A tree method's configured nodes per round (its default options); None for a chain."""
    spec = REGISTRY.get(method)
    return getattr(MethodOptions(), spec.options).tree_nodes if spec is not None and spec.tree else None


def best_length(method: str, per_position: list[float], draft_ms: float, target_ms) -> Prediction:
    """The draft length with the highest predicted speedup (a tree's size is its configured node count)."""
    if (size := tree_size(method)) is not None:  # the cost-aware length is a tree's node budget, up to its size
        options = [(predicted_speedup(per_position, {n: 1}, draft_ms, target_ms, tree=True), n)
                   for n in range(size + 1)]
        speedup, n = max(options)
        return Prediction(method, speedup, n)
    options = [(predicted_speedup(per_position, {n: 1}, draft_ms, target_ms), n) for n in range(MAX_LENGTH + 1)]
    speedup, n = max(options)
    return Prediction(method, speedup, n)


def recommend(profile, kind: str, priors: dict | None = None) -> Recommendation:
    """Every method the profile timed and the priors measured, fastest first."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if profile is None:
        return Recommendation(kind, [], "")
    measured = (priors or _shipped())["kinds"][kind]
    preds = [best_length(m, measured[m], profile.draft_ms[m], profile.T) for m in profile.draft_ms if m in measured]
    return Recommendation(kind, sorted(preds, key=lambda p: -p.speedup), f"{profile.isa} · {profile.target_repr}")


def priors_from_bench(*paths: Path) -> dict[str, list[float]]:
    """Per method, the per-position acceptance over every run of these bench JSON files (each run weighted by its
    rounds)."""
    runs = [r for path in paths for r in json.loads(Path(path).read_text())["runs"]
            if r["stats"] and r["stats"].get("drafted")]
    return {m: [round(a, 4) for a in pooled_positions([Stats.from_dict(r["stats"]) for r in runs if r["method"] == m])]
            for m in dict.fromkeys(r["method"] for r in runs)}
