"""`--backend auto`: the rules that need no measurement, picking the faster measured plain decoding, the cache, and a
real measurement of plain decoding on a (tiny) model."""
from __future__ import annotations

import json

import pytest

from specdec_core.backends import choice
from specdec_core.backends.models import tiny_model
from specdec_core.cli import parse_backends
from specdec_core.core.config import ConfigError


def test_parse_names_and_rejects_unknown_backends():
    assert choice.parse(None) == choice.parse("") == choice.parse(" AUTO ") == "auto"
    assert choice.parse("llamacpp") == "llamacpp"
    with pytest.raises(ValueError, match="unknown backend 'vllm'"):
        choice.parse("vllm")
    assert parse_backends("torch,llamacpp") == ["torch", "llamacpp"]
    for bad in ("torch,torch", "auto,torch", "onnx"):
        with pytest.raises(ConfigError, match="--backend"):
            parse_backends(bad)


def test_the_faster_end_to_end_plain_decoding_wins_and_a_tie_goes_to_torch():
    fast = {"prefill_ms": 900, "step_ms": 40, "tokens_per_s": 20.0}
    slow = {"prefill_ms": 3000, "step_ms": 100, "tokens_per_s": 8.0}
    assert choice.pick({"torch": slow, "llamacpp": fast}) == "llamacpp"
    assert choice.pick({"torch": fast, "llamacpp": slow}) == "torch"
    assert choice.pick({"torch": fast, "llamacpp": dict(fast)}) == "torch"  # torch offers every method
    reason = choice.reason_of({"torch": slow, "llamacpp": fast}, "llamacpp")
    assert reason.startswith("auto: llama.cpp") and "20.0 tok/s" in reason and "8.0 tok/s" in reason


def test_rules_that_need_no_measurement():
    assert choice.rule("qwen2.5-coder-1.5b", "cuda").backend == "torch"  # a GPU: the llama.cpp build is CPU-only
    assert "embedded GGUF" in choice.rule("/some/local/dir", "cpu").reason
    r = choice.rule("qwen2.5-coder-1.5b", "cpu", "int8")
    assert r.backend == "torch" and "--target-repr int8" in r.reason
    if not choice.llamacpp.available():
        assert "pip install -r requirements-llamacpp.txt" in choice.rule("qwen2.5-coder-1.5b", "cpu").reason


def test_plain_speed_is_measured_on_a_real_model():
    lm = tiny_model(seed=0, vocab_size=300)
    m = choice.plain_speed(lm)
    assert m["prefill_ms"] > 0 and m["step_ms"] > 0
    expected = choice.REFERENCE_NEW / ((m["prefill_ms"] + choice.REFERENCE_NEW * m["step_ms"]) / 1e3)
    assert m["tokens_per_s"] == pytest.approx(expected, rel=0.01)


def test_the_choice_is_measured_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    """Two tiny models stand in for the two backends' targets (the decision logic and its cache are under test here;
    tests/test_llamacpp.py runs auto on the real pair)."""
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    monkeypatch.setattr(choice, "rule", lambda *a: None)
    calls = []
    small, large = tiny_model(seed=0, vocab_size=300), tiny_model(seed=0, vocab_size=300, num_layers=16, hidden_size=256)
    loaders = {"torch": lambda: calls.append("torch") or large, "llamacpp": lambda: calls.append("llamacpp") or small}
    first = choice.choose("qwen2.5-coder-1.5b", loaders, say=lambda m: None)
    assert not first.cached and set(first.measured) == {"torch", "llamacpp"} and calls == ["torch", "llamacpp"]
    assert first.backend == choice.pick(first.measured)
    again = choice.choose("qwen2.5-coder-1.5b", loaders, say=lambda m: None)
    assert again.cached and again.backend == first.backend and calls == ["torch", "llamacpp"]
    path = next((tmp_path / "backend-choice").glob("*.json"))
    path.write_text("{not json")
    said = []
    third = choice.choose("qwen2.5-coder-1.5b", loaders, say=said.append)
    assert not third.cached and any("unreadable" in s for s in said)
    assert json.loads(path.read_text())["backend"] == third.backend
    refreshed = choice.choose("qwen2.5-coder-1.5b", loaders, refresh=True, say=lambda m: None)
    assert not refreshed.cached and len(calls) == 6


def test_the_bench_across_backends_names_the_fastest_plain_decoding():
    from specdec_core.cli import fastest_lines

    def row(method, tps, speedup=None, peer=False):
        return {"method": method, "end_to_end_tokens_per_second": tps, "end_to_end_speedup": speedup, "peer": peer}

    results = {"torch": {"summary": [row("ar", 7.2, 1.0), row("draft", 9.4, 1.3), row("llamacpp-ar", 20.9, peer=True)]},
               "llamacpp": {"summary": [row("ar", 18.2, 1.0), row("draft", 18.2, 1.0), row("llamacpp-ar", 21.9, 1.2,
                                                                                           peer=True)]}}
    lines = fastest_lines(results)
    assert lines[0] == "fastest plain decoding: llamacpp-ar on llamacpp, 21.90 tok/s end to end"
    assert lines[1].startswith("best on torch: draft 9.40 tok/s = 0.43× the fastest plain decoding (1.30×")
    assert lines[2].startswith("best on llamacpp: draft 18.20 tok/s = 0.83×")
    assert fastest_lines({"torch": {"summary": [row("draft", 5.0, 1.1)]}}) == []  # no plain decoding ran
