"""Verification, written once and pure (no model calls): greedy and exact speculative sampling.

Names follow the papers (Leviathan et al. 2023, Chen et al. 2023): `p_target` is the target's distribution, `q_draft`
the drafter's. Row i of `p_target` is the target's distribution for the position of draft token i; the extra last
row is for the bonus token after a fully accepted draft.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec_core.core.sampling import sample, uniform
from specdec_core.core.tree import children


@dataclass(frozen=True)
class Verdict:
    num_accepted: int  # leading draft tokens kept
    next_token: int  # the target's correction (after a rejection) or bonus (after full acceptance)
    is_bonus: bool  # True when every draft token was accepted (or the draft was empty)
    uniforms: tuple[float, ...]  # u drawn per examined position (sampling only), u < p/q means accept
    residual: torch.Tensor | None  # normalise(max(0, p - q)) at the rejected position (sampling only)
    path: tuple[int, ...] = ()  # accepted draft nodes in order (a chain: 0..num_accepted-1; a tree: one branch)
    tested: tuple[int, ...] = ()  # draft nodes the target judged, in order (sampling: aligned with `uniforms`)
    tested_p: tuple[float, ...] = ()  # the probability each was judged with: p(x), or a tree's remaining r(x)

    @property
    def path_rows(self) -> list[int]:
        """Rows of the verify forward along the accepted branch: row i decided emitted token i (a chain: 0..n)."""
        return [0] + [i + 1 for i in self.path]

    @staticmethod
    def chain(n: int, next_token: int, is_bonus: bool, uniforms=(), residual=None, tested_p=()) -> "Verdict":
        return Verdict(n, next_token, is_bonus, tuple(uniforms), residual, tuple(range(n)),
                       tuple(range(len(tested_p))), tuple(tested_p))


def verify_greedy(draft_tokens: list[int], p_target: torch.Tensor) -> Verdict:
    """Accept the longest prefix that matches the target's argmax, then append the target's own argmax."""
    choices = torch.argmax(p_target, dim=-1).tolist()
    n = 0
    while n < len(draft_tokens) and draft_tokens[n] == choices[n]:
        n += 1
    judged = [float(p_target[i, x]) for i, x in enumerate(draft_tokens[: n + 1])]  # the accepted and the rejected
    return Verdict.chain(n, choices[n], n == len(draft_tokens), tested_p=judged)


def one_hot_rows(tokens: list[int], vocab_size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """q for a deterministic proposal (prompt lookup): all mass on the proposed token."""
    q = torch.zeros(len(tokens), vocab_size, device=device)
    if tokens:
        q[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
    return q


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalise(max(0, p - q)); if that is empty (p <= q everywhere, only reachable by rounding) fall back to p."""
    r = torch.clamp(p - q, min=0.0)
    total = r.sum()
    return r / total if float(total) > 0 else p


def verify_sampling(
    draft_tokens: list[int],
    p_target: torch.Tensor,
    q_draft: torch.Tensor | None,
    generator: torch.Generator | None,
) -> Verdict:
    """Exact speculative sampling: the output is distributed as sampling from p_target alone.

    Accept x_i with probability min(1, p(x_i) / q(x_i)); on the first rejection sample from normalise(max(0, p - q));
    after a fully accepted draft sample the bonus from the last row of p_target. q_draft None means one-hot q.
    """
    k = len(draft_tokens)
    if q_draft is None:
        q_draft = one_hot_rows(draft_tokens, p_target.shape[-1], p_target.device)
    us: list[float] = []
    judged: list[float] = []
    for i, x in enumerate(draft_tokens):
        p_x, q_x = float(p_target[i, x]), float(q_draft[i, x])
        u = uniform(generator)
        us.append(u)
        judged.append(p_x)
        if u * q_x < p_x:  # u < p/q, written without dividing by q
            continue
        residual = residual_distribution(p_target[i], q_draft[i])
        return Verdict.chain(i, sample(residual, generator), False, us, residual, judged)
    return Verdict.chain(k, sample(p_target[k], generator), True, us, tested_p=judged)


def verify_tree(
    draft_tokens: list[int],
    parents: list[int],
    p_target: torch.Tensor,
    generator: torch.Generator | None,
    greedy: bool,
) -> Verdict:
    """Accept the longest branch of a token tree the target agrees with. Row 0 of `p_target` is the root's (the last
    committed token's) distribution, row i+1 node i's.

    Greedy: follow the child equal to the target's argmax. Sampling: candidates are deterministic (one-hot q), so at
    each node try the children in order, accepting candidate x with probability r(x), where r is the target's
    distribution with the siblings rejected so far removed and renormalised (recursive rejection sampling, as in
    SpecInfer); if none is accepted, sample the correction from r. Either way the token taken at every node is
    distributed exactly as p, so the output is too.
    """
    kids = children(parents)
    node, path, us, tested, judged = -1, [], [], [], []
    while True:
        p = p_target[node + 1]
        if greedy:
            choice = int(torch.argmax(p))
            nxt = next((c for c in kids[node] if draft_tokens[c] == choice), None)
            seen = kids[node] if nxt is None else kids[node][: kids[node].index(nxt) + 1]  # compared, in order
            tested += seen
            judged += [float(p[draft_tokens[c]]) for c in seen]
            if nxt is None:
                return Verdict(len(path), choice, not kids[node], (), None, tuple(path), tuple(tested), tuple(judged))
        else:
            r, nxt = p, None
            for c in kids[node]:
                u = uniform(generator)
                us.append(u)
                tested.append(c)
                judged.append(float(r[draft_tokens[c]]))
                if u < judged[-1]:
                    nxt = c
                    break
                r = residual_distribution(r, one_hot_rows([draft_tokens[c]], r.shape[-1], r.device)[0])
            if nxt is None:
                tried = bool(kids[node])
                return Verdict(len(path), sample(r, generator), not tried, tuple(us), r if tried else None, tuple(path),
                               tuple(tested), tuple(judged))
        path.append(nxt)
        node = nxt
