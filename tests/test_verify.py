"""Verification on synthetic distributions: no model needed."""
from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from specdec_core.core.verify import residual_distribution, verify_greedy, verify_sampling

V = 6


def random_dist(gen: torch.Generator, sparse: bool = False) -> torch.Tensor:
    w = torch.rand(V, generator=gen) ** 3
    if sparse:
        w[torch.rand(V, generator=gen) < 0.4] = 0.0
        w[0] += 0.05
    return w / w.sum()


def test_greedy_accepts_longest_matching_prefix_then_target_token():
    p = torch.eye(V)[[2, 4, 1, 5]]  # target argmax per position: 2, 4, 1, then bonus 5
    assert verify_greedy([2, 4, 1], p).num_accepted == 3 and verify_greedy([2, 4, 1], p).next_token == 5
    v = verify_greedy([2, 3, 1], p)
    assert (v.num_accepted, v.next_token, v.is_bonus) == (1, 4, False)
    v = verify_greedy([0, 4, 1], p)
    assert (v.num_accepted, v.next_token) == (0, 2)
    v = verify_greedy([], p[:1])
    assert (v.num_accepted, v.next_token, v.is_bonus) == (0, 2, True)


def test_residual_is_normalised_positive_part():
    p = torch.tensor([0.5, 0.3, 0.2, 0, 0, 0])
    q = torch.tensor([0.2, 0.5, 0.3, 0, 0, 0])
    assert torch.allclose(residual_distribution(p, q), torch.tensor([1.0, 0, 0, 0, 0, 0]))
    assert torch.allclose(residual_distribution(p, p), p)  # empty residual falls back to p


def empirical_first_token(p: torch.Tensor, q: torch.Tensor | None, n: int, seed: int, verifier=verify_sampling):
    """Draw x ~ q (or the fixed lookup token), verify, record the first emitted token."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(V)
    for _ in range(n):
        x = int(torch.multinomial(q, 1, generator=gen)) if q is not None else 3
        v = verifier([x], torch.stack([p, p]), q.unsqueeze(0) if q is not None else None, gen)
        counts[x if v.num_accepted == 1 else v.next_token] += 1
    return counts


def chi_square_pvalue(counts: torch.Tensor, p: torch.Tensor) -> float:
    support = p > 0
    assert counts[~support].sum() == 0, "sampled a token the target gives zero probability"
    n = counts.sum()
    return chisquare(counts[support].numpy(), (p[support] * n).numpy()).pvalue


@pytest.mark.parametrize("case", range(6))
def test_speculative_sampling_preserves_target_distribution(case):
    gen = torch.Generator().manual_seed(1000 + case)
    p, q = random_dist(gen, sparse=case % 2 == 1), random_dist(gen, sparse=case % 3 == 2)
    if case == 5:
        q = None  # deterministic proposal (prompt lookup): q is one-hot
    counts = empirical_first_token(p, q, 20_000, seed=case)
    assert chi_square_pvalue(counts, p) > 1e-3


def test_chi_square_detects_a_lossy_verifier():
    """The statistical test has power: 'always accept the draft' yields q, not p, and must be rejected."""
    gen = torch.Generator().manual_seed(7)
    p, q = random_dist(gen), random_dist(gen)

    def accept_all(tokens, p_target, q_draft, generator):
        return verify_sampling(tokens, p_target, torch.zeros(len(tokens), V), generator)  # q = 0: u * q < p always

    counts = empirical_first_token(p, q, 20_000, seed=1, verifier=accept_all)
    assert chi_square_pvalue(counts, p) < 1e-6


def test_two_token_draft_joint_distribution():
    """Joint law of the first two emitted tokens equals p1 x p2 (the target decoding twice, contexts fixed)."""
    gen = torch.Generator().manual_seed(99)
    p1, p2, p3 = random_dist(gen), random_dist(gen), random_dist(gen)
    q1, q2 = random_dist(gen), random_dist(gen)
    counts = torch.zeros(V, V)
    draws = torch.Generator().manual_seed(5)
    n = 40_000
    for _ in range(n):
        x1 = int(torch.multinomial(q1, 1, generator=draws))
        x2 = int(torch.multinomial(q2, 1, generator=draws))
        v = verify_sampling([x1, x2], torch.stack([p1, p2, p3]), torch.stack([q1, q2]), draws)
        if v.num_accepted == 0:
            first, second = v.next_token, int(torch.multinomial(p2, 1, generator=draws))  # next round from p2
        elif v.num_accepted == 1:
            first, second = x1, v.next_token
        else:
            first, second = x1, x2
        counts[first, second] += 1
    expected = torch.outer(p1, p2)
    assert chi_square_pvalue(counts.flatten(), expected.flatten()) > 1e-3


def test_tree_siblings_are_judged_against_what_remains_of_p():
    """Root with two candidates: the first refused (u >= p), the second judged against r = p without the first,
    renormalised: the trace must carry r(x), not the raw p(x)."""
    from specdec_core.core.verify import verify_tree

    p = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.25] * 4, [0.25] * 4])
    for seed in range(200):
        g = torch.Generator().manual_seed(seed)
        v = verify_tree([0, 1], [-1, -1], p, g, greedy=False)
        if v.tested[:1] == (0,) and len(v.tested) > 1:
            assert v.tested == (0, 1) and v.tested_p[0] == pytest.approx(0.5)
            assert v.tested_p[1] == pytest.approx(0.3 / 0.5)  # p(1) / (1 - p(0))
            assert v.uniforms[0] >= 0.5
            return
    raise AssertionError("no seed refused the first candidate")


def test_greedy_verdict_names_the_judged_tokens():
    p = torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.5, 0.5]])
    v = verify_greedy([1, 1], p)
    assert v.num_accepted == 1 and v.tested == (0, 1) and v.tested_p == pytest.approx((0.9, 0.2))
