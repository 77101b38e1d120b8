"""Every default, range, environment variable, asset path, tree shape and the draft-representation policy: the one
place a number is written. The frozen configs (core/config.py), the CLI's flags and the page's sliders read them
from here; nothing here imports the rest of the package."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Range:
    """A setting's default and the closed range it may take (the page's slider bounds; the CLI's check)."""

    default: float
    lo: float
    hi: float

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


# --- Generation -------------------------------------------------------------------------------------------------
MAX_NEW_TOKENS = Range(128, 1, 4096)  # the CLI and the bench
PAGE_MAX_NEW_TOKENS = Range(64, 1, 512)  # the page: short answers, so a race fits a visit
SELFCHECK_NEW_TOKENS = 40  # selfcheck: three prompts x every method in a few minutes
TEMPERATURE = Range(0.0, 0.0, 100.0)  # 0 = greedy
PAGE_TEMPERATURE = Range(0.0, 0.0, 2.0)
TOP_P = Range(1.0, 0.0, 1.0)  # (0, 1]; 1 = off
MAX_TOP_K = 1 << 20
MAX_PROMPT_CHARS = 200_000
MAX_PROMPT_TOKENS = 4096  # the page's limit; the CLI's is the model's context

# --- Draft length ------------------------------------------------------------------------------------------------
# γ, draft tokens per round. The default everywhere is the cost-aware length ("auto"): each round drafts the length
# that maximises expected tokens/s from this machine's measured costs; a fixed γ is what you ask for.
NUM_DRAFT_TOKENS = Range(5, 0, 16)  # a fixed γ (and where the cost-aware length starts before costs are measured)
DRAFT_TOKENS_AUTO = "auto"
DEFAULT_DRAFT_TOKENS = DRAFT_TOKENS_AUTO  # what generate, bench, selfcheck and the page use unless told otherwise
MAX_DRAFT_TOKENS = int(NUM_DRAFT_TOKENS.hi)  # the longest chain the adaptive and cost-aware schedules consider
CONFIDENCE_THRESHOLD = Range(0.4, 0.0, 0.999)  # adaptive: stop drafting below this top probability

# --- Token trees -------------------------------------------------------------------------------------------------
MAX_TREE_NODES = 64
MAX_TREE_TOP_K = 16
MEDUSA_TREE = (10, 3)  # (nodes per round, children per node at most)
EAGLE_TREE = (16, 4)  # (nodes kept per round, nodes expanded per depth and children per node)

# --- Prompt lookup -----------------------------------------------------------------------------------------------
NGRAM = (1, 3)  # (min, max) n-gram matched
MAX_NGRAM = 32

# --- Models --------------------------------------------------------------------------------------------------------
DEFAULT_TARGET = "qwen2.5-coder-1.5b"
DEFAULT_DRAFT = "qwen2.5-coder-0.5b"
TARGET_REPRESENTATIONS = ("auto", "bf16", "fp16", "fp32", "int8")
DRAFT_REPRESENTATIONS = ("auto", "bf16", "fp16", "fp32", "int8", "int4")
BACKENDS = ("torch", "llamacpp")  # how the target and the draft run (backends/): PyTorch, or llama.cpp on the GGUF
DEFAULT_BACKEND = "auto"  # per machine, the backend whose plain decoding is fastest (backends/choice.py)
ENV_BACKEND = "SPECDEC_BACKEND"  # the page's backend: auto (default), torch or llamacpp


def draft_representation(requested: str, device_type: str, dense_dtype: str | None = None) -> str:
    """The draft model's representation: it only changes the guesses, never the output, so `auto` takes what is
    cheapest: dynamic int8 on a CPU (a 0.5B step 118 -> 48 ms, docs/performance.md e3), the target's dtype (dense)
    elsewhere. A dense dtype asked for by name (--dtype, --draft-dtype) wins over auto. One policy for the CLI and
    the page (SPECDEC_DRAFT_QUANT=none on the page is `dense`)."""
    if requested not in DRAFT_REPRESENTATIONS + ("dense",):
        raise ValueError(f"draft representation {requested!r}: one of {', '.join(DRAFT_REPRESENTATIONS)}")
    if requested == "auto":
        return "dense" if dense_dtype or device_type != "cpu" else "int8"
    return requested


# --- Environment variables (the page's settings; the CLI has flags) ------------------------------------------------
ENV_CACHE = "SPECDEC_CACHE"  # where converted models and profiles are cached (default ~/.cache/specdec)
ENV_TARGET = "SPECDEC_TARGET"  # the page's target: an embedded name, a local dir, a Hub id, or tiny-random
ENV_DRAFT = "SPECDEC_DRAFT"
ENV_TARGET_REPR = "SPECDEC_TARGET_REPR"
ENV_DRAFT_QUANT = "SPECDEC_DRAFT_QUANT"  # int8 (default on a CPU) or none


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def cache_root() -> Path:
    return Path(env(ENV_CACHE, str(Path.home() / ".cache" / "specdec")))


def page_target() -> str:
    return env(ENV_TARGET, DEFAULT_TARGET)


def page_draft() -> str:
    return env(ENV_DRAFT, DEFAULT_DRAFT)


def page_target_repr() -> str:
    return env(ENV_TARGET_REPR, "auto")


def page_backend() -> str:
    return env(ENV_BACKEND, DEFAULT_BACKEND)


def page_draft_repr() -> str:
    return "dense" if env(ENV_DRAFT_QUANT, "int8") == "none" else "auto"


# --- Asset paths ---------------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
MEDUSA_DIR = ASSETS / "medusa"
EAGLE_DIR = ASSETS / "eagle"
BENCH_DIR = ASSETS / "bench"
PRIORS_FILE = ASSETS / "acceptance_priors.json"


def medusa_heads_path(target: str) -> Path:
    return MEDUSA_DIR / f"{target}.safetensors"


def eagle_head_path(target: str) -> Path:
    return EAGLE_DIR / f"{target}.safetensors"


def answers_path(target: str) -> Path:
    return EAGLE_DIR / f"answers-{target}.jsonl"
