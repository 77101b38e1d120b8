"""Prompt lookup known answers."""
from __future__ import annotations

import torch

from specdec_core.core.config import LookupConfig, SamplingConfig
from specdec_core.core.drafter import DraftContext
from specdec_core.methods.lookup import LookupDrafter
from specdec_core.methods.lookup import find_continuation


def test_longest_ngram_wins_and_earliest_match_first():
    #        0  1  2  3  4  5  6  7  8  9 10
    tokens = [1, 2, 3, 9, 1, 2, 4, 8, 5, 1, 2]
    # suffix [5, 1, 2] never appeared earlier; [1, 2]: earliest match at 0 -> continues [3, 9, 1]
    assert find_continuation(tokens, 3, 1, 3) == [3, 9, 1]
    # with n=1 the earliest '2' is at 1 -> [3, 9]
    assert find_continuation(tokens, 1, 1, 2) == [3, 9]
    # a longer n-gram beats an earlier shorter one: suffix [4, 8, 5] vs [8, 5]
    assert find_continuation([8, 5, 0, 4, 8, 5, 6, 7, 4, 8, 5], 3, 1, 2) == [6, 7]


def test_no_match_gives_empty_draft_and_draft_is_capped():
    assert find_continuation([1, 2, 3, 4], 3, 1, 5) == []
    assert find_continuation([7, 7, 7, 7, 7], 2, 2, 2) == [7, 7]
    assert find_continuation([1, 2, 1], 2, 1, 10) == [2, 1]
    assert find_continuation([1, 2, 1], 2, 1, 0) == []
    assert find_continuation([1, 2, 1, 2], 3, 2, 10) == [1, 2]  # n=3 fails, n=2 finds [1, 2] at 0


def test_min_ngram_size_is_respected():
    assert find_continuation([5, 6, 9, 6], 3, 2, 4) == []  # only a unigram match exists


def test_drafter_follows_protocol():
    drafter = LookupDrafter(LookupConfig(max_ngram_size=2))
    draft = drafter.propose(None, DraftContext([3, 4, 5, 6, 3, 4], 3, SamplingConfig(), torch.Generator()))
    assert draft.tokens == [5, 6, 3] and draft.q_draft is None
