"""Exactness lab: run the verifier many times for one next token and compare what comes out with the target's p.

It calls the same `verify_sampling` the engine uses, on a real context (target p and draft q at the prompt's last
position, warped identically) or on a toy p/q."""
from __future__ import annotations


import torch
from scipy.stats import chisquare

from specdec_core.core.config import SamplingConfig
from specdec_core.core.kv import crop, new_cache
from specdec_core.core.sampling import logits_to_probs
from specdec_core.core.trace import TopK
from specdec_core.core.verify import verify_sampling

from . import figures

MAX_TRIALS = 50_000


def toy_distributions(seed: int, vocab: int = 8) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    gen = torch.Generator().manual_seed(seed)
    p = torch.rand(vocab, generator=gen) ** 2
    q = torch.rand(vocab, generator=gen) ** 2
    return p / p.sum(), q / q.sum(), [f"token {chr(65 + i)}" for i in range(vocab)]


def real_distributions(models, prompt_ids: list[int], sampling: SamplingConfig):
    """Target p and draft q for the token after `prompt_ids`, restricted to their joint support (exact: tokens with
    zero probability under both are never drawn)."""
    p = logits_to_probs(models.target.forward(prompt_ids, new_cache()).logits[-1], sampling)
    q = logits_to_probs(models.draft.forward(prompt_ids, new_cache()).logits[-1], sampling)[: p.shape[-1]]
    support = torch.nonzero((p > 0) | (q > 0)).flatten()
    support = support[torch.argsort(p[support], descending=True)]
    names = [models.tokenizer.decode([int(t)]) for t in support]
    return p[support] / p[support].sum(), q[support] / q[support].sum(), names


def same_p_bits(models, prompt_ids: list[int], sampling: SamplingConfig) -> bool:
    """Does the target's p for the next token come out bitwise the same in a 6-token verify forward as in plain
    decoding's 1-token forward? (True with the bit-exact target; the lab says so beside its histogram.)"""
    if len(prompt_ids) < 2:
        return True
    cache = new_cache()
    models.target.prefill(prompt_ids[:-1], cache)
    plain = models.target.forward(prompt_ids[-1:], cache).logits[0]
    crop(cache, len(prompt_ids) - 1)
    guesses = prompt_ids[-5:] if len(prompt_ids) >= 5 else (prompt_ids * 5)[:5]  # any 5 drafted tokens
    verify = models.target.forward(prompt_ids[-1:] + guesses, cache).logits[0]
    return torch.equal(logits_to_probs(plain, sampling), logits_to_probs(verify, sampling))


def simulate(p: torch.Tensor, q: torch.Tensor, trials: int, seed: int) -> torch.Tensor:
    """Counts of the first emitted token over `trials` rounds: x ~ q, then verify against p."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros_like(p)
    pp, qq = torch.stack([p, p]), q.unsqueeze(0)
    xs = torch.multinomial(q, trials, replacement=True, generator=gen).tolist()
    for x in xs:
        v = verify_sampling([x], pp, qq, gen)
        counts[x if v.num_accepted == 1 else v.next_token] += 1
    return counts


def chi_square(counts: torch.Tensor, p: torch.Tensor) -> tuple[float, int, float]:
    """Pearson chi-square of counts against p, pooling cells with expected count < 5. (statistic, dof, p-value)
    A token drawn that p gives probability zero is an outright failure (p-value 0)."""
    if float(counts[p == 0].sum()) > 0:
        return float("inf"), 0, 0.0
    counts, p = counts[p > 0], p[p > 0]
    n = float(counts.sum())
    expected = p * n
    big = expected >= 5
    obs = counts[big].tolist() + ([float(counts[~big].sum())] if (~big).any() else [])
    exp = expected[big].tolist() + ([float(expected[~big].sum())] if (~big).any() else [])
    if len(obs) < 2:
        return 0.0, 0, 1.0
    scale = sum(obs) / sum(exp)
    result = chisquare(obs, [e * scale for e in exp])
    return float(result.statistic), len(obs) - 1, float(result.pvalue)


def lab_view(p: torch.Tensor, q: torch.Tensor, names: list[str], counts: torch.Tensor):
    n = int(counts.sum())
    empirical = counts / max(n, 1)
    ids = list(range(len(p)))
    label = lambda i: names[i]  # noqa: E731
    fig = figures.distribution_figure(
        f"{n:,} speculative-sampling rounds: what came out vs the target's p",
        [("target p", TopK(ids, p.tolist()), figures.COLORS["p"]),
         ("speculative output (empirical)", TopK(ids, empirical.tolist()), figures.COLORS["empirical"]),
         ("draft q (what 'always accept' would give)", TopK(ids, q.tolist()), figures.COLORS["q"])],
        label)
    stat, dof, pvalue = chi_square(counts, p)
    tv = 0.5 * float((empirical - p).abs().sum())
    tv_q = 0.5 * float((q - p).abs().sum())
    verdict = "consistent with p" if pvalue > 0.001 else "NOT consistent with p"
    text = (f"<p><b>χ² = {stat:.1f}</b> with {dof} degrees of freedom, <b>p-value {pvalue:.3f}</b>: the output is "
            f"{verdict}. Total-variation distance to p: {tv:.4f} (sampling noise, shrinks like 1/√N); the draft's q "
            f"alone is {tv_q:.3f} away. Accepting x with probability min(1, p(x)/q(x)) and otherwise resampling from "
            f"normalise(max(0, p − q)) gives back p exactly.</p>")
    return text, fig
