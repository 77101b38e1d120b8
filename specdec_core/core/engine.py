"""The round loop: propose -> verify all proposals in one target forward -> accept -> roll back KV -> tell the drafter.

`generate` yields one `Round` per loop; an empty draft makes a round one step of plain autoregressive decoding, so
the baseline and every drafter run through the same target, cache and sampling code.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from specdec_core.core.backend import Model
from specdec_core.core.config import ConfigError, GenerationConfig
from specdec_core.core.drafter import Draft, DraftContext, Drafter, NoDrafter
from specdec_core.core.features import Features
from specdec_core.core.kv import copy_cache, crop, keep, new_cache
from specdec_core.core.sampling import logits_to_probs
from specdec_core.core.schedule import Cost, DraftLengthSchedule
from specdec_core.core.run import REFERENCE
from specdec_core.core.trace import Round, TopK
from specdec_core.core.verify import Verdict, verify_greedy, verify_sampling, verify_tree

TOP_K_RECORDED = 8


def make_generator(seed: int, device: torch.device) -> torch.Generator:
    """The request's single source of randomness, seeded once."""
    return torch.Generator(device=device).manual_seed(seed)


def top_k(probs: torch.Tensor, k: int = TOP_K_RECORDED) -> TopK:
    values, ids = torch.topk(probs, min(k, probs.shape[-1]))
    return TopK(ids.tolist(), [round(v, 6) for v in values.tolist()])


class Clock:
    """Wall-clock seconds, waiting for queued CUDA work so a phase is charged for its own kernels."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()


@dataclass(frozen=True)
class Prefix:
    """A prompt pass done once: the target's cache over every prompt token but the last, and what it cost. Runs of
    the same prompt on the same target (a race's two lanes, Compare's six) each start from their own copy of it: the
    same cache, bit for bit, that their own prompt pass would have computed, so a shared pass changes no token."""

    target: Model  # the model that computed it
    tokens: tuple[int, ...]
    cache: object  # DynamicCache; copied by every run, never written to
    hidden: torch.Tensor  # the prompt's features (features.py): the target's hidden state after each cached token
    seconds: float  # the prompt pass's measured time: every run reports it as its own prompt pass


class SpeculativeEngine:
    def __init__(self, target: Model, drafter: Drafter | None = None, eos_token_ids: tuple[int, ...] = (),
                 cost: Cost | None = None, method: str = REFERENCE):
        self.target = target
        self.cost = cost  # this machine's costs, for a cost-aware draft length
        self.drafter = drafter or NoDrafter()
        if method == REFERENCE and not isinstance(self.drafter, NoDrafter):
            raise ValueError("name the method whose drafter this is (its accepted tokens carry that name)")
        self.method = method  # the registry's name: what this engine's accepted tokens are labelled in the trace
        self.eos = frozenset(eos_token_ids)
        self.clock = Clock(target.device)
        rows = getattr(target, "max_verify_tokens", None)  # None: any number of rows verifies exactly
        self.max_draft = rows - 1 if rows else 1 << 30

    def _max_draft(self, cached: int) -> int:
        """The most draft tokens a verify forward after `cached` tokens may carry: what the target verifies exactly
        there (a backend whose kernels change with the cache length says so through `verify_rows`)."""
        verify_rows = getattr(self.target, "verify_rows", None)
        rows = verify_rows(cached) if verify_rows is not None else None
        return self.max_draft if rows is None else min(self.max_draft, rows - 1)

    def prefill(self, prompt_ids: list[int]) -> Prefix:
        """The prompt pass alone, to share between runs of this prompt on this target (`generate(..., prefix=)`)."""
        self._check_prompt(prompt_ids)
        cache = new_cache(self.target)
        t0 = self.clock()
        hidden = self.target.prefill(list(prompt_ids[:-1]), cache) if len(prompt_ids) > 1 else None
        seconds = self.clock() - t0
        if hidden is None:
            hidden = torch.empty(0, self.target.hidden_size, dtype=self.target.dtype,
                                 device=self.target.device)
        return Prefix(self.target, tuple(prompt_ids[:-1]), cache, hidden, seconds)

    def _check_prompt(self, prompt_ids: list[int]) -> None:
        if not prompt_ids:
            raise ConfigError("the prompt is empty")
        if len(prompt_ids) >= self.target.max_positions:
            raise ConfigError(f"the prompt has {len(prompt_ids)} tokens; the model's limit is {self.target.max_positions}")

    def generate(self, prompt_ids: list[int], config: GenerationConfig, prefix: Prefix | None = None) -> Iterator[Round]:
        """Yield rounds until EOS, max_new_tokens or the context limit. Greedy output equals plain greedy decoding;
        sampled output is distributed exactly as sampling from the target. With a `prefix` (this engine's `prefill`
        of the same prompt, or another engine's on the same target) the run starts from a copy of its cache."""
        shared = prefix is not None
        if not shared:
            prefix = self.prefill(prompt_ids)
        elif prefix.target is not self.target or prefix.tokens != tuple(prompt_ids[:-1]):
            raise ValueError("this prefix was computed for another prompt or another target")
        generator = make_generator(config.seed, self.target.device)
        state = self.drafter.start()  # this request's drafter state (caches); the drafter itself is shared
        schedule = DraftLengthSchedule(config.draft, self.cost, len(prompt_ids), config.max_new_tokens)
        tokens = list(prompt_ids)
        cache = copy_cache(prefix.cache) if shared else prefix.cache  # every committed token but the last
        prefill = prefix.seconds
        features = Features(prefix.hidden)
        produced = 0
        index = 0
        while True:
            remaining = config.max_new_tokens - produced
            room = self.target.max_positions - len(tokens)
            # 1. Propose: at most what still fits (the target always adds one token of its own) and what the target
            #    verifies exactly in one forward (a backend whose larger batches change the numbers caps it).
            limit = max(0, min(schedule.length, remaining - 1, room - 1, self._max_draft(len(tokens) - 1)))
            t0 = self.clock()
            draft = self.drafter.propose(
                state, DraftContext(tokens, limit, config.sampling, generator, schedule.confidence_threshold,
                                    features.last(), schedule.node_budget(limit, room - 1), features)
            )
            t1 = self.clock()
            # 2. One target forward over the last committed token and every draft token (a tree: with a tree mask).
            out = self.target.forward([tokens[-1], *draft.tokens], cache, draft.parents)
            p_target = logits_to_probs(out.logits, config.sampling)
            # 3. Verify (greedy or exact speculative sampling; chain or tree), written once in verify.py.
            verdict = self._verify(draft, p_target, config, generator)
            t2 = self.clock()
            # 4. Commit accepted tokens + correction/bonus, cut at EOS and max_new_tokens; roll the cache back to match.
            new = [*(draft.tokens[i] for i in verdict.path), verdict.next_token][:remaining]
            finished = None
            for i, token in enumerate(new):
                if token in self.eos:
                    new, finished = new[: i + 1], "eos"
                    break
            committed = len(tokens)
            tokens.extend(new)
            produced += len(new)
            keep(cache, committed, [committed + i for i in verdict.path])
            crop(cache, len(tokens) - 1)
            features.extend(out.hidden[verdict.path_rows[: len(new)]])  # every committed token's but the last
            if finished is None and produced >= config.max_new_tokens:
                finished = "length"
            if finished is None and len(tokens) >= self.target.max_positions:
                finished = "context"
            # 5. Tell the length schedule how it went; record the round.
            schedule.update(draft.depth, verdict.num_accepted, len(tokens), config.max_new_tokens - produced)
            ties = self._near_ties(out.logits, verdict, len(new), config)
            yield self._round(index, limit, draft, p_target, verdict, new, t1 - t0, t2 - t1,
                              prefill if index == 0 else 0.0, finished, ties)
            index += 1
            if finished:
                return

    @staticmethod
    def _verify(draft: Draft, p_target: torch.Tensor, config: GenerationConfig, generator) -> Verdict:
        if draft.parents is not None:
            return verify_tree(draft.tokens, draft.parents, p_target, generator, config.sampling.greedy)
        if config.sampling.greedy:
            return verify_greedy(draft.tokens, p_target)
        return verify_sampling(draft.tokens, p_target, draft.q_draft, generator)

    def _near_ties(self, logits: torch.Tensor, verdict: Verdict, emitted: int, config: GenerationConfig) -> list[int]:
        """Greedy on a target that is not bit-exact (rounding > 0): emitted tokens whose two best logits lay within
        2 x the measured rounding (each can move by it), i.e. choices another forward shape could flip."""
        margin = self.target.rounding or 0.0
        if margin == 0.0 or not config.sampling.greedy:
            return []
        top2 = torch.topk(logits[verdict.path_rows[:emitted]].float(), 2, dim=-1).values
        return [i for i, gap in enumerate((top2[:, 0] - top2[:, 1]).tolist()) if gap <= 2 * margin]

    def _round(self, index, limit, draft, p_target, verdict, new, draft_s, verify_s, prefill_s, finished,
               near_ties) -> Round:
        n, k = verdict.num_accepted, len(draft.tokens)
        kind = "plain" if k == 0 else "bonus" if verdict.is_bonus else "correction"  # the target's own token
        sources = ([self.method] * n + [kind])[: len(new)]
        q = draft.q_draft
        rows = draft.target_rows()
        path_rows = verdict.path_rows
        next_dist = verdict.residual if verdict.residual is not None else p_target[path_rows[-1]]
        judged = {node: j for j, node in enumerate(verdict.tested)}
        on_path = set(verdict.path)
        skipped = "off-branch" if draft.parents is not None else "unexamined"
        return Round(
            index=index,
            num_draft_requested=limit,
            drafted=list(draft.tokens),
            q_draft=[float(q[i, x]) if q is not None else None for i, x in enumerate(draft.tokens)],
            p_target=[float(p_target[r, x]) for r, x in zip(rows, draft.tokens)],
            uniforms=list(verdict.uniforms),
            num_accepted=n,
            next_token=verdict.next_token,
            next_p=float(next_dist[verdict.next_token]),
            emitted=new,
            sources=sources,
            draft_seconds=draft_s,
            verify_seconds=verify_s,
            prefill_seconds=prefill_s,
            target_top=[top_k(p_target[r]) for r in path_rows],
            draft_top=[top_k(q[i]) for i in range(k)] if q is not None else [],
            residual_top=top_k(verdict.residual) if verdict.residual is not None else None,
            finished=finished,
            parents=list(draft.parents) if draft.parents is not None else None,
            accepted_path=list(verdict.path),
            outcomes=["accepted" if i in on_path else "rejected" if i in judged else skipped for i in range(k)],
            judged_p=[verdict.tested_p[judged[i]] if i in judged else None for i in range(k)],
            node_uniforms=[verdict.uniforms[judged[i]] if i in judged and judged[i] < len(verdict.uniforms) else None
                           for i in range(k)],
            next_kind=kind,
            residual_drawn=verdict.residual is not None,
            near_ties=near_ties,
        )
