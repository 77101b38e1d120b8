"""A causal LM behind one small interface: forward new tokens into a KV cache, get logits and last hidden states.

The target, the draft model and the plain autoregressive baseline all go through `LanguageModel.forward`, so a race
between them measures the same code. `forward_layers` runs only some decoder layers (layer-skip self-speculation).
"""
from __future__ import annotations

import time

import torch
from transformers import DynamicCache
from transformers.masking_utils import create_causal_mask

from specdec_core.backends.exact import fused, prompt_pass
from specdec_core.core import tree
from specdec_core.core.backend import ForwardOutput
from specdec_core.core.kv import cache_length, new_cache


class LanguageModel:
    """Wraps a Hugging Face *ForCausalLM model (batch size 1, no padding)."""

    def __init__(self, model: torch.nn.Module, name: str = "model"):
        self.model = model.eval()
        self.name = name
        self.config = model.config
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.exact = False  # token-count invariant forward installed (exact.make_exact)
        self.rounding: float | None = None  # measured max |Δlogit|, n tokens together vs alone (None: not measured)
        self.representation = str(self.dtype).replace("torch.", "")  # what the page and the JSON name
        self.representation_note = ""  # why this representation, and how its layers run (representation.load_target)
        self.max_verify_tokens: int | None = None  # the bit-exact forward verifies any number of rows exactly
        self.backend = "torch"

    def new_cache(self) -> DynamicCache:
        return new_cache()

    @torch.inference_mode()
    def kernel_tflops(self, sizes: tuple[int, ...], reps: int = 15) -> dict[int, float]:
        """{n: TFLOPS} the first decoder layer's linear layers reach on n rows, each as the target runs it (its
        representation, its exact wrapper), timed alone and repeated so its weights sit in cache: the matmul probe
        behind the roofline's compute term (backends/roofline.py). Fastest of `reps` per layer."""
        layer = self.decoder.layers[0]
        found = [(n, m) for n, m in layer.named_modules() if hasattr(m, "in_features") and hasattr(m, "out_features")]
        linears = [m for n, m in found if not any(n.startswith(f"{o}.") for o, _ in found)]  # outermost wrappers
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        rates = {}
        for n in sizes:
            seconds = flops = 0.0
            for lin in linears:
                x = torch.randn(1, n, lin.in_features, dtype=self.dtype, device=self.device)
                lin(x)
                best = float("inf")
                for _ in range(reps):
                    sync()
                    t0 = time.perf_counter()
                    lin(x)
                    sync()
                    best = min(best, time.perf_counter() - t0)
                seconds += best
                flops += 2 * lin.in_features * lin.out_features * n
            rates[n] = round(flops / seconds / 1e12, 4)
        return rates

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.get_input_embeddings().weight.dtype

    @property
    def vocab_size(self) -> int:
        return self.lm_head.out_features  # (a quantised Linear has no .weight tensor)

    @property
    def hidden_size(self) -> int:
        return self.config.get_text_config().hidden_size

    @property
    def num_layers(self) -> int:
        return self.config.get_text_config().num_hidden_layers

    @property
    def max_positions(self) -> int:
        return int(getattr(self.config.get_text_config(), "max_position_embeddings", 1 << 30))

    @torch.inference_mode()
    def prefill(self, token_ids: list[int], cache: DynamicCache) -> torch.Tensor:
        """Fill the cache with a prompt (no logits; returns its final hidden states). Runs stock even in exact mode
        (`exact.prompt_pass`): every run of a prompt starts from the same prompt pass (engine.Prefix), and the exact
        forward's per-query attention and row blocks cost time over hundreds of positions."""
        with prompt_pass():
            return self.forward(token_ids, cache, logits_rows=0).hidden  # the prompt's features (features.py)

    def lm_head_rows(self, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight, bias) of the LM head for vocabulary `ids` (all when None), dense in the model's dtype even where
        the head runs int8 or in row blocks (Medusa heads read their logits through it)."""
        head = getattr(self.lm_head, "inner", self.lm_head)
        if hasattr(head, "dense_rows"):
            return head.dense_rows(ids)
        weight, bias = head.weight.detach(), getattr(head, "bias", None)
        if ids is None:
            return weight, None if bias is None else bias.detach()
        return weight[ids], None if bias is None else bias.detach()[ids]

    def _ids(self, token_ids: list[int]) -> torch.Tensor:
        return torch.tensor([token_ids], dtype=torch.long, device=self.device)

    @torch.inference_mode()
    def forward(self, token_ids: list[int], cache: DynamicCache, parents: list[int] | None = None,
                logits_rows: int | None = None) -> ForwardOutput:
        """Append `token_ids` after the cached positions; return logits and hidden states for each of them
        (logits for the last `logits_rows` positions only when given: a prompt pass needs none, and the LM head
        over a long prompt costs seconds on a CPU).

        With `parents` (see tree.py), token_ids[0] is the root and token_ids[i+1] is tree node i: each attends to the
        cache and its own ancestors only, at position cache length + depth (one forward verifies a whole tree)."""
        if parents is None:
            out = self.decoder(input_ids=self._ids(token_ids), past_key_values=cache, use_cache=True)
        else:
            past = cache_length(cache)
            positions = torch.tensor([[past] + [past + d for d in tree.depths(parents)]], device=self.device)
            mask = tree.attention_mask(parents, past, self.dtype, self.device)
            out = self.decoder(input_ids=self._ids(token_ids), past_key_values=cache, use_cache=True,
                               attention_mask=mask, position_ids=positions)
        return self._output(out.last_hidden_state[0], logits_rows)

    @torch.inference_mode()
    def forward_layers(self, token_ids: list[int], cache: DynamicCache, layers: tuple[int, ...],
                       logits_rows: int | None = None) -> ForwardOutput:
        """Like `forward` but through the given decoder layers only (Llama-style decoders: embed, layers, norm).

        The cache must be dedicated to this layer subset; layer 0 must be among `layers` (its length is the cache's).
        """
        dec = self.decoder
        if not all(hasattr(dec, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")):
            raise TypeError(f"{type(dec).__name__} is not a Llama-style decoder; layer skipping is not supported")
        ids = self._ids(token_ids)
        h = dec.embed_tokens(ids)
        start = cache_length(cache)
        positions = torch.arange(start, start + len(token_ids), device=self.device).unsqueeze(0)
        mask = create_causal_mask(
            config=dec.config, inputs_embeds=h, attention_mask=None, past_key_values=cache, position_ids=positions
        )
        rope = dec.rotary_emb(h, positions)
        with fused():  # drafting needs no invariance
            for i in layers:
                h = dec.layers[i](
                    h, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
                    position_embeddings=rope,
                )
        return self._output(dec.norm(h)[0], logits_rows)

    def _output(self, hidden: torch.Tensor, logits_rows: int | None) -> ForwardOutput:
        """Logits (float32) for every row of `hidden`, or for its last `logits_rows` rows only."""
        rows = hidden if logits_rows is None else hidden[hidden.shape[0] - logits_rows:]
        return ForwardOutput(self.lm_head(rows).float(), hidden)
