"""The trace: one dataclass per round. The engine yields these; metrics, the CLI, the benchmark and the UI only
read them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from specdec_core.core.tree import depths

# Where an emitted token came from (Round.sources): an accepted draft token carries its method's name (the registry's);
# the target's own token is one of TARGET_KINDS (Round.next_kind): a correction after a rejection, a bonus after a fully
# accepted draft, or a plain step (nothing drafted).
TARGET_KINDS = ("correction", "bonus", "plain")
# A drafted node's fate: kept; judged and refused; never judged because an earlier chain token was refused; a tree
# node never judged because its parent was not accepted (or an earlier sibling was).
OUTCOMES = ("accepted", "rejected", "unexamined", "off-branch")


@dataclass(frozen=True)
class TopK:
    """A distribution's most likely tokens, for display (step-through, hover)."""

    token_ids: list[int]
    probs: list[float]


@dataclass(frozen=True)
class Round:
    index: int
    num_draft_requested: int  # draft length the engine asked for this round
    drafted: list[int]  # proposed token ids
    q_draft: list[float | None]  # q(x_i) of each proposed token (None: deterministic proposal)
    p_target: list[float]  # p(x_i) the target gave each proposed token
    uniforms: list[float]  # u drawn per examined position (sampling); accept iff u < p/q
    num_accepted: int
    next_token: int  # correction or bonus
    next_p: float  # p of the correction/bonus under the distribution it was drawn from
    emitted: list[int]  # tokens committed this round (accepted + next, cut at EOS / max-new-tokens)
    sources: list[str]  # per emitted token: the method's name (accepted) or one of TARGET_KINDS
    draft_seconds: float
    verify_seconds: float
    prefill_seconds: float = 0.0  # nonzero in the first round only: the prompt pass before it
    target_top: list[TopK] = field(default_factory=list)  # per verified position (len(drafted) + 1 at most)
    draft_top: list[TopK] = field(default_factory=list)  # per proposed position (empty without q)
    residual_top: TopK | None = None  # normalise(max(0, p - q)) at the rejected position (sampling)
    finished: str | None = None  # "eos", "length", "context" on the last round
    parents: list[int] | None = None  # the draft was a token tree (see tree.py); None = a chain
    accepted_path: list[int] = field(default_factory=list)  # accepted draft nodes (a chain: 0..num_accepted-1)
    # What the verifier did with each drafted node, recorded so that no front end re-derives it:
    outcomes: list[str] = field(default_factory=list)  # per node: OUTCOMES
    judged_p: list[float | None] = field(default_factory=list)  # per node: the p it was judged with (a tree's
    #   siblings: the remaining r after earlier siblings were refused); None when not judged
    node_uniforms: list[float | None] = field(default_factory=list)  # per node: the u drawn for it (sampling)
    next_kind: str = "plain"  # the target's own token: one of TARGET_KINDS
    residual_drawn: bool = False  # the correction was sampled from normalise(max(0, p - q)) (or a tree's residual)
    near_ties: list[int] = field(default_factory=list)  # greedy, target not bit-exact: indices into `emitted` whose
    #   top-2 logit gap was within twice the target's measured rounding (such a choice may flip between forwards)

    @property
    def num_drafted(self) -> int:
        return len(self.drafted)

    @property
    def depth(self) -> int:
        """Longest branch of the draft: its length for a chain."""
        return max(depths(self.parents), default=0) if self.parents is not None else len(self.drafted)

    @property
    def branch(self) -> list[int]:
        """Accepted draft nodes in order (for a chain recorded without a path: 0..num_accepted-1)."""
        return self.accepted_path if self.parents is not None else list(range(self.num_accepted))

    @property
    def rejected_nodes(self) -> list[int]:
        """Draft nodes not taken, for display: a chain's tail after the first rejection; in a tree, every node
        off the accepted branch."""
        taken = set(self.branch)
        return [i for i in range(len(self.drafted)) if i not in taken]

    @property
    def seconds(self) -> float:
        return self.prefill_seconds + self.draft_seconds + self.verify_seconds

    def to_dict(self) -> dict:
        return asdict(self)
