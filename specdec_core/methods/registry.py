"""The method registry: one `MethodSpec` per speculative method. The CLI's and the bench's method names, the page's
drafter radio, token colours and legend, and README's method table are all read from here; a method's name is also
the source its accepted tokens carry in the trace. Adding a method = its drafter file + one entry in `SPECS`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from specdec_core.core.config import ConfigError, EagleConfig, LayerSkipConfig, LookupConfig, MedusaConfig
from specdec_core.core.drafter import NoDrafter
from specdec_core.core.run import REFERENCE
from specdec_core.methods.draft_model import DraftModelDrafter
from specdec_core.methods.eagle import eagle_drafter
from specdec_core.methods.layerskip import LayerSkipDrafter
from specdec_core.methods.lookup import LookupDrafter
from specdec_core.methods.medusa import medusa_drafter


@dataclass(frozen=True)
class MethodOptions:
    """Per-method options, parsed at the edge (CLI flags); a method's `options` names the field it reads."""

    lookup: LookupConfig = field(default_factory=LookupConfig)
    layerskip: LayerSkipConfig = field(default_factory=LayerSkipConfig)
    medusa: MedusaConfig = field(default_factory=MedusaConfig)
    eagle: EagleConfig = field(default_factory=EagleConfig)


@dataclass(frozen=True)
class MethodSpec:
    name: str  # CLI / bench / trace source name
    label: str  # the page's drafter choice
    accepted: str  # legend text for its accepted tokens
    colour: str  # token background on the page
    strong: str  # the same in presentation mode (high contrast)
    build: Callable  # (target, draft model or None, MethodOptions) -> a Drafter for one request
    summary: str  # one line for README's method table
    options: str | None = None  # the MethodOptions field it reads
    has_q: bool = True  # proposes with a draft distribution q (False: a deterministic, one-hot proposal)
    tree: bool = False  # proposes token trees
    needs_draft_model: bool = False
    catches_up: bool = False  # keeps its own KV cache, forwarding every token since its last draft before drafting
    peers: tuple[str, ...] = ()  # the bench's equivalents from other libraries


def _draft(target, draft, options):
    if draft is None:
        raise ConfigError("method 'draft' needs a draft model")
    return DraftModelDrafter(draft, target.vocab_size)


def _lookup(target, draft, options):
    return LookupDrafter(options.lookup)


def _layerskip(target, draft, options):
    return LayerSkipDrafter(target, options.layerskip)


def _medusa(tree: bool):
    def build(target, draft, options):
        return medusa_drafter(target, options.medusa, tree)
    return build


def _eagle(tree: bool):
    def build(target, draft, options):
        return eagle_drafter(target, options.eagle, tree)
    return build


SPECS = (
    MethodSpec("draft", "Draft model (Qwen2.5-Coder 0.5B)", "draft model, accepted", "#bbf7d0", "#4ade80", _draft,
               "the 0.5B draft model with its own KV cache, rolled back on rejection",
               needs_draft_model=True, catches_up=True, peers=("hf-assisted",)),
    MethodSpec("lookup", "Prompt lookup (no model)", "prompt lookup, accepted", "#bfdbfe", "#60a5fa", _lookup,
               "prompt lookup: n-gram match over prompt + output, no model", options="lookup", has_q=False,
               peers=("hf-lookup", "llamacpp-lookup")),
    MethodSpec("layerskip", "Layer-skip self-speculation", "layer-skip self-draft, accepted", "#e9d5ff", "#c084fc",
               _layerskip, "self-speculation: the target with some middle layers skipped (no extra weights)",
               options="layerskip", catches_up=True),
    MethodSpec("medusa", "Medusa heads (chain)", "Medusa head, accepted", "#fed7aa", "#fb923c", _medusa(False),
               "Medusa heads: small residual blocks on the target's last hidden state, read through the target's "
               "own LM head, guess tokens t+2 … (a chain of each head's top token, or a sample from it)",
               options="medusa"),
    MethodSpec("medusa-tree", "Medusa heads (token tree)", "Medusa tree, accepted", "#99f6e4", "#2dd4bf",
               _medusa(True), "the same heads proposing a token tree (best-first by the product of head "
               "probabilities), verified in one target forward with a tree attention mask",
               options="medusa", has_q=False, tree=True),
    MethodSpec("eagle", "EAGLE head (chain)", "EAGLE head, accepted", "#f5d0fe", "#d946ef", _eagle(False),
               "EAGLE: one decoder layer predicting the target's next hidden state from its last one and the next "
               "token's embedding, read through the target's LM head over a reduced draft vocabulary",
               options="eagle", catches_up=True),
    MethodSpec("eagle-tree", "EAGLE head (dynamic tree)", "EAGLE tree, accepted", "#d9f99d", "#84cc16", _eagle(True),
               "the same head growing an EAGLE-2 dynamic token tree (expand the most probable nodes per depth, keep "
               "the best by branch probability), verified in one target forward", options="eagle", has_q=False,
               tree=True, catches_up=True),
)
REGISTRY: dict[str, MethodSpec] = {spec.name: spec for spec in SPECS}
METHODS: tuple[str, ...] = (REFERENCE,) + tuple(REGISTRY)  # every engine method, the reference first


def is_tree(method: str) -> bool:
    """Does the method propose token trees? (False for plain decoding and for other libraries' methods.)"""
    return method in REGISTRY and REGISTRY[method].tree


def parse_method(method: str) -> str:
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def build_drafter(method: str, target, draft=None, options: MethodOptions = MethodOptions()):
    """A drafter for one request (its caches are its own; weights are shared read-only)."""
    method = parse_method(method)
    why = getattr(target, "refused", {}).get(method)  # a backend that cannot run it says why
    if why:
        raise ConfigError(f"{method} is not offered on the {target.backend} backend: {why}")
    return NoDrafter() if method == REFERENCE else REGISTRY[method].build(target, draft, options)


def buildable(target, draft=None, options: MethodOptions = MethodOptions()) -> tuple[dict, dict[str, str]]:
    """({method: drafter} for every registered method that can run here, {method: why not} for the rest, e.g. no
    Medusa heads trained for this target)."""
    drafters, skipped = {}, {}
    for name in REGISTRY:
        try:
            drafters[name] = build_drafter(name, target, draft, options)
        except ConfigError as e:
            skipped[name] = str(e)
    return drafters, skipped


def readme_table() -> str:
    """README's method table, as the registry says it (a test keeps README equal to this)."""
    rows = ["| method | drafter | q | tree | peers in the bench |", "|---|---|---|---|---|",
            f"| `{REFERENCE}` | none: plain autoregressive decoding through the same loop, target wrapper and KV cache "
            "| – | – | `hf-ar`, `llamacpp-ar` |"]
    for s in SPECS:
        peers = ", ".join(f"`{p}`" for p in s.peers) or "–"
        rows.append(f"| `{s.name}` | {s.summary} | {'yes' if s.has_q else 'one-hot'} | {'yes' if s.tree else 'no'} "
                    f"| {peers} |")
    return "\n".join(rows)
