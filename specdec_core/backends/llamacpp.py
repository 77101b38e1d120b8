"""llama.cpp as a backend: a GGUF file (the embedded models as they ship, Q4_K_M) run through llama.cpp's C API
(llama-cpp-python's ctypes bindings) behind the same protocol as the torch target: prefill, forward new tokens with
logits per row, and a cache whose verbs core/kv.py calls. Sampling and verification stay this project's code.

Exactness is measured, not assumed: at load the target decodes a few tokens one at a time, then again in chunks of
k = 2, 3, ... rows, and keeps the largest k whose every logit equals the one-token run's bit for bit
(`max_verify_tokens`); the engine never verifies more rows than that in one forward, and a forward asked for more is
refused. Each cache is a llama.cpp context of its own (from the model's pool), holding one sequence laid out from
cell 0, as plain decoding lays it out; a copy moves the sequence's bytes (`llama_state_seq_get/set_data`).

Not offered here, each with its reason (`REFUSED`): the methods that read the target's hidden states or layers (layer
skip, Medusa, EAGLE: their heads were trained on the torch target's bf16 hidden states), and with them token trees, the
only methods that propose trees being Medusa's and EAGLE's. A tree could go in one batch through sequence ids (each
leaf a sequence, each node tagged with the leaves below it, as llama.cpp's own tree drafting does), but it would not
stay exact: the kept branch sits in cells scattered among its removed siblings, the next tokens fill those holes out of
position order, and the CPU flash-attention kernel sums over cells in cell order, so later steps would add up in another
order than plain decoding's. Measured (`docs/scripts/llamacpp_tree_probe.py`, Zen 4, 2 threads): a 3-node tree's rows
equal one-token decoding bit for bit, but after its branch is kept all 24 following one-token steps differ from plain
decoding (max |Δlogit| 0.47), where the same steps after a 3-token chain are all equal. Moving the branch back into
order would cost a forward per round.

Optional: without llama-cpp-python, `load` raises ModelLoadError naming `INSTALL`."""
from __future__ import annotations

import ctypes
import functools
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFReader, LlamaFileType
from transformers import AutoTokenizer

from specdec_core.backends.exact import SELF_CHECK
from specdec_core.backends.ggml_kernels import model_tflops
from specdec_core.backends.representation import cpuinfo
from specdec_core.backends.models import EMBEDDED, ModelLoadError, assemble_gguf, cache_root, embedded_dir
from specdec_core.core.config import ConfigError
from specdec_core.core.backend import ForwardOutput

try:  # optional dependency: requirements-llamacpp.txt (a source build of llama.cpp)
    import llama_cpp as L
except ImportError:  # pragma: no cover - depends on the machine
    L = None

INSTALL = "pip install -r requirements-llamacpp.txt  (builds llama.cpp from source: about 11 minutes on 2 cores)"
TREES = ("token trees are not offered on llama.cpp: a kept branch would leave the cache out of position order, "
         "and later steps would not be bit-exact")
REFUSED = {
    "layerskip": "layer skip runs a subset of the target's layers, which llama.cpp's graph does not expose",
    "medusa": "Medusa heads read the torch target's hidden states; llama.cpp's Q4_K_M target has other ones",
    "medusa-tree": f"Medusa heads read the torch target's hidden states; and {TREES}",
    "eagle": "the EAGLE head reads the torch target's hidden states; llama.cpp's Q4_K_M target has other ones",
    "eagle-tree": f"the EAGLE head reads the torch target's hidden states; and {TREES}",
}
PROBE_TOKENS = 24  # tokens decoded one at a time, then in chunks, to find the largest exact verify batch
PROBE_MAX_ROWS = 16
PROBE_SHORT, PROBE_LONG = 32, 1024  # cache lengths between which the probe looks for where batches stop agreeing
BATCH = 512  # llama.cpp's n_batch: a prompt pass goes in chunks of this many tokens


def available() -> bool:
    return L is not None


@functools.cache
def _quiet() -> None:
    """llama.cpp logs every load to stderr; keep errors only (the callback must outlive the process's use of it)."""
    @L.llama_log_callback
    def log(level, text, user_data):
        if level == 4:  # GGML_LOG_LEVEL_ERROR (5 is CONT: the progress dots)
            print(text.decode(errors="replace"), end="", flush=True)

    _quiet.callback = log
    L.llama_log_set(log, ctypes.c_void_p(0))


class LlamaCache:
    """One request's KV cache: a llama.cpp context of its own, sequence 0, `length` positions."""

    def __init__(self, model: "LlamaCppModel"):
        self.model = model
        self.ctx = model._take_context()
        self.length = 0
        self._release = weakref.finalize(self, model._give_back, self.ctx)

    def crop(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if length < self.length:
            L.llama_memory_seq_rm(L.llama_get_memory(self.ctx), 0, length, -1)
            self.length = length

    def keep(self, prefix: int, positions: list[int]) -> None:
        if positions != list(range(prefix, prefix + len(positions))):
            raise ConfigError(TREES)
        self.crop(prefix + len(positions))

    def __deepcopy__(self, memo) -> "LlamaCache":  # a drafter's state copied (the profile's timers): its own context
        return self.copy()

    def copy(self) -> "LlamaCache":
        other = LlamaCache(self.model)
        size = L.llama_state_seq_get_size(self.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        got = L.llama_state_seq_get_data(self.ctx, buf, size, 0)
        if got == 0 or L.llama_state_seq_set_data(other.ctx, buf, got, 0) == 0:
            raise RuntimeError("llama.cpp could not copy a sequence between contexts")
        other.length = self.length
        return other


class LlamaCppModel:
    """A GGUF model under llama.cpp, batch size 1, behind core/backend.py's protocol. Hidden states are not offered
    (`hidden_size` 0): the methods that need them are refused."""

    backend = "llamacpp"
    refused = REFUSED  # method -> why it is not offered on this backend (the registry says it)
    dtype = torch.float32
    device = torch.device("cpu")
    hidden_size = 0
    isa = property(lambda self: kernel_isa())  # the instruction set of this build's kernels (the profile's key)

    def __init__(self, path: Path, name: str, threads: int, n_ctx: int = 4096, flash_attn: bool = True):
        if L is None:
            raise ModelLoadError(f"the llama.cpp backend needs llama-cpp-python: {INSTALL}")
        _quiet()
        L.llama_backend_init()
        params = L.llama_model_default_params()
        self.repacked = repack_weights()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = self.repacked
        self._model = L.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            raise ModelLoadError(f"llama.cpp could not load {path}")
        self.name, self.path, self.threads, self.n_ctx, self.flash_attn = name, Path(path), threads, n_ctx, flash_attn
        self._vocab = L.llama_model_get_vocab(self._model)
        self.vocab_size = L.llama_vocab_n_tokens(self._vocab)
        self.max_positions = n_ctx
        self._pool: list = []
        self._lock = threading.Lock()
        self.rounding: float | None = None
        self.max_verify_tokens: int | None = None  # set by measure_exactness (the target); None: not checked
        self.exact_until: int | None = None  # cache length a verify forward may reach (measured at load)
        self.decode_seconds, self.decode_calls = 0.0, 0  # time inside llama_decode; decodes that returned logits
        self.exact = False  # measured: verify batches up to max_verify_tokens are bitwise equal to 1-token decoding
        self.weight_bytes = self.path.stat().st_size  # what one token's forward reads (the profile's utilization)
        self.representation = f"GGUF {quantisation(self.path)} · llama.cpp"
        self.representation_note = (f"llama.cpp {version()} ({build()}), {threads} threads, flash attention "
                                    f"{'on' if flash_attn else 'off'}, weights {'repacked' if self.repacked else 'as stored'}")

    # -- contexts (one per live cache) ------------------------------------------------------------------------------
    def _take_context(self):
        with self._lock:
            if self._pool:
                return self._pool.pop()
        params = L.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = self.n_ctx, BATCH, BATCH, 1
        params.n_threads = params.n_threads_batch = self.threads
        if hasattr(params, "flash_attn_type"):
            params.flash_attn_type = 1 if self.flash_attn else 0
        else:
            params.flash_attn = self.flash_attn
        ctx = L.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError("llama.cpp could not create a context")
        return ctx

    def _give_back(self, ctx) -> None:
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        with self._lock:
            self._pool.append(ctx)

    def new_cache(self) -> LlamaCache:
        return LlamaCache(self)

    # -- the protocol ------------------------------------------------------------------------------------------------
    def _decode(self, cache: LlamaCache, token_ids: list[int], rows: int) -> torch.Tensor | None:
        """Append tokens at the cache's next positions; logits of the last `rows` of them ([rows, vocab] float32)."""
        n = len(token_ids)
        batch = L.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i, token in enumerate(token_ids):
                batch.token[i] = token
                batch.pos[i] = cache.length + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i >= n - rows
            t0 = time.perf_counter()
            rc = L.llama_decode(cache.ctx, batch)
            self.decode_seconds += time.perf_counter() - t0  # the bench's forward time
            self.decode_calls += rows > 0
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} ({n} tokens after {cache.length})")
        finally:
            L.llama_batch_free(batch)
        cache.length += n
        if not rows:
            return None
        out = [np.ctypeslib.as_array(L.llama_get_logits_ith(cache.ctx, i), shape=(self.vocab_size,))
               for i in range(n - rows, n)]
        return torch.from_numpy(np.stack(out).copy())

    def prefill(self, token_ids: list[int], cache: LlamaCache) -> torch.Tensor:
        for start in range(0, len(token_ids), BATCH):
            self._decode(cache, token_ids[start:start + BATCH], 0)
        return torch.empty(len(token_ids), 0)

    def forward(self, token_ids: list[int], cache: LlamaCache, parents: list[int] | None = None,
                logits_rows: int | None = None) -> ForwardOutput:
        if parents is not None:
            raise ConfigError(TREES)
        allowed = self.verify_rows(cache.length)
        if allowed is not None and len(token_ids) > allowed:
            raise ConfigError(f"refused: a llama.cpp forward of {len(token_ids)} tokens after {cache.length} is not "
                              f"bitwise equal to decoding them one at a time on this machine (at most {allowed} are)")
        rows = len(token_ids) if logits_rows is None else min(logits_rows, len(token_ids))
        logits = None
        for start in range(0, len(token_ids), BATCH):  # a draft model's catch-up may exceed one batch
            chunk = token_ids[start:start + BATCH]
            logits = self._decode(cache, chunk, min(len(chunk), max(0, rows - (len(token_ids) - start - len(chunk)))))
        return ForwardOutput(logits, torch.empty(rows, 0))

    def forward_unverified(self, token_ids: list[int], cache: LlamaCache) -> None:
        """A forward of any size with its logits computed and dropped: for the profile's timing of T(n) past the
        exact verify batch (the roofline's check), never for verification."""
        self._decode(cache, token_ids, len(token_ids))

    def kernel_tflops(self, sizes: tuple[int, ...]) -> dict[int, float]:
        """{n: TFLOPS} this model's matmuls reach on n rows, from ggml's kernels on cache-resident weights
        (backends/ggml_kernels.py): every matmul weight of the GGUF (the token table only where the output reuses
        it), with this model's threads and repacking."""
        tensors = [t for t in GGUFReader(str(self.path)).tensors if len(t.shape) == 2]
        tied = not any(t.name == "output.weight" for t in tensors)
        weights = [(int(t.tensor_type), int(t.shape[0]), int(t.shape[1])) for t in tensors
                   if t.name != "token_embd.weight" or tied]
        return model_tflops(weights, tuple(sizes), self.threads, self.repacked)

    def verify_rows(self, cached: int) -> int | None:
        """The most tokens one forward after `cached` tokens computes bitwise as 1-token decoding does (None: not
        measured, any). Past `exact_until` only one: there llama.cpp's one-token decode splits the attention over
        the KV cache across threads (the sums add up in another order) and a batch of rows does not."""
        if self.max_verify_tokens is None:
            return None
        if self.exact_until is None:
            return self.max_verify_tokens
        return max(1, min(self.max_verify_tokens, self.exact_until - cached))

    @property
    def exactness_note(self) -> str:
        """What the probe found, for the label and the docs."""
        if not self.exact:
            return "not bit-exact in batches: verifies one token per forward"
        return (f"bit-exact up to {self.max_verify_tokens} tokens per forward while the cache holds at most "
                f"{self.exact_until} tokens; past that one per forward (plain decoding)")

    def _exact_context(self, longest: int) -> int | None:
        """The cache length a verify forward may reach: where a 2-token forward still equals two 1-token ones (binary
        search over copies of one long prefill), and never past `longest`, the length probed: no batch verifies
        beyond what was measured."""
        vocab = min(self.vocab_size, 30000)
        ids = [(1000 + 37 * i) % vocab for i in range(longest + 2)]
        full = self.new_cache()
        self.prefill(ids[:longest], full)

        def agrees(length: int) -> bool:
            cache = full.copy()
            cache.crop(length)
            one = torch.stack([self._decode(cache, [t], 1)[0] for t in ids[length:length + 2]])
            cache.crop(length)
            return torch.equal(self._decode(cache, ids[length:length + 2], 2), one)

        if agrees(longest):
            return longest + 2
        lo, hi = PROBE_SHORT, longest
        if not agrees(lo):
            return lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if agrees(mid) else (lo, mid)
        return lo + 2  # 2 rows after lo cached tokens agree: a forward may reach lo + 2

    def measure_exactness(self, prompt_ids: list[int]) -> int:
        """The largest k such that decoding k tokens in one forward gives logits bitwise equal to decoding them one at
        a time, for every chunk size up to k (1 if none); sets `max_verify_tokens` and `rounding`."""
        one = self.new_cache()
        self.prefill(prompt_ids[:-1], one)
        tokens, rows = [prompt_ids[-1]], []
        for _ in range(PROBE_TOKENS):
            rows.append(self._decode(one, [tokens[-1]], 1)[0])
            tokens.append(int(rows[-1].argmax()))
        reference = torch.stack(rows)
        best, worst = 1, 0.0
        for k in range(2, PROBE_MAX_ROWS + 1):
            one.crop(len(prompt_ids) - 1)
            got = torch.cat([self._decode(one, tokens[s:s + k], len(tokens[s:s + k]))
                             for s in range(0, PROBE_TOKENS, k)])[:PROBE_TOKENS]
            diff = float((got - reference).abs().max())
            if diff != 0.0:
                worst = diff
                break
            best = k
        self.max_verify_tokens, self.rounding, self.exact = best, (0.0 if best > 1 else worst), best > 1
        if best > 1:
            self.exact_until = self._exact_context(min(PROBE_LONG, self.n_ctx - 8))
        return best


@functools.lru_cache(maxsize=4)
def load(name: str, threads: int = 0, target: bool = True) -> tuple[LlamaCppModel, object]:
    """(model, tokenizer) for an embedded model's GGUF under llama.cpp; a target has its exact verify batch measured
    (about ten seconds), a draft does not need one."""
    model = LlamaCppModel(gguf_file(name), name, threads or torch.get_num_threads())
    if target:
        prefix, chain = SELF_CHECK
        model.measure_exactness([t % model.vocab_size for t in prefix + chain])
        model.representation_note += f"; {model.exactness_note}"
    return model, AutoTokenizer.from_pretrained(embedded_dir(name))


def gguf_file(name: str) -> Path:
    """The embedded model's GGUF, assembled once into the cache (llama.cpp reads it as it ships)."""
    if name not in EMBEDDED:
        raise ModelLoadError(f"llama.cpp runs the embedded models only ({', '.join(EMBEDDED)}), not {name!r}")
    out = cache_root() / "gguf" / f"{name}.gguf"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        assemble_gguf(EMBEDDED[name], tmp)
        tmp.replace(out)
    return out


def quantisation(path: Path) -> str:
    """The GGUF's file type, e.g. 'Q4_K_M' (from its header)."""
    field = GGUFReader(str(path)).fields.get("general.file_type")
    if field is None:
        return "unknown quantisation"
    value = int(field.parts[field.data[0]][0])
    try:
        return LlamaFileType(value).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"file type {value}"


def repack_weights() -> bool:
    """Whether llama.cpp repacks the weights for this CPU's kernels (its "extra buffer types", on by default in
    llama.cpp and in llama-cpp-python's `Llama`, so what a user's plain decoding runs). Measured on a Zen 4 EPYC (2
    threads, target Q4_K_M): 1-token step 45 -> 36 ms, but a 150-token prompt pass 1.1 -> 1.9 s and bitwise-equal
    verify batches 7 -> 3 rows. Off on a CPU with AMX, where the AMX repacking crashed (../shared/notes)."""
    return "amx_tile" not in cpuinfo("flags").split()


def kernel_isa() -> str:
    """The widest instruction set this build's kernels use, in PyTorch's words: AMX, AVX512, AVX2, AVX or DEFAULT."""
    features = build().split()
    if any(f.startswith("AMX") for f in features):
        return "AMX"
    return next((f for f in ("AVX512", "AVX2", "AVX") if f in features), "DEFAULT")


def version() -> str:
    return getattr(L, "__version__", "?") if L is not None else "not installed"


@functools.cache
def build() -> str:
    """The CPU features this llama.cpp build's kernels use, as llama.cpp reports them (e.g. "AVX2 FMA F16C ... REPACK"
    for a build limited to AVX2, "... AVX512 AVX512_BF16 ..." for GGML_NATIVE on a Zen 4): which build ran."""
    if L is None:
        return "not installed"
    info = L.llama_print_system_info().decode(errors="replace")
    return " ".join(part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("= 1")
                    ).removeprefix("CPU : ") or info.strip()
