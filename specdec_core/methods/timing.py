"""What a method costs on this machine: a timer per drafter (ms per drafted token, as the engine calls it), the
profile measured with every registered method's timer, and the engine's `Cost` for a method from that profile."""
from __future__ import annotations

import copy

import torch

from specdec_core.backends import profile as machine
from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.profile import Profile, best_ms
from specdec_core.core.config import SamplingConfig
from specdec_core.core.drafter import DraftContext
from specdec_core.core.features import Features
from specdec_core.core.kv import new_cache
from specdec_core.core.schedule import Cost
from specdec_core.methods.recommend import prior
from specdec_core.methods.registry import REGISTRY, MethodOptions, buildable


def timing_context(target: LanguageModel, prompt: list[int], gamma: int, hidden: torch.Tensor | None = None):
    """The engine's context right after a prompt pass (greedy): the target's features of every prompt token but the
    last (Medusa heads read the last row; an EAGLE head reads them all); a chain of `gamma`, a tree of `gamma` nodes.
    `hidden`: those features when already computed."""
    if hidden is None:  # a backend without hidden states (hidden_size 0) has no features to give
        hidden = (target.forward(prompt[:-1], new_cache(target)).hidden if target.hidden_size
                  else torch.empty(len(prompt) - 1, 0))
    features = Features(hidden)
    gen = torch.Generator(device=target.device).manual_seed(0)
    return DraftContext(prompt, gamma, SamplingConfig(), gen, 0.0, features.last(), gamma, features)  # a tree: γ nodes


CATCH_UP_BEHIND = 96  # tokens a catch-up is timed over (of the profile's 120-token prompt)


def drafter_timer(drafter, target: LanguageModel, gamma: int = 5, behind: int = 2):
    """A timer of one drafter: ms per drafted token of one round, as the engine calls it: its state synced up to
    `behind` tokens before the end of the prompt (last round's commits), then one proposal of `gamma` tokens that
    catches up and drafts. Best of 3 on fresh copies of the synced state, after one untimed round."""

    def timer(prompt: list[int]) -> float:
        context = timing_context(target, prompt, gamma)
        hidden = context.features.since(0)  # one prompt pass: the earlier round's features are a prefix of these
        synced = drafter.start()
        drafter.propose(synced, timing_context(target, prompt[:-behind], gamma, hidden[:-behind]))
        states = [copy.deepcopy(synced) for _ in range(4)]
        drafter.propose(states.pop(), context)
        return best_ms(lambda: drafter.propose(states.pop(), context), 3) / gamma

    return timer


def catch_up_timer(drafter, target: LanguageModel, behind: int = CATCH_UP_BEHIND):
    """A timer of a drafter with its own cache: ms per token it forwards to catch up, from a one-token round `behind`
    tokens behind the prompt's end against one 2 tokens behind (each timed as `drafter_timer` times a round)."""
    far, near = drafter_timer(drafter, target, 1, behind), drafter_timer(drafter, target, 1, 2)

    def timer(prompt: list[int]) -> float:
        return max(0.0, (far(prompt) - near(prompt)) / (behind - 2))

    return timer


def drafter_timers(target: LanguageModel, draft: LanguageModel | None,
                   options: MethodOptions | None = None) -> machine.Timers:
    """A step timer per method whose drafter can be built here (no draft model, no Medusa heads: left out), and a
    catch-up timer for each whose drafter keeps its own cache."""
    drafters, _ = buildable(target, draft, options or MethodOptions())
    return machine.Timers({method: drafter_timer(drafter, target) for method, drafter in drafters.items()},
                          {method: catch_up_timer(drafter, target) for method, drafter in drafters.items()
                           if REGISTRY[method].catches_up})


def profile(target: LanguageModel, draft: LanguageModel, options: MethodOptions | None = None, progress: bool = True,
            say=print, refresh: bool = False) -> Profile:
    """This machine's profile for the target, the draft and every registered method's drafter (cached; measured when
    missing)."""
    return machine.get(target, lambda: drafter_timers(target, draft, options), draft.representation, sorted(REGISTRY),
                       progress=progress, say=say, refresh=refresh)


def cost(profile: Profile | None, method: str, kind: str | None = None) -> Cost | None:
    """The engine's Cost for a method from a profile (None without one, or for a method it did not time); with the
    prompt's kind ("code" or "prose"), the acceptance the bench measured for this method on such prompts as the
    cost-aware length's prior."""
    if profile is None or method not in profile.draft_ms:
        return None
    return Cost(profile.T, profile.draft_ms[method], prior(method, kind) if kind is not None else (),
                profile.T if profile.long_context_ms else None, REGISTRY[method].catches_up,
                profile.catch_up_ms.get(method, 0.0))
