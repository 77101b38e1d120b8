"""Token trees: masks, one-forward tree verification against chains, keeping a branch of the KV cache, the tree
verifier's exactness (chi-square, with a lossy control it must reject), and the Medusa drafter's tree shape."""
from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from conftest import PROMPT, tiny_medusa_heads
from specdec_core.core.config import SamplingConfig
from specdec_core.core.drafter import DraftContext
from specdec_core.methods.medusa import MedusaDrafter, MedusaHeads, TreeShape
from specdec_core.core.kv import cache_length, keep, new_cache
from specdec_core.core.sampling import sample, uniform
from specdec_core.core.tree import ancestors_mask, children, depths
from specdec_core.core.verify import residual_distribution, verify_tree

TREE = [-1, -1, 0, 0, 1, 2]  # root -> {0, 1}; 0 -> {2, 3}; 1 -> {4}; 2 -> {5}
BRANCHES = [[0, 2, 5], [0, 3], [1, 4]]


def test_depths_children_and_mask():
    assert depths(TREE) == [1, 1, 2, 2, 2, 3]
    assert children(TREE)[-1] == [0, 1] and children(TREE)[0] == [2, 3] and children(TREE)[5] == []
    m = ancestors_mask(TREE)
    assert m[6].tolist() == [True, True, False, True, False, False, True]  # node 5: root, 0, 2, itself
    assert m[5].tolist() == [True, False, True, False, False, True, False]  # node 4: root, 1, itself


def test_tree_forward_equals_each_branch_as_a_chain(target):
    tokens = [11, 12, 13, 14, 15, 16]
    cache = new_cache()
    target.forward(PROMPT[:-1], cache)
    tree_out = target.forward([PROMPT[-1], *tokens], cache, TREE)
    for branch in BRANCHES:
        chain_cache = new_cache()
        target.forward(PROMPT[:-1], chain_cache)
        chain = target.forward([PROMPT[-1], *(tokens[i] for i in branch)], chain_cache)
        rows = [0] + [i + 1 for i in branch]
        assert torch.allclose(tree_out.logits[rows], chain.logits, atol=1e-4)


def test_keep_a_branch_then_continue_equals_a_fresh_forward(target):
    tokens = [11, 12, 13, 14, 15, 16]
    cache = new_cache()
    target.forward(PROMPT[:-1], cache)
    target.forward([PROMPT[-1], *tokens], cache, TREE)
    committed = len(PROMPT)
    keep(cache, committed, [committed + i for i in (1, 4)])  # branch [1, 4]: not the first nodes
    assert cache_length(cache) == committed + 2
    after = target.forward([7, 8], cache).logits
    fresh = target.forward(PROMPT + [tokens[1], tokens[4], 7, 8], new_cache()).logits[-2:]
    assert torch.allclose(after, fresh, atol=1e-4)


def test_greedy_tree_follows_the_matching_child():
    V = 20
    draft = [3, 4, 5, 6, 7, 8]
    argmax = {0: 4, 2: 7, 5: 9}  # root wants 4 (node 1), node 1 wants 7 (node 4), node 4 wants 9: no child
    p = torch.full((7, V), 0.01)
    for row, token in {0: 4, 2: 7, 5: 9}.items():
        p[row, token] = 1.0
    v = verify_tree(draft, TREE, p, None, greedy=True)
    assert argmax and v.path == (1, 4) and v.num_accepted == 2 and v.next_token == 9 and v.is_bonus


def lossy_verify_tree(draft, parents, p, gen):
    """Control: tries siblings against p itself instead of the residual (double-counts mass). Must be caught."""
    kids = children(parents)
    for c in kids[-1]:
        if uniform(gen) < float(p[0, draft[c]]):
            return draft[c]
    return sample(p[0], gen)


def two_level_counts(p, draft, verifier, n=20000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    first = torch.zeros(p.shape[-1])
    second = torch.zeros(p.shape[-1])
    for _ in range(n):
        if verifier is None:
            v = verify_tree(draft, TREE, p, gen, greedy=False)
            out = [draft[i] for i in v.path] + [v.next_token]
        else:
            out = [verifier(draft, TREE, p, gen)]
        first[out[0]] += 1
        if len(out) > 1 and out[0] == draft[0]:
            second[out[1]] += 1
    return first, second


def test_tree_sampling_is_exact_and_a_lossy_variant_is_rejected():
    V = 6
    gen = torch.Generator().manual_seed(3)
    p = torch.rand(7, V, generator=gen) ** 2
    p = p / p.sum(-1, keepdim=True)
    p[0] = torch.tensor([0.1, 0.35, 0.2, 0.05, 0.2, 0.1])  # the first candidate is likely: the second level is tested
    draft = [1, 2, 3, 4, 0, 5]  # root candidates 1, 2; under node 0 (token 1): 3, 4
    first, second = two_level_counts(p, draft, None)
    assert chisquare(first.numpy(), (p[0] * first.sum()).numpy()).pvalue > 1e-3
    assert second.sum() > 2000  # P(second | first == token 1) is node 0's distribution: row 1
    assert chisquare(second.numpy(), (p[1] * second.sum()).numpy()).pvalue > 1e-3
    lossy, _ = two_level_counts(p, draft, lossy_verify_tree)
    assert chisquare(lossy.numpy(), (p[0] * lossy.sum()).numpy()).pvalue < 1e-6
    assert torch.allclose(residual_distribution(p[0], torch.eye(V)[1]).sum(), torch.tensor(1.0))


def test_medusa_tree_shape_is_best_first_and_within_budget(target):
    drafter = MedusaDrafter(target, tiny_medusa_heads(target, num_heads=3), TreeShape(nodes=7, top_k=2))
    hidden = target.forward(PROMPT, new_cache()).hidden[-1]
    context = DraftContext(PROMPT, 3, SamplingConfig(), None, 0.0, hidden)
    draft = drafter.propose(None, context)
    q = drafter.head_probs(hidden, context)
    assert len(draft.tokens) == 7 and draft.parents[0] == -1 and draft.q_draft is None
    assert draft.tokens[0] == int(q[0].argmax())
    assert all(-1 <= par < i for i, par in enumerate(draft.parents))
    for node, kids in children(draft.parents).items():
        assert len({draft.tokens[k] for k in kids}) == len(kids) <= 2
    d = depths(draft.parents)
    score = []
    for i, par in enumerate(draft.parents):
        score.append((score[par] if par >= 0 else 1.0) * float(q[d[i] - 1, draft.tokens[i]]))
    assert score == sorted(score, reverse=True)  # best-first: nodes enter in order of branch probability
    budget = drafter.propose(None, DraftContext(PROMPT, 3, SamplingConfig(), None, 0.0, hidden, max_nodes=3))
    assert budget.tokens == draft.tokens[:3] and budget.parents == draft.parents[:3]  # best-first: a prefix
    chain = MedusaDrafter(target, tiny_medusa_heads(target, num_heads=3)).propose(None, context)
    assert chain.tokens == [int(row.argmax()) for row in q] and chain.parents is None


def test_heads_save_and_load_roundtrip(tmp_path, target):
    heads = tiny_medusa_heads(target, num_heads=2)
    heads.vocab_ids = torch.arange(0, target.vocab_size, 2)
    path = tmp_path / "heads.safetensors"
    heads.save(path, {"note": "test"})
    loaded = MedusaHeads.load(path)
    assert loaded.num_heads == 2 and torch.equal(loaded.vocab_ids, heads.vocab_ids)
    h = torch.randn(3, target.config.hidden_size)
    w = target.lm_head.weight.detach()[heads.vocab_ids]
    assert torch.allclose(loaded(h, w), heads.to(torch.bfloat16).float()(h, w), atol=1e-3)
    with pytest.raises(ValueError, match="hidden size"):
        MedusaDrafter(target, MedusaHeads(target.config.hidden_size + 1, 1))


def test_missing_or_mismatched_heads_give_clear_errors(tmp_path, target):
    from specdec_core.core.config import ConfigError, MedusaConfig
    from specdec_core.methods.medusa import medusa_drafter

    with pytest.raises(ConfigError, match=r"python -m specdec_core\.train\.medusa"):
        medusa_drafter(target, MedusaConfig(), tree=False)  # nothing ships for a tiny random model
    with pytest.raises(ConfigError, match="no Medusa heads"):
        medusa_drafter(target, MedusaConfig(heads=str(tmp_path / "nope.safetensors")), tree=True)
    wrong = tmp_path / "wrong.safetensors"
    MedusaHeads(target.config.hidden_size * 2, 1).save(wrong, {})
    with pytest.raises(ConfigError, match="hidden size"):
        medusa_drafter(target, MedusaConfig(heads=str(wrong)), tree=False)
    (tmp_path / "junk.safetensors").write_text("not a weights file")
    with pytest.raises(ConfigError, match="cannot use"):
        medusa_drafter(target, MedusaConfig(heads=str(tmp_path / "junk.safetensors")), tree=False)
