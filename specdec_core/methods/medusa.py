"""Medusa heads (Cai et al. 2024, Medusa-1): K residual blocks on the target's final hidden state; head k's output goes
through the target's own frozen LM head (restricted to a shipped vocabulary subset) and guesses the token k+2 places
after the position that hidden state belongs to. No second model: a draft costs K small matmuls on a hidden state the
target already computed in the previous verify pass.

Chain mode proposes each head's top token (greedy) or a sample from its distribution (q, exact speculative sampling).
Tree mode proposes several candidates per head as a token tree (deterministic candidates; see verify.verify_tree).
"""
from __future__ import annotations

import copy
import functools
import heapq
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec_core.core.config import MedusaConfig
from specdec_core.backends.lm import LanguageModel
from specdec_core.core.sampling import expand_vocab, logits_to_probs, sample
from specdec_core.core.drafter import Draft, DraftContext, Stateless, from_file
from specdec_core.settings import medusa_heads_path



class ResBlock(torch.nn.Module):
    """h + SiLU(W h + b); zero-initialised so an untrained head starts as the target's own next-token head."""

    def __init__(self, size: int):
        super().__init__()
        self.linear = torch.nn.Linear(size, size)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + torch.nn.functional.silu(self.linear(h))


class MedusaHeads(torch.nn.Module):
    """K independent ResBlocks (no weights shared between heads) + the ids of the vocabulary subset they score."""

    def __init__(self, hidden_size: int, num_heads: int, vocab_ids: torch.Tensor | None = None):
        super().__init__()
        self.blocks = torch.nn.ModuleList(ResBlock(hidden_size) for _ in range(num_heads))
        self.vocab_ids = vocab_ids  # None = the full vocabulary

    @property
    def num_heads(self) -> int:
        return len(self.blocks)

    def forward(self, hidden: torch.Tensor, lm_weight: torch.Tensor, lm_bias: torch.Tensor | None = None):
        """hidden [..., H] -> logits [K, ..., V'] over the subset (lm_weight is the LM head's rows for it)."""
        out = torch.stack([block(hidden) for block in self.blocks])
        logits = out @ lm_weight.T
        return logits + lm_bias if lm_bias is not None else logits

    def save(self, path: Path, metadata: dict) -> None:
        tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items()}
        if self.vocab_ids is not None:
            tensors["vocab_ids"] = self.vocab_ids.to(torch.int32)
        meta = {"hidden_size": str(self.blocks[0].linear.in_features), "num_heads": str(self.num_heads),
                "info": json.dumps(metadata)}
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=meta)

    @staticmethod
    def load(path: Path) -> "MedusaHeads":
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            meta = f.metadata()
        tensors = load_file(str(path))
        vocab = tensors.pop("vocab_ids", None)
        heads = MedusaHeads(int(meta["hidden_size"]), int(meta["num_heads"]),
                            vocab.long() if vocab is not None else None)
        heads.load_state_dict({k: v.float() for k, v in tensors.items()})
        return heads


def default_heads_path(target_name: str) -> Path:
    return medusa_heads_path(target_name)


@dataclass(frozen=True)
class TreeShape:
    """A dynamic token tree: up to `nodes` candidates, at most `top_k` children per node, chosen best-first by the
    product of the heads' probabilities along the branch."""

    nodes: int = 10
    top_k: int = 3


class MedusaDrafter(Stateless):
    def __init__(self, target: LanguageModel, heads: MedusaHeads, tree: TreeShape | None = None):
        if heads.blocks[0].linear.in_features != target.config.get_text_config().hidden_size:
            raise ValueError("the Medusa heads were trained for a different hidden size than this target's")
        self.heads = copy.deepcopy(heads).to(device=target.device, dtype=target.dtype).eval()
        self.vocab_ids = heads.vocab_ids.to(target.device) if heads.vocab_ids is not None else None
        self.lm_weight, self.lm_bias = target.lm_head_rows(self.vocab_ids)
        self.vocab_size = target.vocab_size
        self.tree = tree

    @torch.inference_mode()
    def head_probs(self, hidden: torch.Tensor, context: DraftContext) -> torch.Tensor:
        logits = self.heads(hidden, self.lm_weight, self.lm_bias).float()
        return expand_vocab(logits_to_probs(logits, context.sampling), self.vocab_ids, self.vocab_size)  # [K, vocab]

    def propose(self, state, context: DraftContext) -> Draft:
        depth = min(context.max_tokens, self.heads.num_heads)
        if depth <= 0 or context.last_hidden is None:  # the very first round has no hidden state yet
            return Draft.empty()
        q = self.head_probs(context.last_hidden, context)[:depth]
        if self.tree is not None:
            nodes = self.tree.nodes if context.max_nodes is None else min(self.tree.nodes, context.max_nodes)
            return self._tree(q, nodes)
        tokens: list[int] = []
        for row in q:
            token = sample(row, context.generator, greedy=context.sampling.greedy)
            tokens.append(token)
            if float(row[token]) < context.confidence_threshold:
                break
        return Draft(tokens, q[: len(tokens)])

    def _tree(self, q: torch.Tensor, nodes: int) -> Draft:
        values, ids = torch.topk(q, self.tree.top_k, dim=-1)
        values, ids = values.tolist(), ids.tolist()
        tokens: list[int] = []
        parents: list[int] = []
        # Best-first over (-branch score, parent node, depth, rank among that parent's candidates, parent's score).
        frontier = [(-values[0][0], -1, 0, 0, 1.0)]
        while frontier and len(tokens) < nodes:
            _, parent, d, rank, parent_score = heapq.heappop(frontier)
            node, score = len(tokens), parent_score * values[d][rank]
            tokens.append(ids[d][rank])
            parents.append(parent)
            if rank + 1 < self.tree.top_k:  # the next sibling
                heapq.heappush(frontier, (-parent_score * values[d][rank + 1], parent, d, rank + 1, parent_score))
            if d + 1 < len(ids):  # the first child
                heapq.heappush(frontier, (-score * values[d + 1][0], node, d + 1, 0, score))
        return Draft(tokens, None, parents)


@functools.lru_cache(maxsize=4)
def load_heads(path: Path) -> MedusaHeads:
    return MedusaHeads.load(path)


def medusa_drafter(target: LanguageModel, config: MedusaConfig, tree: bool) -> MedusaDrafter:
    """The heads for this target (`config.heads`, or the ones shipped for it), as a chain or a tree drafter."""
    path = Path(config.heads) if config.heads else default_heads_path(target.name)
    return from_file(path, "Medusa heads", "train.medusa", target.name, lambda: MedusaDrafter(
        target, load_heads(path), TreeShape(config.tree_nodes, config.tree_top_k) if tree else None))
