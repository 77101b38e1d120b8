"""EAGLE (Li et al. 2024): a one-layer draft head that predicts the target's next *feature* (its final hidden state)
autoregressively, and reads tokens off it through the target's own frozen LM head.

Pair i of the head's sequence is (embedding of token i+1, the target's feature after token i); through Linear(2h -> h)
and one decoder layer of the target's kind (own KV cache) it yields a guess of the feature after token i+1, whose LM-head
logits guess token i+2. The target's true features come for free (features.py: the prompt pass and every verify forward
return them); drafted tokens are paired with the head's own guesses, dropped again next round.

Chain mode drafts the head's top token (greedy) or a sample from q (exact speculative sampling). Tree mode (EAGLE-2)
grows a dynamic token tree: at each depth expand the `top_k` most probable nodes (by the product of the head's
probabilities along the branch) with their `top_k` best children in one head forward (tree attention mask), then keep
the best `nodes` of all candidates. The head scores a reduced draft vocabulary (the most frequent tokens in its
training data): a token outside it is never drafted (q = 0 there), exactness unaffected.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec_core.core.config import ConfigError, EagleConfig
from specdec_core.core.kv import cache_length, crop, new_cache
from specdec_core.backends.lm import LanguageModel
from specdec_core.backends.quantize import int8_linears
from specdec_core.core.sampling import expand_vocab, logits_to_probs, sample
from specdec_core.core.drafter import Draft, DraftContext, from_file
from specdec_core.settings import eagle_head_path

FINGERPRINT_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "intermediate_size", "vocab_size", "rope_theta", "max_position_embeddings")


def fingerprint(config) -> str:
    """Which target a head belongs to: a hash of the config fields that shape the target's features."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    fields = {k: getattr(text, k, None) for k in FINGERPRINT_KEYS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def head_config(target_config, intermediate_size: int):
    """The target's decoder config, cut to the one layer the head has."""
    config = copy.deepcopy(target_config.get_text_config())
    config.num_hidden_layers = 1
    config.intermediate_size = intermediate_size
    config._attn_implementation = "sdpa"
    return config


class EagleHead(torch.nn.Module):
    """fc(cat(embedding, feature)) -> one decoder layer (no input norm: features are already normalised)."""

    def __init__(self, target_config, intermediate_size: int, vocab_ids: torch.Tensor | None = None,
                 layer_class=None, rotary_class=None):
        super().__init__()
        from transformers import AutoModelForCausalLM

        self.config = head_config(target_config, intermediate_size)
        self.target_fingerprint = fingerprint(target_config)
        if layer_class is None:  # build the target's own decoder-layer kind from its config
            stub = AutoModelForCausalLM.from_config(self.config).get_decoder()
            layer_class, rotary_class = type(stub.layers[0]), type(stub.rotary_emb)
        h = self.config.hidden_size
        self.fc = torch.nn.Linear(2 * h, h, bias=True)
        self.layer = layer_class(self.config, 0)
        self.layer.input_layernorm = torch.nn.Identity()
        self.rotary = rotary_class(self.config)
        self.vocab_ids = vocab_ids  # the draft vocabulary (None: all of it)
        self.info: dict = {}  # a loaded head: its training report (from the file's metadata)

    @property
    def intermediate_size(self) -> int:
        return self.config.intermediate_size

    def forward(self, embeds: torch.Tensor, features: torch.Tensor, positions: torch.Tensor, cache=None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """[B, n, h] embeddings of tokens i+1 and features after tokens i -> [B, n, h] guessed features after i+1.
        Without a cache and mask: a causal pass over whole sequences (training)."""
        from transformers.masking_utils import create_causal_mask

        x = self.fc(torch.cat([embeds, features.to(embeds.dtype)], dim=-1))
        if cache is not None and mask is None:
            mask = create_causal_mask(config=self.config, inputs_embeds=x, attention_mask=None, past_key_values=cache,
                                      position_ids=positions)
        rope = self.rotary(x, positions)
        return self.layer(x, attention_mask=mask, position_ids=positions, past_key_values=cache,
                          use_cache=cache is not None, position_embeddings=rope)

    def save(self, path: Path, metadata: dict) -> None:
        tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items()
                   if not k.startswith("rotary.")}
        if self.vocab_ids is not None:
            tensors["vocab_ids"] = self.vocab_ids.to(torch.int32)
        meta = {"intermediate_size": str(self.intermediate_size), "fingerprint": self.target_fingerprint,
                "info": json.dumps(metadata)}
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=meta)

    @staticmethod
    def load(path: Path, target_config, target_name: str = "the target") -> "EagleHead":
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            meta = f.metadata()
        info = json.loads(meta.get("info", "{}"))  # the report of the training run that wrote the file
        if meta.get("fingerprint") != fingerprint(target_config):
            owner = info.get("target", "another model")
            raise ConfigError(f"these EAGLE heads belong to {owner} (fingerprint {meta.get('fingerprint')}), not to "
                              f"{target_name} ({fingerprint(target_config)})")
        tensors = load_file(str(path))
        vocab = tensors.pop("vocab_ids", None)
        head = EagleHead(target_config, int(meta["intermediate_size"]), vocab.long() if vocab is not None else None)
        head.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
        head.info = info
        return head


def default_head_path(target_name: str) -> Path:
    return eagle_head_path(target_name)


@dataclass(frozen=True)
class EagleTree:
    """EAGLE-2's dynamic tree: expand the `top_k` best nodes per depth with `top_k` children each; keep `nodes`."""

    nodes: int = 16
    top_k: int = 4


@dataclass
class EagleState:
    """One request's head cache: pair i at position i; the first `fed` hold the target's true features."""

    cache: object = field(default_factory=new_cache)
    fed: int = 0


class EagleDrafter:
    def __init__(self, target: LanguageModel, head: EagleHead, tree: EagleTree | None = None):
        if head.target_fingerprint != fingerprint(target.config):
            raise ConfigError(f"these EAGLE heads were trained for another target than {target.name}")
        self.head = copy.deepcopy(head).to(device=target.device, dtype=target.dtype).eval()
        self.head.rotary = type(head.rotary)(head.config).to(target.device)  # rotary frequencies stay float32
        if target.representation.startswith("int8 weight-only"):  # the head runs as the target does
            int8_linears(self.head)
        self.embed = target.model.get_input_embeddings()
        self.vocab_ids = head.vocab_ids.to(target.device) if head.vocab_ids is not None else None
        self.lm_weight, self.lm_bias = target.lm_head_rows(self.vocab_ids)
        self.vocab_size = target.vocab_size
        self.device = target.device
        self.tree = tree

    def start(self) -> EagleState:
        return EagleState()

    def _probs(self, feature: torch.Tensor, context: DraftContext) -> torch.Tensor:
        """Guessed features [n, h] -> full-vocabulary draft distributions [n, vocab] (0 outside the draft vocab)."""
        logits = feature.to(self.lm_weight.dtype) @ self.lm_weight.T
        if self.lm_bias is not None:
            logits = logits + self.lm_bias
        return expand_vocab(logits_to_probs(logits.float(), context.sampling), self.vocab_ids, self.vocab_size)

    def _step(self, ids: list[int], features: torch.Tensor, cache, start: int, mask=None,
              positions: list[int] | None = None) -> torch.Tensor:
        ids_t = torch.tensor([ids], device=self.device)
        pos = torch.tensor([positions if positions is not None else list(range(start, start + len(ids)))],
                           device=self.device)
        return self.head(self.embed(ids_t), features[None], pos, cache, mask)[0]

    @torch.inference_mode()
    def _catch_up(self, state: EagleState, context: DraftContext) -> torch.Tensor:
        """Feed the target's true features for every committed pair not yet in the cache (dropping last round's
        guesses); return the guessed feature after the last committed token."""
        tokens, features = context.tokens, context.features
        crop(state.cache, state.fed)
        start = state.fed
        guess = self._step(tokens[start + 1:], features.since(start), state.cache, start)
        state.fed = len(tokens) - 1
        return guess[-1]

    def propose(self, state: EagleState, context: DraftContext) -> Draft:
        if context.max_tokens <= 0 or context.features is None or len(context.features) == 0:
            return Draft.empty()  # a one-token prompt: no feature yet
        guess = self._catch_up(state, context)
        if self.tree is not None:
            nodes = self.tree.nodes if context.max_nodes is None else min(self.tree.nodes, context.max_nodes)
            return self._tree(state, context, guess, nodes)
        return self._chain(state, context, guess)

    @torch.inference_mode()
    def _chain(self, state: EagleState, context: DraftContext, guess: torch.Tensor) -> Draft:
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        position = len(context.tokens) - 1
        while True:
            q = self._probs(guess[None], context)[0]
            token = sample(q, context.generator, greedy=context.sampling.greedy)
            tokens.append(token)
            rows.append(q)
            if len(tokens) >= context.max_tokens or float(q[token]) < context.confidence_threshold:
                return Draft(tokens, torch.stack(rows))
            guess = self._step([token], guess[None], state.cache, position)[-1]
            position += 1

    @torch.inference_mode()
    def _tree(self, state: EagleState, context: DraftContext, guess: torch.Tensor, budget: int) -> Draft:
        k = self.tree.top_k
        tokens: list[int] = []
        parents: list[int] = []
        scores: list[float] = []
        row_of: dict[int, int] = {}  # node -> its pair's position in the head cache (expanded nodes only)
        past = len(context.tokens) - 1  # cache positions holding true pairs
        frontier, guesses = [-1], guess[None]  # nodes to expand (-1: the root) and their guessed features
        for depth in range(context.max_tokens):
            probs = self._probs(guesses, context)
            values, ids = torch.topk(probs, k, dim=-1)
            for node, vals, cands in zip(frontier, values.tolist(), ids.tolist()):
                base = 1.0 if node < 0 else scores[node]
                for v, t in zip(vals, cands):
                    tokens.append(t)
                    parents.append(node)
                    scores.append(base * v)
            if depth + 1 >= context.max_tokens:
                break
            first = len(tokens) - len(frontier) * k  # the newest depth: k children per frontier node, in order
            chosen = sorted(sorted(range(first, len(tokens)), key=lambda i: -scores[i])[:k])  # its best k
            parent_guesses = torch.stack([guesses[(i - first) // k] for i in chosen])
            frontier = chosen
            guesses = self._expand(state, frontier, parent_guesses, tokens, parents, row_of, past, depth + 1)
        keep = sorted(sorted(range(len(tokens)), key=lambda i: (-scores[i], i))[:budget])
        index = {old: new for new, old in enumerate(keep)}
        return Draft([tokens[i] for i in keep], None, [index[parents[i]] if parents[i] >= 0 else -1 for i in keep])

    def _expand(self, state, frontier, feats, tokens, parents, row_of, past: int, depth: int) -> torch.Tensor:
        """One head forward over the frontier nodes, each paired with its parent's guessed feature (`feats`) and
        attending to the true pairs, its expanded ancestors and itself; returns their guessed features."""
        width = cache_length(state.cache)
        allowed = torch.zeros(len(frontier), width + len(frontier), dtype=torch.bool)
        allowed[:, :past] = True
        for r, node in enumerate(frontier):
            a = parents[node]
            while a >= 0:
                allowed[r, row_of[a]] = True
                a = parents[a]
            allowed[r, width + r] = True
            row_of[node] = width + r
        dtype = self.lm_weight.dtype  # the head's activations' dtype (the target's)
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        positions = [past - 1 + depth] * len(frontier)
        return self._step([tokens[n] for n in frontier], feats, state.cache, 0, mask[None, None].to(self.device),
                          positions)


@functools.lru_cache(maxsize=4)
def load_head(path: Path, target_config_json: str, target_name: str) -> EagleHead:
    from transformers import AutoConfig

    config = AutoConfig.for_model(**json.loads(target_config_json))
    return EagleHead.load(path, config, target_name)


def eagle_drafter(target: LanguageModel, config: EagleConfig, tree: bool) -> EagleDrafter:
    """The head for this target (`config.heads`, or the one shipped for it), as a chain or a tree drafter."""
    path = Path(config.heads) if config.heads else default_head_path(target.name)
    return from_file(path, "EAGLE head", "train.eagle", target.name, lambda: EagleDrafter(
        target, load_head(path, target.config.to_json_string(), target.name),
        EagleTree(config.tree_nodes, config.tree_top_k) if tree else None))
