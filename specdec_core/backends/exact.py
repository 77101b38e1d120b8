"""Bit-exact verification: a target forward that computes every position exactly as plain decoding does.

A forward of n tokens need not compute position i the way a 1-token forward does: matrix kernels block rows
differently for other row counts (AMX tiles, GEMV vs GEMM paths), and attention reduces over a key row whose length
and contents depend on the other queries in the forward. Then a verify forward's logits differ from plain decoding's
by a rounding step, and where the top two tie within it, greedy speculative output parts from plain greedy output.
`make_exact(lm)` makes the target's forward token-count invariant:

1. Attention (`exact_attention`): each query attends to exactly the keys it may see (the cache and itself; in a token
   tree, the cache and its ancestors), gathered in cache order, in one attention call per query: the same call on the
   same numbers as when that token is decoded alone.
2. Linear layers (`probe_linear`): each kind of layer is probed on this machine, per shape and dtype: n rows
   together must give, bit for bit, what each row gives alone. A kernel that passes runs as is; one that fails runs in
   fixed blocks of BLOCK rows (zero padding, cropped), nearly free where a forward's cost is flat in n (AMX); if that
   fails too, row by row.
3. Prompt passes run inside `prompt_pass()`: the stock attention kernel and each linear layer's own kernel over all
   rows at once (no blocks), since every run of a prompt starts from the same prompt pass (`engine.Prefix`) and no
   other forward of those positions is compared with it. Blocks of 16 made a prompt pass cost one forward per 16
   tokens where the kernel is not row-invariant (bf16 on AMX).

Elementwise layers, norms and rotary embeddings compute each row on its own; `invariance` measures the whole forward
(logits and keys/values, chains and trees) against decoding one token at a time, and the tests hold it to 0.0.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specdec_core.core import tree
from specdec_core.core.kv import crop, new_cache

ATTENTION = "specdec_exact"
BLOCK = 16
_PROBE_ROWS = (1, 2, 3, 5, 8, 13, 16, 17, 33)
_fused = contextvars.ContextVar("specdec_fused", default=False)
_unblocked = contextvars.ContextVar("specdec_unblocked", default=False)


@contextlib.contextmanager
def fused():
    """Within this block the target uses the stock fused attention kernel (for prompt passes)."""
    token = _fused.set(True)
    try:
        yield
    finally:
        _fused.reset(token)


@contextlib.contextmanager
def prompt_pass():
    """Within this block the target runs as stock: fused attention, and `Blocked` layers on all rows at once."""
    token = _unblocked.set(True)
    try:
        with fused():
            yield
    finally:
        _unblocked.reset(token)


def visible_keys(attention_mask: torch.Tensor | None, queries: int, keys: int) -> torch.Tensor:
    """[queries, keys] bool: which keys each query attends to (a bool mask, an additive float mask, or causal)."""
    if attention_mask is None:
        return torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries)
    mask = attention_mask[0, 0, -queries:, :keys]
    return (mask if mask.dtype == torch.bool else mask == 0).cpu()


def exact_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention interface: query [1, H, q, d], key/value [1, KVH, L, d] -> ([1, q, H, d], None)."""
    if _fused.get():
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    _, heads, queries, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    visible = visible_keys(attention_mask, queries, keys)
    out = []
    for i in range(queries):
        idx = visible[i].nonzero().squeeze(1)
        last = int(idx[-1]) + 1
        if len(idx) == last:  # a prefix of the keys (every chain): a view, no gather
            k, v = key[:, :, :last], value[:, :, :last]
        else:
            idx = idx.to(key.device)
            k, v = key.index_select(2, idx), value.index_select(2, idx)
        # The query's heads grouped by their shared key/value head: [1, KVH, heads per KV head, d].
        q = query[:, :, i].reshape(1, kv_heads, heads // kv_heads, dim)
        o = F.scaled_dot_product_attention(q, k.contiguous(), v.contiguous(), scale=scaling)
        out.append(o.reshape(1, heads, dim))
    return torch.stack(out, dim=1), None


def register() -> None:
    """Make ATTENTION a transformers attention implementation (with the SDPA-style boolean mask)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, exact_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


# ---- linear layers -------------------------------------------------------------------------------------------

class Blocked(torch.nn.Module):
    """Runs a row-wise layer on fixed blocks of `rows` rows (zero-padded, cropped), or one row at a time (rows=1)."""

    def __init__(self, inner: torch.nn.Module, rows: int):
        super().__init__()
        self.inner = inner
        self.rows = rows
        self.in_features = inner.in_features
        self.out_features = inner.out_features

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _unblocked.get():
            return self.inner(x)
        flat = x.reshape(-1, x.shape[-1])
        n = flat.shape[0]
        if n == 0:
            return x.new_zeros(*x.shape[:-1], self.out_features)
        pad = -n % self.rows
        if pad:
            flat = torch.cat([flat, flat.new_zeros(pad, flat.shape[1])])
        out = torch.cat([self.inner(block) for block in flat.split(self.rows)])[:n]
        return out.reshape(*x.shape[:-1], self.out_features)


def _row_invariant(layer: torch.nn.Module, x: torch.Tensor) -> bool:
    alone = torch.cat([layer(x[i : i + 1].clone()) for i in range(x.shape[0])])
    return all(torch.equal(layer(x[:m].clone()), alone[:m]) for m in _PROBE_ROWS if m <= x.shape[0])


@dataclass(frozen=True)
class Strategy:
    name: str  # "direct", "blocks of 16", "row by row"
    rows: int  # 0 = direct


_strategies: dict[tuple, Strategy] = {}


@torch.inference_mode()
def probe_linear(layer: torch.nn.Module) -> Strategy:
    """How this kind of layer must run to be row-invariant here (cached per kernel type, shape, dtype, device)."""
    dtype = getattr(layer, "activation_dtype", layer.weight.dtype)  # int8 weight-only layers name theirs
    key = (type(layer).__name__, layer.in_features, layer.out_features, dtype, layer.weight.device.type,
           torch.get_num_threads())
    if key not in _strategies:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(max(_PROBE_ROWS), layer.in_features, generator=gen).to(dtype=dtype, device=layer.weight.device)
        if _row_invariant(layer, x):
            _strategies[key] = Strategy("direct", 0)
        elif _row_invariant(Blocked(layer, BLOCK), x):
            _strategies[key] = Strategy(f"blocks of {BLOCK} rows", BLOCK)
        else:
            _strategies[key] = Strategy("row by row", 1)
    return _strategies[key]


def _linear_layers(model: torch.nn.Module):
    for parent in model.modules():
        for name, child in parent.named_children():
            if hasattr(child, "in_features") and hasattr(child, "out_features") and not isinstance(child, Blocked):
                yield parent, name, child


def make_exact(lm) -> dict[str, str]:
    """Make `lm` (a LanguageModel) token-count invariant in place; returns {layer kind: strategy} for the report."""
    register()
    lm.model.set_attn_implementation(ATTENTION)
    report = {}
    for parent, name, layer in list(_linear_layers(lm.model)):
        strategy = probe_linear(layer)
        report[f"{type(layer).__name__} {layer.in_features}→{layer.out_features}"] = strategy.name
        if strategy.rows:
            setattr(parent, name, Blocked(layer, strategy.rows))
    lm.lm_head = lm.model.get_output_embeddings()
    lm.exact = True
    return report


# ---- measuring invariance ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Invariance:
    logits: float  # max |Δ| over all rows, forwarded together vs one at a time
    keys_values: float  # max |Δ| over the cached keys and values of those positions, every layer
    argmax_equal: bool

    @property
    def exact(self) -> bool:
        return self.logits == 0.0 and self.keys_values == 0.0


@torch.inference_mode()
def invariance(lm, prefix: list[int], tokens: list[int], parents: list[int] | None = None) -> Invariance:
    """Forward tokens[0] (the last committed token) + tokens[1:] as one chain (or tree, with `parents` for
    tokens[1:]) after `prefix`; then decode each root-to-node branch one token at a time from the same prefix cache;
    compare every node's logits and the keys/values of its branch."""

    nodes = len(tokens) - 1
    cache = new_cache()
    lm.prefill(prefix, cache)
    base = len(prefix)
    together = lm.forward(tokens, cache, parents)  # a chain (parents None) takes the engine's chain path
    chain = parents is None
    wide_kv = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    parents = tree.chain_parents(nodes) if chain else parents
    d_logits, d_kv, same = 0.0, 0.0, True
    branches = [[]] + [_branch(parents, j) for j in range(nodes)]  # row 0 = the root alone
    for row, branch in enumerate(branches):
        if chain and row:  # a chain's branches are nested: decode the next token on top of the previous branch
            alone = lm.forward([tokens[row]], cache)
        else:
            crop(cache, base)
            for t in [tokens[0]] + [tokens[j + 1] for j in branch]:
                alone = lm.forward([t], cache)
        d_logits = max(d_logits, (together.logits[row] - alone.logits[0]).abs().max().item())
        same &= int(together.logits[row].argmax()) == int(alone.logits[0].argmax())
        positions = [base] + [base + 1 + j for j in branch]  # where this branch's nodes sit in the wide cache
        for (k, v), layer in zip(wide_kv, cache.layers):
            idx = torch.tensor(positions, device=k.device)
            d_kv = max(d_kv, (k.index_select(2, idx) - layer.keys[:, :, base:]).abs().max().item(),
                       (v.index_select(2, idx) - layer.values[:, :, base:]).abs().max().item())
    return Invariance(d_logits, d_kv, same)


SELF_CHECK = (list(range(1000, 1024)), [220, 262, 315, 264, 279, 311, 323, 304, 369])  # prefix, chain (token ids)


def self_check(lm) -> Invariance:
    """Measure, at load, what a forward of 9 tokens does to their logits against 1-token forwards; the page and the
    engine use the result (`lm.rounding`): 0.0 means bit-exact, more means near-ties can flip."""
    vocab = lm.vocab_size
    prefix, chain = ([t % vocab for t in ids] for ids in SELF_CHECK)
    return invariance(lm, prefix, chain)


def _branch(parents: list[int], node: int) -> list[int]:
    """Nodes from the root's child down to `node`."""
    path = [node]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path[::-1]
