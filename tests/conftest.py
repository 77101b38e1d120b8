"""Shared fixtures: tiny random-weight models and scripted drafters (always right, always wrong, right for j)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.core.config import EagleConfig, GenerationConfig, MedusaConfig  # noqa: E402
from specdec_core.core.drafter import Draft, DraftContext, Stateless  # noqa: E402
from specdec_core.methods.medusa import MedusaHeads  # noqa: E402
from specdec_core.core.engine import SpeculativeEngine  # noqa: E402
from specdec_core.backends.lm import LanguageModel  # noqa: E402
from specdec_core.methods.registry import METHODS, MethodOptions, build_drafter  # noqa: E402
from specdec_core.backends.models import perturbed_copy, tiny_model  # noqa: E402
from specdec_core.core.session import run  # noqa: E402

PROMPT = [5, 17, 3, 42, 8, 17, 3, 42, 9, 60, 5, 17]


class CharTokenizer:
    """Token id i <-> chr(65 + i % 58): enough to render and decode tiny-model output."""

    eos_token_id = None

    def get_vocab(self) -> dict:
        return {}

    def decode(self, ids, **kwargs):
        return "".join(chr(65 + i % 58) for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, return_dict=False):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + ("assistant: " * add_generation_prompt)
        return self(text).input_ids

    def __call__(self, text, add_special_tokens=True):
        class Enc:
            input_ids = [ord(c) % 96 for c in text]

        return Enc()


@pytest.fixture(scope="session")
def target() -> LanguageModel:
    return tiny_model(seed=0)


@pytest.fixture(scope="session")
def draft_model(target) -> LanguageModel:
    """The target with its weights perturbed: agrees often, not always (partial acceptance)."""
    return perturbed_copy(target)


def greedy_reference(target: LanguageModel, prompt: list[int], n: int) -> list[int]:
    return run(SpeculativeEngine(target), "ar", prompt, GenerationConfig(max_new_tokens=n)).token_ids


class ScriptedDrafter(Stateless):
    """Proposes the reference continuation, right for its first `right` tokens and wrong after (right=None: always
    right; right=0: always wrong). Deterministic (no q)."""

    def __init__(self, prompt: list[int], reference: list[int], vocab_size: int, right: int | None):
        self.full = prompt + reference
        self.vocab_size = vocab_size
        self.right = right

    def propose(self, state, context: DraftContext) -> Draft:
        start = len(context.tokens)
        truth = self.full[start : start + context.max_tokens]
        wrong = [(t + 1) % self.vocab_size for t in truth]
        j = len(truth) if self.right is None else self.right
        return Draft(truth[:j] + wrong[j:], None)


class ScriptedTreeDrafter(ScriptedDrafter):
    """A token tree whose right branch is never the first child: per level a wrong node (with a wrong child of its
    own) and then the right node, which the next level hangs from. Tests tree masks and keeping a non-contiguous
    branch of the KV cache."""

    def propose(self, state, context: DraftContext) -> Draft:
        start = len(context.tokens)
        truth = self.full[start : start + context.max_tokens]  # for a tree, max_tokens bounds the depth
        tokens, parents, right_node = [], [], -1
        for level, t in enumerate(truth):
            tokens.append((t + 1) % self.vocab_size)
            parents.append(right_node)
            if level + 1 < len(truth):  # the wrong node's own child (never deeper than the right branch)
                tokens.append((t + 2) % self.vocab_size)
                parents.append(len(tokens) - 2)
            tokens.append(t)
            parents.append(right_node)
            right_node = len(tokens) - 1
        return Draft(tokens, None, parents) if tokens else Draft.empty()


def tiny_medusa_heads(target, num_heads: int = 3, seed: int = 7) -> MedusaHeads:
    """Random heads (small weights): they guess from the target's hidden state, sometimes right."""
    heads = MedusaHeads(target.config.hidden_size, num_heads)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in heads.blocks:
            block.linear.weight.copy_(0.3 * torch.randn(block.linear.weight.shape, generator=gen))
    return heads


SCRIPTED = ["always-right", "always-wrong", "right-for-1", "right-for-3", "tree-right-second"]
DRAFTERS = [*METHODS, *SCRIPTED]  # every registered method (a new one must be added to make_drafter) + scripted ones


def method_options(target) -> MethodOptions:
    """Options that point Medusa and EAGLE at tiny heads for this target, saved once per test session, so every
    registered method is built the way the CLI and the page build it: through the registry."""
    if id(target) not in _HEAD_FILES:
        folder = Path(tempfile.mkdtemp(prefix="specdec-heads-"))
        heads, head = folder / "medusa.safetensors", folder / "eagle.safetensors"
        tiny_medusa_heads(target).save(heads, {"for": "test"})
        cached_eagle_head(target).save(head, {"for": "test"})
        _HEAD_FILES[id(target)] = MethodOptions(medusa=MedusaConfig(str(heads), 8, 3), eagle=EagleConfig(str(head), 8, 3))
    return _HEAD_FILES[id(target)]


_HEAD_FILES: dict[int, MethodOptions] = {}


def make_drafter(name: str, target, draft_model, prompt=PROMPT, n: int = 40):
    """A registered method through the registry (as the CLI and the page build it), or a scripted drafter."""
    if name in METHODS:
        return build_drafter(name, target, draft_model, method_options(target))
    if name == "tree-right-second":
        return ScriptedTreeDrafter(prompt, greedy_reference(target, prompt, n + 8), target.vocab_size, None)
    right = {"always-right": None, "always-wrong": 0, "right-for-1": 1, "right-for-3": 3}[name]
    return ScriptedDrafter(prompt, greedy_reference(target, prompt, n + 8), target.vocab_size, right)


@pytest.fixture(scope="session")
def app_server():
    """`python app.py` on a free local port, serving the tiny random-weight model (SPECDEC_TARGET=tiny-random)."""
    import os
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "SPECDEC_TARGET": "tiny-random", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_ANALYTICS_ENABLED": "False"}
    root = Path(__file__).resolve().parents[1]
    (root / "out").mkdir(exist_ok=True)
    log = open(root / "out" / "app_server.log", "w")
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"app.py exited with {proc.returncode}; see out/app_server.log")
                time.sleep(0.5)
        else:
            raise RuntimeError("app.py did not start within 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


_EAGLE_HEADS: dict = {}


def cached_eagle_head(target):
    """One trained tiny head per target for the whole test session."""
    if id(target) not in _EAGLE_HEADS:
        _EAGLE_HEADS[id(target)] = tiny_eagle_head(target)
    return _EAGLE_HEADS[id(target)]


def tiny_eagle_head(target, steps: int = 60, seed: int = 3):
    """An EAGLE head trained for a few seconds on the tiny target's own greedy text (so it is right sometimes, wrong
    sometimes), through train_eagle's loss and batches."""
    from specdec_core.methods.eagle import EagleHead
    from specdec_core.core.kv import new_cache
    from specdec_core.train.eagle import TOP, Batch, losses

    chunks = [greedy_reference(target, [s, (s * 7) % 90 + 1], 30) for s in range(1, 9)]
    with torch.no_grad():
        outs = [target.forward(c, new_cache()) for c in chunks]
    probs = [torch.topk(torch.softmax(o.logits, -1), TOP, dim=-1) for o in outs]
    data = {"tokens": torch.tensor(chunks), "hidden": torch.stack([o.hidden for o in outs]),
            "top_ids": torch.stack([p.indices for p in probs]), "top_p": torch.stack([p.values for p in probs])}
    vocab = torch.arange(target.vocab_size)
    torch.manual_seed(seed)
    head = EagleHead(target.config, 64, vocab)
    w = target.lm_head_rows(vocab)[0].float()
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
    batch = Batch(data, torch.arange(len(chunks)), target.model.get_input_embeddings(), vocab)
    for _ in range(steps):
        loss, _ = losses(head, w, batch, batch.features)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return head
