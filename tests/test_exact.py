"""Bit-exact verification on tiny models: a position's logits and keys/values are bitwise the same whether it is
forwarded alone, in a chain or as a tree node; the linear-layer probe picks a strategy that makes that true; and
greedy speculative output equals plain greedy output in bf16, where rounding would otherwise split them."""
from __future__ import annotations

import pytest
import torch

from specdec_core.backends import exact
from specdec_core.core.config import ConfigError, DraftConfig, GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.models import perturbed_copy, tiny_model
from specdec_core.backends.representation import offered, parse
from specdec_core.core.session import run

from conftest import DRAFTERS, PROMPT, make_drafter  # noqa: E402

TREE_TOKENS = [9, 4, 11, 30, 2, 7, 19, 5, 44]
TREE_PARENTS = [-1, -1, 0, 0, 1, 2, 5, -1]  # three children of the root, a deep branch, a sibling pair


def exact_tiny(dtype: torch.dtype, seed: int = 3) -> LanguageModel:
    lm = tiny_model(seed=seed, num_layers=3, hidden_size=128)
    lm = LanguageModel(lm.model.to(dtype), lm.name)
    exact.make_exact(lm)
    return lm


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chain_and_tree_positions_are_bitwise_invariant(dtype):
    lm = exact_tiny(dtype)
    chain = exact.invariance(lm, PROMPT, [17, 3, 42, 8, 60, 5, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])  # 16 drafts
    tree = exact.invariance(lm, PROMPT, TREE_TOKENS, TREE_PARENTS)
    assert chain.exact and tree.exact, (chain, tree)


def test_invariance_detects_a_non_invariant_forward():
    """The measuring function itself can fail: a layer that mixes rows is caught (control)."""
    lm = exact_tiny(torch.float32)
    mlp = lm.model.model.layers[0].mlp
    inner = mlp.down_proj
    mlp.down_proj = _Mixing(inner)
    try:
        result = exact.invariance(lm, PROMPT, [17, 3, 42, 8])
    finally:
        mlp.down_proj = inner
    assert result.logits > 0 and result.keys_values > 0


class _Wrapped(torch.nn.Module):
    """A linear layer around `inner`, for the faulty kernels below."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.in_features, self.out_features = inner, inner.in_features, inner.out_features
        self.weight = inner.weight


class _Mixing(_Wrapped):
    """A linear layer whose rows see each other (like per-tensor activation quantisation)."""

    def forward(self, x):
        return self.inner(x) + 1e-3 * x.mean(dim=-2, keepdim=True).sum(-1, keepdim=True)


class _CountDependent(_Wrapped):
    """A linear layer whose result depends on how many rows it is given (like a kernel choosing its blocking)."""

    def forward(self, x):
        return self.inner(x) * (1 + 1e-3 * x.reshape(-1, x.shape[-1]).shape[0])


class _Diagonal(torch.nn.Module):
    """Row-invariant by construction: an elementwise scale."""

    def __init__(self, n):
        super().__init__()
        self.in_features = self.out_features = n
        self.weight = torch.nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.weight


def test_probe_picks_direct_blocks_or_rows():
    assert exact.probe_linear(_Diagonal(32)).name == "direct"
    assert exact.probe_linear(_CountDependent(torch.nn.Linear(32, 25))).rows == exact.BLOCK
    assert exact.probe_linear(_Mixing(torch.nn.Linear(32, 26))).rows == 1


@pytest.mark.parametrize("rows", [1, exact.BLOCK])
def test_blocked_layer_computes_what_its_inner_layer_does(rows):
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(2, 21, 16)
    torch.testing.assert_close(exact.Blocked(layer, rows)(x), layer(x))
    assert exact.Blocked(layer, rows)(torch.zeros(0, 16)).shape == (0, 8)


def test_make_exact_wraps_count_dependent_layers_and_stays_invariant():
    lm = tiny_model(seed=5, num_layers=2, hidden_size=64)
    for layer in lm.model.model.layers:
        layer.mlp.up_proj = _CountDependent(layer.mlp.up_proj)
    before = exact.invariance(lm, PROMPT, [17, 3, 42, 8, 60])
    report = exact.make_exact(lm)
    assert not before.exact and f"blocks of {exact.BLOCK} rows" in report.values()
    assert exact.invariance(lm, PROMPT, [17, 3, 42, 8, 60]).exact


def test_visible_keys_reads_bool_float_and_missing_masks():
    causal = exact.visible_keys(None, 3, 5)
    assert causal.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    additive = torch.zeros(1, 1, 3, 5).masked_fill(~causal[None, None], torch.finfo(torch.float32).min)
    assert torch.equal(exact.visible_keys(additive, 3, 5), causal)
    assert torch.equal(exact.visible_keys(causal[None, None], 3, 5), causal)


@pytest.mark.parametrize("name", DRAFTERS)
def test_bf16_greedy_equality_every_drafter(name):
    """In bf16, with adaptive drafts up to 16 tokens: bit-exact forwards keep every drafter's output plain greedy."""
    target = exact_tiny(torch.bfloat16, seed=7)
    config = GenerationConfig(max_new_tokens=40, draft=DraftConfig(num_draft_tokens=4, adaptive=True,
                                                                   confidence_threshold=0.0))
    reference = run(SpeculativeEngine(target), "ar", PROMPT, config).token_ids
    drafter = make_drafter(name, target, perturbed_copy(target), PROMPT, 40)
    assert run(SpeculativeEngine(target, drafter, method=name), name, PROMPT, config).token_ids == reference


def test_representation_names_are_checked():
    cpu = torch.device("cpu")
    assert parse("auto", cpu) == "auto" and parse("int8", cpu) == "int8"
    with pytest.raises(ConfigError, match="this machine offers auto, bf16, fp32, int8"):
        parse("int4", cpu)
    with pytest.raises(ConfigError, match="not supported on cpu"):
        parse("fp16", cpu)
    assert offered(cpu) == ("bf16", "fp32", "int8")


def test_self_check_measures_zero_when_exact_and_more_when_not():
    lm = exact_tiny(torch.bfloat16)
    assert exact.self_check(lm).logits == 0.0
    stock = tiny_model(seed=5, num_layers=2, hidden_size=64)
    for layer in stock.model.model.layers:
        layer.mlp.up_proj = _CountDependent(layer.mlp.up_proj)
    assert exact.self_check(stock).logits > 0  # the load-time check can fail


def test_near_ties_are_flagged_only_on_a_target_that_is_not_bit_exact():
    """Greedy on a target with measured rounding r: an emitted token is a near-tie iff its row's top-2 logit gap
    <= 2r, checked against the logits of plain decoding; r = 0 (bit-exact) flags nothing."""
    from specdec_core.core.metrics import compute_stats

    target = exact_tiny(torch.float32, seed=7)
    config = GenerationConfig(max_new_tokens=24, draft=DraftConfig(num_draft_tokens=4))
    drafter = make_drafter("draft", target, perturbed_copy(target), PROMPT, 24)
    target.rounding = 0.0
    plain = run(SpeculativeEngine(target), "ar", PROMPT, config)
    assert compute_stats(plain.rounds).near_ties == []
    from specdec_core.core.kv import new_cache

    cache, gaps = new_cache(), []
    target.prefill(PROMPT[:-1], cache)
    for t in [PROMPT[-1], *plain.token_ids[:-1]]:
        top2 = torch.topk(target.forward([t], cache).logits[0], 2).values
        gaps.append(float(top2[0] - top2[1]))
    target.rounding = sorted(gaps)[len(gaps) // 2] / 2  # about half the choices become near-ties
    expected = [i for i, g in enumerate(gaps) if g <= 2 * target.rounding]
    for engine in (SpeculativeEngine(target), SpeculativeEngine(target, drafter, method="draft")):
        result = run(engine, "x", PROMPT, config)
        assert result.token_ids == plain.token_ids
        assert compute_stats(result.rounds).near_ties == expected and 0 < len(expected) < len(gaps)
