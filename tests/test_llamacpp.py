"""The llama.cpp backend on the embedded GGUF files as they ship: the exactness probe, a refused batch above the
exact size, greedy equality with llama.cpp-backed plain decoding for every method it offers (and a clear refusal for
the rest), and exact speculative sampling (chi-square). Skipped without llama-cpp-python, unless
SPECDEC_REQUIRE_LLAMACPP=1 (CI installs it and sets that, so a failed install fails here)."""
from __future__ import annotations

import os

import pytest
import torch
from scipy.stats import chisquare

from specdec_core.backends import llamacpp
from specdec_core.bench.prompts import suite
from specdec_core.core.config import ConfigError, DraftConfig, GenerationConfig, SamplingConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.session import encode_prompt, eos_token_ids, run
from specdec_core.methods.registry import METHODS, build_drafter
from specdec_core.settings import DEFAULT_DRAFT, DEFAULT_TARGET

pytestmark = pytest.mark.embedded
if not llamacpp.available():
    if os.environ.get("SPECDEC_REQUIRE_LLAMACPP") == "1":
        raise RuntimeError(f"SPECDEC_REQUIRE_LLAMACPP=1 but llama-cpp-python is missing: {llamacpp.INSTALL}")
    pytest.skip(f"llama-cpp-python is not installed: {llamacpp.INSTALL}", allow_module_level=True)

PROMPTS = ("def is_prime(n: int) -> bool:\n    \"\"\"Return True if n is prime.\"\"\"\n",
           "from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n    \"\"\"Is the balance ever "
           "below zero?\"\"\"\n")
# HumanEval/68: 310 prompt tokens, past where 2 threads split llama.cpp's one-token attention; before verify batches
# were capped there, lookup differed from plain decoding at token 61 of this prompt
LONG = next(p.prompt for p in suite("humaneval") if p.id == "HumanEval/68")


@pytest.fixture(scope="module")
def pair():
    target, tokenizer = llamacpp.load(DEFAULT_TARGET)
    draft, _ = llamacpp.load(DEFAULT_DRAFT, target=False)
    return target, draft, tokenizer


def test_the_probe_finds_an_exact_batch_and_a_larger_one_is_refused(pair):
    target, _, _ = pair
    k = target.max_verify_tokens
    assert k is not None and k >= 2 and target.rounding == 0.0 and target.exact
    cache = target.new_cache()
    target.prefill(list(range(1000, 1020)), cache)
    if k < llamacpp.PROBE_MAX_ROWS:
        with pytest.raises(ConfigError, match=f"at most {k} are"):
            target.forward(list(range(1020, 1021 + k)), cache)
    assert cache.length == 20  # a refused forward writes nothing
    out = target.forward(list(range(1020, 1020 + k)), cache)
    assert out.logits.shape == (k, target.vocab_size) and cache.length == 20 + k


def test_the_matmul_probe_times_ggmls_kernels_as_the_model_runs_them(pair):
    """The roofline's compute term here: ggml's kernel on a cache-resident weight, repacked where the model's are, and
    more rows cost more arithmetic; a forward past the exact batch is offered for timing only."""
    from specdec_core.backends.ggml_kernels import matmul_seconds

    target, _, _ = pair
    q4_k = 12  # ggml's Q4_K, most of the target's weights
    repacked, seconds = matmul_seconds(q4_k, 1536, (1, 8), target.threads, target.repacked, reps=5)
    assert repacked == target.repacked and 0 < seconds[1] < seconds[8]
    rates = target.kernel_tflops((1, 2))
    assert set(rates) == {1, 2} and all(0 < r < 100 for r in rates.values())
    cache = target.new_cache()
    target.prefill(list(range(1000, 1020)), cache)
    target.forward_unverified(list(range(1020, 1020 + llamacpp.PROBE_MAX_ROWS)), cache)
    assert cache.length == 20 + llamacpp.PROBE_MAX_ROWS


def test_past_the_measured_cache_length_only_one_token_verifies(pair):
    """On 2+ threads llama.cpp's one-token attention splits a long cache across threads and a batch does not: the
    probe finds the length, the engine drafts nothing past it and a larger forward is refused."""
    target, _, _ = pair
    until = target.exact_until
    assert until is not None and 2 < until <= llamacpp.PROBE_LONG + 2
    assert target.verify_rows(until - 2) >= 2
    assert target.verify_rows(until) == 1 and target.verify_rows(10 * until) == 1
    if until < llamacpp.PROBE_LONG + 2:  # the kernels change within the probed range (2 threads here): refused past it
        cache = target.new_cache()
        target.prefill([(1000 + 37 * i) % 30000 for i in range(until)], cache)
        with pytest.raises(ConfigError, match="is not bitwise equal"):
            target.forward([11, 12], cache)
    assert f"cache holds at most {until} tokens" in target.representation_note


def test_a_copied_cache_continues_bit_for_bit(pair):
    target, _, _ = pair
    a = target.new_cache()
    target.prefill(list(range(2000, 2030)), a)
    b = a.copy()
    assert torch.equal(target.forward([2030], a).logits, target.forward([2030], b).logits)
    a.crop(10)
    assert a.length == 10 and b.length == 31


def test_a_token_tree_is_refused_with_its_reason_and_writes_nothing(pair):
    target, _, _ = pair
    cache = target.new_cache()
    target.prefill(list(range(3000, 3010)), cache)
    with pytest.raises(ConfigError, match="out of position order"):
        target.forward([3010, 3011, 3012], cache, parents=[-1, 0, 0])
    with pytest.raises(ConfigError, match="out of position order"):
        cache.keep(10, [10, 12])  # a branch that skips a sibling's cell
    assert cache.length == 10


@pytest.mark.parametrize("method", [m for m in METHODS if m != "ar"])
def test_greedy_equals_llamacpp_plain_decoding_or_the_method_is_refused(pair, method):
    target, draft, tokenizer = pair
    if method in llamacpp.REFUSED:
        with pytest.raises(ConfigError, match=f"not offered on the llamacpp backend: {llamacpp.REFUSED[method][:20]}"):
            build_drafter(method, target, draft)
        return
    eos = eos_token_ids(tokenizer, target)
    config = GenerationConfig(max_new_tokens=64, draft=DraftConfig(num_draft_tokens=6))
    accepted = 0
    for text in PROMPTS + (LONG,):
        prompt = encode_prompt(tokenizer, text)
        ar = run(SpeculativeEngine(target, None, eos), "ar", prompt, config)
        spec = run(SpeculativeEngine(target, build_drafter(method, target, draft), eos, method=method), method, prompt,
                   config)
        assert spec.token_ids == ar.token_ids, (method, tokenizer.decode(spec.token_ids), tokenizer.decode(ar.token_ids))
        assert max(r.num_draft_requested for r in spec.rounds) <= target.max_verify_tokens - 1
        accepted += spec.stats.accepted
    assert method != "draft" or accepted > 0


def test_sampling_keeps_the_target_distribution(pair):
    """The first sampled token of a speculative run (draft model, γ up to 3: as many as the exact batch allows) is
    distributed as the target's p."""
    target, draft, tokenizer = pair
    gamma = min(3, target.max_verify_tokens - 1)
    assert gamma >= 1, "the probe found no exact batch here: nothing to verify speculatively"
    prompt = encode_prompt(tokenizer, PROMPTS[0])
    sampling = SamplingConfig(temperature=1.0, top_k=8)
    engine = SpeculativeEngine(target, build_drafter("draft", target, draft), method="draft")
    prefix = engine.prefill(prompt)
    p = torch.softmax(target.forward([prompt[-1]], prefix.cache.copy()).logits[0].float(), -1)
    top = torch.topk(p, 8).indices
    counts, drafted = torch.zeros(8), 0
    n = 200
    for seed in range(n):
        config = GenerationConfig(max_new_tokens=4, seed=seed, sampling=sampling,
                                  draft=DraftConfig(num_draft_tokens=gamma))
        first = next(engine.generate(prompt, config, prefix))  # one round: γ drafted, verified, then a correction/bonus
        token = first.emitted[0]
        drafted += len(first.drafted)
        counts[(top == token).nonzero()[0, 0]] += 1
    expected = p[top] / p[top].sum() * n
    assert drafted == gamma * n and chisquare(counts.numpy(), expected.numpy()).pvalue > 1e-3


def test_auto_measures_both_backends_and_picks_the_faster_plain_decoding(tmp_path, monkeypatch):
    """The real pair, both backends, measured here (the choice's cache goes to tmp_path; the converted models stay
    where they are)."""
    from specdec_core.backends import choice
    from specdec_core.backends.representation import load_target

    monkeypatch.setattr(choice, "cache_path", lambda k: tmp_path / "choice.json")
    loaders = {"torch": lambda: load_target(DEFAULT_TARGET)[0], "llamacpp": lambda: llamacpp.load(DEFAULT_TARGET)[0]}
    picked = choice.choose(DEFAULT_TARGET, loaders, device="cpu", say=lambda m: None)
    assert set(picked.measured) == {"torch", "llamacpp"} and picked.backend == choice.pick(picked.measured)
    assert picked.reason.startswith("auto: ") and "tok/s" in picked.reason
    assert choice.choose(DEFAULT_TARGET, loaders, device="cpu", say=lambda m: None).cached


def test_the_page_races_on_llamacpp_with_identical_tokens(pair):
    """The page's models on llama.cpp (resources), a race with the cost-aware length and one with a fixed γ: both
    lanes give the same tokens, and the cards name the backend."""
    from app import race, resources

    models = resources._load(DEFAULT_TARGET, DEFAULT_DRAFT, "llamacpp", "asked for llama.cpp")
    assert models.backend == "llamacpp" and "llama.cpp" in models.device_label
    for cost_aware in (True, False):
        request = race.parse_request(PROMPTS[0], "draft", 4, False, 0.0, 1.0, 0, 24, False, cost_aware)
        record = None
        for record, _ in race.run_race(models, request, None):
            pass
        assert record.spec.token_ids == record.ar.token_ids and len(record.ar.token_ids) == 24
        assert "llama.cpp" in record.device


def test_compare_runs_both_backends_each_against_its_own_plain_decoding(pair):
    """Compare with PyTorch and llama.cpp on one prompt: each backend's ar, then its methods (Medusa refused on
    llama.cpp with the reason), every output identical to its own backend's ar, and the verdict names the fastest
    decoding of all."""
    from app import compare, race, resources

    torch_models = resources._load(DEFAULT_TARGET, DEFAULT_DRAFT, "torch", "asked for PyTorch")
    llama_models = resources._load(DEFAULT_TARGET, DEFAULT_DRAFT, "llamacpp", "asked for llama.cpp")
    request = race.parse_request(PROMPTS[1], "lookup", 4, False, 0.0, 1.0, 0, 16, False)
    state = None
    for state, _ in compare.run_compare(torch_models, request, ["lookup", "medusa"], None, None,
                                        ((llama_models, None),)):
        pass
    assert state.backends == ["PyTorch", "llama.cpp"]
    assert state.names == ["ar · PyTorch", "lookup · PyTorch", "medusa · PyTorch",
                           "ar · llama.cpp", "lookup · llama.cpp", "medusa · llama.cpp"]
    rows = {r["name"]: r for r in state.summary()["methods"]}
    assert rows["lookup · PyTorch"]["identical"] is True and rows["lookup · llama.cpp"]["identical"] is True
    assert "hidden states" in rows["medusa · llama.cpp"]["error"] and not rows["medusa · PyTorch"]["error"]
    assert rows["ar · llama.cpp"]["decode_speedup"] == rows["ar · PyTorch"]["decode_speedup"] == 1.0
    lanes = {x.name: x for x in state.items[0].lanes}
    assert lanes["ar · PyTorch"].token_ids == lanes["lookup · PyTorch"].token_ids
    assert lanes["ar · llama.cpp"].token_ids == lanes["lookup · llama.cpp"].token_ids
    assert "Fastest decoding of all:" in compare.verdict_html(state)
    assert "same backend" in compare.table_html(state)
