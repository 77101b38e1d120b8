"""Draft length per round: fixed; adaptive (+2 after a fully accepted draft, -1 otherwise, HF's heuristic); or
cost-aware: the length that maximises expected tokens per second from this machine's measured costs and the running
per-position acceptance (as SGLang's adaptive speculation and EAGLE's cost model do)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specdec_core.core.config import DraftConfig
from specdec_core.core.metrics import expected_tokens_from_positions
from specdec_core.settings import MAX_TREE_NODES

PRIOR_TRIED = 4.0  # before any round, the prior counts as this many rounds' worth of evidence per position
PRIOR_RATE = 0.7  # per-position acceptance assumed without a measured prior (Cost.prior)
FREE_ROW = 0.02  # a tree's extra node rides along where one more verified row costs under 2% of a plain step
PROBE_EVERY = 8  # this often, draft one token more than is predicted to pay (one where none would), to keep measuring
# (unless no acceptance at all could pay here: `could_pay`)
PROBE_BEHIND = 32  # ... and never when a drafter with its own cache would first catch up over more tokens than this


def perfect_draft_speedup(cost: "Cost", max_tokens: int, context: int | None = None) -> tuple[float, int]:
    """(the best decode speedup a draft that is always right could reach here, at which length): the ceiling no
    acceptance can beat: n + 1 tokens for n drafting steps and one (n + 1)-token forward, against T(1) per token."""
    T, d = (lambda n: cost.T(n, context)), cost.draft_ms
    rates = {n: (n + 1) / (n * d + T(n + 1)) * T(1) for n in range(1, max_tokens + 1)}
    n = max(rates, key=rates.get)
    return rates[n], n


@dataclass(frozen=True)
class Cost:
    """What a round costs here: target_ms(n) for a forward of n tokens, draft_ms per drafted token; and `prior`, the
    per-position acceptance this method had on this kind of prompt in bench runs (assets/acceptance_priors.json), the
    schedule's guess before its own rounds have measured any (empty: PRIOR_RATE everywhere)."""

    target_ms: Callable[[int], float]
    draft_ms: float
    prior: tuple[float, ...] = ()
    at_context: Callable[[int, int], float] | None = None  # T(n) after `context` cached tokens, where measured
    catches_up: bool = False  # the drafter keeps its own cache and first forwards every token since its last draft
    catch_up_ms: float = 0.0  # ... at this many ms per token (measured by the profile; 0: not measured)

    def T(self, n: int, context: int | None = None) -> float:
        """A forward of n tokens, ms: after `context` cached tokens where the profile measured how T grows with it
        (a verify row's attention reads the whole cache), else as measured after the profile's short prompt."""
        if context is None or self.at_context is None:
            return self.target_ms(n)
        return self.at_context(n, context)

    def prior_rate(self, position: int) -> float:
        if not self.prior:
            return PRIOR_RATE
        return self.prior[min(position, len(self.prior) - 1)]  # past what was measured: the deepest measured rate


class DraftLengthSchedule:
    def __init__(self, config: DraftConfig, cost: Cost | None = None, context: int | None = None,
                 remaining: int | None = None):
        self.config = config
        self.context = context  # tokens in the cache now: the costs are read at this length
        self.remaining = remaining  # tokens still to generate at most (None: unknown): what a catch-up must repay
        self.cost = cost if config.cost_aware else None
        self.tried = [PRIOR_TRIED] * config.max_adaptive_tokens
        self.accepted = [PRIOR_TRIED * (self.cost.prior_rate(i) if self.cost else PRIOR_RATE)
                         for i in range(config.max_adaptive_tokens)]
        self.rounds = 0
        self.synced = 0  # the context at the drafter's last draft: a drafter with its own cache is behind from there
        self._payable: bool | None = None  # could_pay(), computed once
        self.length = self._best() if self.cost else config.num_draft_tokens

    @property
    def confidence_threshold(self) -> float:
        return self.config.confidence_threshold if self.config.adaptive else 0.0

    def expected_rate(self, length: int) -> float:
        """Predicted tokens per ms when drafting `length` tokens per round."""
        rates = [a / t for a, t in zip(self.accepted, self.tried)]
        expected = expected_tokens_from_positions(rates, length)
        return expected / (length * self.cost.draft_ms + self.cost.T(length + 1, self.context))

    def node_budget(self, depth: int, most: int) -> int | None:
        """A tree's node budget for a round drafted `depth` deep (at most `most`): `depth` nodes, and more while each
        extra row of the verify forward costs under FREE_ROW of a plain step. Where T(n) is flat (AMX, a GPU) a tree
        fills the rows that cost next to nothing; where it grows with n (AVX2) it gets `depth` nodes; at a step in T
        (the exact target's row blocks of 16) it stops. None when not cost-aware (the tree's own size)."""
        if self.cost is None:
            return None
        if depth == 0:
            return 0
        nodes, T = depth, (lambda n: self.cost.T(n, self.context))
        free = FREE_ROW * T(1)
        while nodes < min(most, MAX_TREE_NODES) and T(nodes + 2) - T(nodes + 1) <= free:
            nodes += 1
        return nodes

    def could_pay(self) -> bool:
        """Would a draft that is always right beat plain decoding at some length? Where it would not (a second
        verified row costs a whole step, as on llama.cpp on 2 cores), no acceptance can pay, and a probe is pure
        loss: a drafter with its own cache (a draft model) first catches up over every token since its last draft."""
        if self._payable is None:
            self._payable = perfect_draft_speedup(self.cost, self.config.max_adaptive_tokens, self.context)[0] > 1.0
        return self._payable

    @property
    def behind(self) -> int:
        """Tokens since the drafter's last draft: what a drafter with its own cache forwards before it drafts again."""
        return (self.context or 0) - self.synced

    def _probe_is_cheap(self) -> bool:
        """A probe costs one drafted token, unless the drafter keeps its own cache and is far behind: then it first
        forwards every token since its last draft (a long prompt's every token, before its first draft; layer skip
        ran 0.29x in decode on a 1 335-token prompt, drafting 8 probe tokens)."""
        return not self.cost.catches_up or self.behind <= PROBE_BEHIND

    def _catch_up_repaid(self, length: int) -> bool:
        """Would drafting `length` tokens a round from now on save more time over the tokens still to generate than
        the drafter's catch-up costs first? (A draft model behind a 1 335-token prompt spent 3.9 s catching up to save
        about 3.1 s over a 64-token answer: 0.91x in decode.) True where there is nothing to catch up or no measure."""
        if not self.cost.catch_up_ms or self.remaining is None or self._probe_is_cheap():
            return True
        saved = self.remaining * (self.cost.T(1, self.context) - 1.0 / self.expected_rate(length))
        return saved > self.behind * self.cost.catch_up_ms

    def _best(self) -> int:
        best = max(range(self.config.max_adaptive_tokens + 1), key=self.expected_rate)
        if best and not self._catch_up_repaid(best):
            return 0
        if self.rounds % PROBE_EVERY or not self.could_pay() or not self._probe_is_cheap():
            return best
        return min(best + 1, self.config.max_adaptive_tokens)  # a probe: one position further than pays, to measure it

    def update(self, num_drafted: int, num_accepted: int, context: int | None = None,
               remaining: int | None = None) -> None:
        self.rounds += 1
        if context is not None:
            self.context = context
        if remaining is not None:
            self.remaining = remaining
        if num_drafted:
            self.synced = self.context or 0
        if self.cost is not None:
            for i in range(min(num_drafted, num_accepted + 1)):  # positions examined this round
                self.tried[i] += 1
                self.accepted[i] += i < num_accepted
            self.length = self._best()
            return
        if not self.config.adaptive or num_drafted == 0:
            return
        if num_accepted == num_drafted:
            self.length = min(self.length + 2, self.config.max_adaptive_tokens)
        else:
            self.length = max(self.length - 1, 1)
