"""Self-speculation: the target drafts for itself with some decoder layers skipped (no extra weights)."""
from __future__ import annotations

from specdec_core.core.config import ConfigError, LayerSkipConfig
from specdec_core.backends.lm import LanguageModel
from specdec_core.methods.neural import NeuralDrafter


def default_skip_layers(num_layers: int) -> tuple[int, ...]:
    """Skip every other layer in the middle half; keep the first and last quarter intact."""
    lo, hi = num_layers // 4, num_layers - num_layers // 4
    return tuple(range(lo + 1, hi, 2))


def kept_layers(num_layers: int, skip: tuple[int, ...]) -> tuple[int, ...]:
    bad = [i for i in skip if not 0 < i < num_layers]
    if bad:
        raise ConfigError(f"cannot skip layers {bad}: layers 1..{num_layers - 1} may be skipped (layer 0 is kept)")
    kept = tuple(i for i in range(num_layers) if i not in set(skip))
    return kept


class LayerSkipDrafter(NeuralDrafter):
    def __init__(self, target: LanguageModel, config: LayerSkipConfig = LayerSkipConfig()):
        skip = config.skip_layers if config.skip_layers is not None else default_skip_layers(target.num_layers)
        self.layers = kept_layers(target.num_layers, skip)
        self.skipped = tuple(skip)
        super().__init__(lambda ids, cache, logits_rows=None: target.forward_layers(ids, cache, self.layers, logits_rows),
                         target.vocab_size)
