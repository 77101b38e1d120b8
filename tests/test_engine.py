"""The round loop on tiny random-weight models: greedy equality for every drafter, exact edge cases, sampling."""
from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from conftest import DRAFTERS, PROMPT, greedy_reference, make_drafter
from specdec_core.methods.registry import METHODS
from specdec_core.core.config import ConfigError, DraftConfig, GenerationConfig, SamplingConfig
from specdec_core.methods.draft_model import DraftModelDrafter
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.metrics import compute_stats
from specdec_core.core.sampling import logits_to_probs
from specdec_core.core.kv import new_cache
from specdec_core.core.session import run

N = 40


@pytest.mark.parametrize("adaptive", [False, True], ids=["fixed", "adaptive"])
@pytest.mark.parametrize("num_draft_tokens", [1, 4])
@pytest.mark.parametrize("name", DRAFTERS)
def test_greedy_matches_plain_greedy(name, num_draft_tokens, adaptive, target, draft_model):
    reference = greedy_reference(target, PROMPT, N)
    engine = SpeculativeEngine(target, make_drafter(name, target, draft_model), method=name)
    config = GenerationConfig(max_new_tokens=N, draft=DraftConfig(num_draft_tokens=num_draft_tokens, adaptive=adaptive))
    result = run(engine, name, PROMPT, config)
    assert result.token_ids == reference
    stats = result.stats
    assert stats.new_tokens == N and len(result.rounds) == stats.target_forwards
    assert all(len(r.emitted) == len(r.sources) for r in result.rounds)
    if name == "always-right":
        assert stats.acceptance_rate == 1.0 and stats.target_forwards <= -(-N // (num_draft_tokens + 1))
    if name == "always-wrong":
        assert stats.accepted == 0 and stats.target_forwards == N
    if name == "right-for-1" and not adaptive:
        assert stats.accepted == stats.rounds - 1 or stats.accepted == stats.rounds  # one accepted per round
    if name == "draft":
        assert 0 < stats.accepted < stats.drafted  # partial acceptance really happens
    if name == "tree-right-second":  # the right branch (never a first child) is accepted whole every round
        assert all(r.num_accepted == r.depth and len(r.accepted_path) == r.depth for r in result.rounds)
        assert any(r.depth > 0 and r.accepted_path != list(range(r.depth)) for r in result.rounds)
    if name.startswith("medusa"):
        assert 0 < stats.accepted


def test_one_prompt_pass_serves_every_run(target, draft_model):
    """A race's lanes and Compare's share one prompt pass: each run copies the cache; none writes to the shared one."""
    config = GenerationConfig(max_new_tokens=12, draft=DraftConfig(num_draft_tokens=3))
    reference = greedy_reference(target, PROMPT, 12)
    prefix = SpeculativeEngine(target).prefill(PROMPT)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in prefix.cache.layers]
    for name in DRAFTERS:
        engine = SpeculativeEngine(target, make_drafter(name, target, draft_model), method=name)
        rounds = list(engine.generate(PROMPT, config, prefix))
        assert [t for r in rounds for t in r.emitted] == reference, name
        assert rounds[0].prefill_seconds == prefix.seconds > 0
    assert all(torch.equal(k, layer.keys) and torch.equal(v, layer.values)
               for (k, v), layer in zip(before, prefix.cache.layers))
    with pytest.raises(ValueError, match="another prompt"):
        list(SpeculativeEngine(target).generate(PROMPT[:-1], config, prefix))


@pytest.mark.parametrize("name", ["draft", "always-right", "right-for-3"])
@pytest.mark.parametrize("max_new_tokens", [1, 2, 3, 7])
def test_max_new_tokens_reached_mid_round(name, max_new_tokens, target, draft_model):
    reference = greedy_reference(target, PROMPT, max_new_tokens)
    engine = SpeculativeEngine(target, make_drafter(name, target, draft_model), method=name)
    config = GenerationConfig(max_new_tokens=max_new_tokens, draft=DraftConfig(num_draft_tokens=5))
    result = run(engine, name, PROMPT, config)
    assert result.token_ids == reference
    assert result.rounds[-1].finished == "length"


@pytest.mark.parametrize("name", ["ar", "draft", "always-right", "lookup"])
def test_eos_inside_a_draft_stops_exactly(name, target, draft_model):
    reference = greedy_reference(target, PROMPT, N)
    eos = reference[6]  # a token the target emits mid-stream
    expected = reference[: reference.index(eos) + 1]
    engine = SpeculativeEngine(target, make_drafter(name, target, draft_model), eos_token_ids=(eos,), method=name)
    result = run(engine, name, PROMPT, GenerationConfig(max_new_tokens=N, draft=DraftConfig(num_draft_tokens=8)))
    assert result.token_ids == expected
    assert result.rounds[-1].finished == "eos"


@pytest.mark.parametrize("name", ["ar", "draft", "always-right"])
def test_context_limit_is_respected(name, target, draft_model):
    limit = target.max_positions
    prompt = (PROMPT * 100)[: limit - 5]
    reference = greedy_reference(target, prompt, 5)
    engine = SpeculativeEngine(target, make_drafter(name, target, draft_model, prompt=prompt), method=name)
    result = run(engine, name, prompt, GenerationConfig(max_new_tokens=50, draft=DraftConfig(num_draft_tokens=4)))
    assert result.token_ids == reference
    assert result.rounds[-1].finished == "context"
    with pytest.raises(ConfigError, match="limit"):
        list(engine.generate(PROMPT * 100, GenerationConfig(max_new_tokens=5)))


def test_bad_inputs_raise_clear_errors(target):
    engine = SpeculativeEngine(target)
    with pytest.raises(ConfigError, match="empty"):
        list(engine.generate([], GenerationConfig()))
    for bad in (lambda: GenerationConfig(max_new_tokens=0), lambda: GenerationConfig(max_new_tokens=10**6),
                lambda: SamplingConfig(temperature=-1), lambda: SamplingConfig(top_p=0),
                lambda: DraftConfig(num_draft_tokens=-1)):
        with pytest.raises(ConfigError):
            bad()


def test_trace_records_probabilities_and_sources(target, draft_model):
    engine = SpeculativeEngine(target, DraftModelDrafter(draft_model, target.vocab_size), method="draft")
    result = run(engine, "draft", PROMPT, GenerationConfig(max_new_tokens=20, sampling=SamplingConfig(temperature=1.0)))
    for r in result.rounds:
        assert len(r.q_draft) == len(r.p_target) == len(r.drafted)
        assert all(0 < q <= 1 for q in r.q_draft) and all(0 <= p <= 1 for p in r.p_target)
        assert len(r.uniforms) == min(r.num_accepted + 1, len(r.drafted))
        assert r.sources[: r.num_accepted] == ["draft"] * min(r.num_accepted, len(r.emitted))
        assert (r.residual_top is not None) == (r.num_accepted < len(r.drafted))
        assert r.draft_seconds > 0 and r.verify_seconds > 0
    assert result.rounds[0].prefill_seconds > 0
    stats = compute_stats(result.rounds)
    assert stats.tokens_per_second > 0 and 1 <= stats.mean_tokens_per_round <= 6


def test_same_seed_same_sample_and_seed_zero_is_a_seed(target, draft_model):
    def sample(seed):
        engine = SpeculativeEngine(target, DraftModelDrafter(draft_model, target.vocab_size), method="draft")
        config = GenerationConfig(max_new_tokens=15, seed=seed, sampling=SamplingConfig(temperature=1.0))
        return run(engine, "draft", PROMPT, config).token_ids

    assert sample(0) == sample(0)
    assert sample(0) != sample(1) or sample(0) != sample(2)


@pytest.mark.parametrize("name", [*METHODS[1:], "tree-right-second"])
def test_sampling_first_token_matches_target_distribution(name, target, draft_model):
    """End to end at T=1 with top-k 6 (same warping for p and q): the first token of the first speculating round
    ~ p_target. (Where a drafter's first round is a plain step the check is conditional on the most frequent first
    token.)"""
    from collections import Counter

    sampling = SamplingConfig(temperature=1.0, top_k=6)
    prompt = PROMPT[:-1] + [PROMPT[-3]]  # ends in a repeated bigram so lookup proposes too
    drafter = make_drafter(name, target, draft_model)
    engine = SpeculativeEngine(target, drafter, method=name)
    n, seen = 3000, []
    for seed in range(n):
        before: list[int] = []
        for r in engine.generate(prompt, GenerationConfig(max_new_tokens=4, seed=seed, sampling=sampling)):
            if r.num_drafted:
                seen.append((tuple(before), r.emitted[0]))
                break
            before += r.emitted
    assert len(seen) == n  # every run did speculate
    prefix, _ = Counter(b for b, _ in seen).most_common(1)[0]
    firsts = [x for b, x in seen if b == prefix]
    assert len(firsts) >= 500 and (prefix == () or name.startswith("medusa"))
    p = logits_to_probs(target.forward(prompt + list(prefix), new_cache()).logits[-1], sampling)
    counts = torch.bincount(torch.tensor(firsts), minlength=p.shape[-1]).float()
    support = p > 0
    assert counts[~support].sum() == 0
    assert chisquare(counts[support].numpy(), (p[support] * len(firsts)).numpy()).pvalue > 1e-3


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", DRAFTERS)
def test_trace_records_each_nodes_outcome(name, temperature, target, draft_model):
    """Every drafted node's fate is in the trace, consistent with what was committed: accepted nodes are the branch,
    a chain has at most one rejection and nothing judged after it, every judged node has the p it was judged with
    (and a u when sampling), and the target's own token is named correction, bonus or plain."""
    config = GenerationConfig(max_new_tokens=24, sampling=SamplingConfig(temperature=temperature))
    result = run(SpeculativeEngine(target, make_drafter(name, target, draft_model), method=name), name, PROMPT, config)
    for r in result.rounds:
        k = len(r.drafted)
        assert len(r.outcomes) == len(r.judged_p) == len(r.node_uniforms) == k
        assert [i for i, o in enumerate(r.outcomes) if o == "accepted"] == sorted(r.branch)
        judged = [i for i, o in enumerate(r.outcomes) if o in ("accepted", "rejected")]
        assert all((r.judged_p[i] is not None) == (i in judged) for i in range(k))
        assert all((r.node_uniforms[i] is not None) == (i in judged and temperature > 0) for i in range(k))
        if r.parents is None:
            assert r.outcomes == (["accepted"] * r.num_accepted + ["rejected"] * (r.num_accepted < k)
                                  + ["unexamined"] * max(0, k - r.num_accepted - 1))
            assert all(r.judged_p[i] == r.p_target[i] for i in judged)
        else:
            assert "unexamined" not in r.outcomes
        assert (r.next_kind == "plain") == (k == 0)
        if len(r.emitted) > r.num_accepted and k:  # the target's token was committed: its source says the same
            assert r.sources[r.num_accepted] == ("bonus" if r.next_kind == "bonus" else "correction")
        assert r.residual_drawn == (temperature > 0 and r.next_kind == "correction")


def test_cost_aware_length_is_a_trees_node_budget(target, draft_model):
    """With a cost-aware length, a tree drafter gets the length as its node budget (never more nodes than it); with a
    fixed length it keeps its own size. Output stays plain greedy either way."""
    from specdec_core.core.schedule import Cost

    config = GenerationConfig(max_new_tokens=20, draft=DraftConfig(num_draft_tokens=2, cost_aware=True))
    steep = Cost(lambda n: 100.0 * n, 0.5)  # each verified token costs a full step: small trees
    rounds = run(SpeculativeEngine(target, make_drafter("medusa-tree", target, draft_model), (), steep, method="medusa-tree"), "medusa-tree",
                 PROMPT, config).rounds
    assert all(r.num_drafted <= max(r.num_draft_requested, 0) for r in rounds)
    fixed = run(SpeculativeEngine(target, make_drafter("medusa-tree", target, draft_model), method="medusa-tree"), "medusa-tree", PROMPT,
                GenerationConfig(max_new_tokens=20, draft=DraftConfig(num_draft_tokens=2))).rounds
    assert max(r.num_drafted for r in fixed) == 8  # conftest's TreeShape(8, 3), whatever the length
    assert [t for r in rounds for t in r.emitted] == [t for r in fixed for t in r.emitted] == \
        greedy_reference(target, PROMPT, 20)


def test_int4_draft_keeps_greedy_output_and_its_layers_track_bf16(target):
    """An int4 weight-only draft (a --draft-repr) changes only q: the output stays plain greedy; each int4 layer stays
    within 4-bit rounding of the bf16 layer it replaced."""
    import copy

    from specdec_core.backends.lm import LanguageModel
    from specdec_core.backends.quantize import Int4WeightOnlyLinear, int4_weight_only

    dense = copy.deepcopy(target.model).to(torch.bfloat16)
    layer = dense.model.layers[0].mlp.down_proj
    x = torch.randn(5, layer.in_features, dtype=torch.bfloat16)
    ref = layer(x).float()
    err = (Int4WeightOnlyLinear(layer)(x).float() - ref).norm() / ref.norm()
    assert 0 < err < 0.15
    draft = int4_weight_only(LanguageModel(dense, "tiny-bf16"))
    assert "int4" in draft.representation and isinstance(draft.lm_head, Int4WeightOnlyLinear)
    config = GenerationConfig(max_new_tokens=N, draft=DraftConfig(num_draft_tokens=4))
    result = run(SpeculativeEngine(target, DraftModelDrafter(draft, target.vocab_size), method="draft"), "draft", PROMPT, config)
    assert result.token_ids == greedy_reference(target, PROMPT, N)
    assert result.stats.accepted > 0
