"""The roofline (backends/roofline.py) and `whatif` (bench/whatif.py): the model's arithmetic from stated inputs,
the catalogue's sources, this machine's calibration, the report's shape, and the CLI's bad input."""
from __future__ import annotations

import json

import pytest

from specdec_core.backends import roofline
from specdec_core.backends.profile import Profile
from specdec_core.bench import whatif
from specdec_core.methods.registry import REGISTRY

# Qwen2.5-Coder-1.5B-Instruct's and 0.5B's published config.json (the embedded pair)
TARGET = roofline.Shape.from_config({"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                                     "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936})
DRAFT = roofline.Shape.from_config({"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                                    "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936})

# A profile as `python -m specdec_core profile` wrote it on a 2-core Zen 4 (int8 weight-only target, AVX512): the
# inputs of the arithmetic under test, not a measurement made by this test.
ZEN4 = Profile(device="cpu (x86_64, 2 threads)", isa="AVX512", torch="2.13.0+cpu", model="qwen2.5-coder-1.5b",
               target_repr="int8 weight-only", draft_repr="int8", methods=sorted(REGISTRY),
               target_ms={1: 99.5, 2: 112.8, 3: 122.2, 4: 141.1, 6: 232.9, 8: 269.5, 11: 391.2, 16: 470.4, 17: 550.7},
               draft_ms={"draft": 34.64, "lookup": 0.01, "layerskip": 84.29, "medusa": 0.64, "medusa-tree": 0.6,
                         "eagle": 5.98, "eagle-tree": 6.76},
               prefill_tokens_per_s=46.2, bandwidth_gb_s=42.36, utilization=0.367, target_bytes=1545453824)


def test_the_shape_counts_the_published_parameters():
    assert 1.50e9 < TARGET.params < 1.56e9 and 0.45e9 < DRAFT.params < 0.50e9  # lm_head in, embeddings out
    assert TARGET.kv_bytes(1) == 2 * 28 * 2 * 128 * 2
    assert TARGET.flops(2, 0) > 2 * TARGET.flops(1, 0) * 0.99


def test_the_catalogue_states_its_sources_and_marks_estimates():
    assert len(roofline.CATALOGUE) >= 6
    for d in roofline.CATALOGUE:
        assert d.bandwidth_gb_s > 0 and d.peak_tflops > 0 and len(d.source) > 20
        assert d.estimate == ("estimate" in d.source or "estimated" in d.source)


def test_an_h100_is_bandwidth_bound_and_a_laptop_cpu_is_not():
    h100 = next(d for d in roofline.CATALOGUE if "H100" in d.name)
    laptop = next(d for d in roofline.CATALOGUE if "Laptop" in d.name)
    assert roofline.t_ratio(h100, TARGET)["8"] <= 1.1
    assert roofline.t_ratio(laptop, TARGET)["8"] > 1.5
    assert roofline.t_ms(h100, TARGET, 1, context=4000) > roofline.t_ms(h100, TARGET, 1, context=100)  # KV read


def test_this_machine_is_calibrated_to_its_measured_step():
    here = roofline.this_machine(ZEN4, TARGET)
    assert here.kind == "measured" and here.bandwidth_gb_s == pytest.approx(42.36)
    assert roofline.t_ms(here, TARGET, 1) == pytest.approx(ZEN4.T(1), rel=1e-6)
    assert here.peak_tflops == pytest.approx(2 * TARGET.params * 46.2 / 1e12, rel=1e-3)


# The same Zen 4 with llama.cpp's Q4_K_M target, as `profile --backend llamacpp` wrote it (2026-12-08): T(1..3) verify
# forwards, T(4) and T(8) timed past its exact batch, and the matmul probe's rates per row count.
ZEN4_LLAMACPP = Profile(device="cpu (x86_64, 2 threads)", isa="AVX512", torch="2.13.0+cpu", model="qwen2.5-coder-1.5b",
                        target_repr="GGUF Q4_K_M · llama.cpp", draft_repr="GGUF", methods=sorted(REGISTRY),
                        target_ms={1: 32.7, 2: 61.9, 3: 86.0}, draft_ms={"draft": 12.0, "lookup": 0.01},
                        prefill_tokens_per_s=87.3, bandwidth_gb_s=52.2, utilization=0.7, target_bytes=1117320768,
                        kernel_tflops={1: 0.097, 2: 0.106, 3: 0.109, 4: 0.129, 8: 0.119},
                        unverified_ms={4: 106.0, 8: 238.1})


def test_the_matmul_probe_sets_the_compute_term_per_row_count():
    here = roofline.this_machine(ZEN4_LLAMACPP, TARGET)
    assert here.peak_by_rows == ZEN4_LLAMACPP.kernel_tflops and "matmul probe" in here.source
    assert here.peak(1) == 0.097 and here.peak(6) == 0.129 and here.peak(16) == 0.119
    ratio = roofline.t_ratio(here, TARGET, (2, 4, 8))
    # compute bound from one row (3.09 GFLOP at 0.097 TFLOPS = 32 ms > 1.12 GB / 52.2 GB/s = 21 ms): a row costs a step
    assert ratio["2"] == pytest.approx(2 * 0.097 / 0.106, rel=0.02)
    assert ratio["8"] == pytest.approx(8 * 0.097 / 0.119, rel=0.02)
    # the prompt pass's rate, which runs another kernel, would have called the same machine bandwidth bound
    no_probe = roofline.this_machine(Profile(**{**ZEN4_LLAMACPP.to_dict(), "kernel_tflops": {}}), TARGET)
    assert roofline.t_ratio(no_probe, TARGET, (2,))["2"] < 1.2


def test_whatif_checks_the_roofline_where_the_profile_timed_past_the_exact_batch():
    report = whatif.whatif(ZEN4_LLAMACPP, TARGET, DRAFT, whatif.from_priors("code"), ["draft"], max_verify_tokens=3)
    here = report["this_machine"]
    assert here["measured_t_ratio"] == {"2": round(61.9 / 32.7, 3), "4": round(106.0 / 32.7, 3),
                                        "8": round(238.1 / 32.7, 3)}
    assert set(here["error_pct"]) == {"2", "4", "8"} and here["probe_tflops"]["4"] == 0.129
    assert report["devices"][0]["t_ratio"] == here["measured_t_ratio"]
    assert report["devices"][0]["best_gamma"]["draft"] <= 2  # never past the exact batch
    # the page's "a forward of 6 tokens costs" reads the timed curve; verification plans with the verify forwards only
    assert ZEN4_LLAMACPP.timed(6) == pytest.approx((106.0 + 238.1) / 2)
    assert ZEN4_LLAMACPP.T(6) == pytest.approx(86.0 + 3 * (86.0 - 61.9))


def test_best_length_is_plain_decoding_where_nothing_pays():
    flat = lambda n: 10.0  # noqa: E731 - free verification
    steep = lambda n: 10.0 * n  # noqa: E731 - every row a full step
    assert whatif.best([0.9] * 8, flat, 0.0, None)[1] > 5
    assert whatif.best([0.9] * 8, steep, 1.0, None) == (0, 1.0)
    nodes, x = whatif.best([0.8, 0.6], flat, 0.1, tree_nodes=10)
    assert nodes == 10 and x == pytest.approx((1 + 0.8 + 0.8 * 0.6) * 10 / (10 * 0.1 + 10))


def test_the_report_has_this_machine_first_then_the_catalogue():
    report = whatif.whatif(ZEN4, TARGET, DRAFT, whatif.from_priors("code"))
    rows = report["devices"]
    assert rows[0]["kind"] == "measured" and all(r["kind"] == "roofline" for r in rows[1:])
    assert len(rows) == 1 + len(roofline.CATALOGUE)
    for r in rows:
        assert {"name", "kind", "bandwidth_gb_s", "peak_tflops", "source", "t_ratio", "predicted_speedup"} <= set(r)
        assert set(r["t_ratio"]) == {"2", "4", "8"} and r["predicted_speedup"]
        assert all(x >= 1.0 for x in r["predicted_speedup"].values())
    h100 = next(r for r in rows if "H100" in r["name"])
    assert h100["t_ratio"]["8"] <= 1.1 and "bandwidth bound" in h100["why"]
    t = report["this_machine"]
    assert set(t["measured_t_ratio"]) == set(t["roofline_t_ratio"]) == {"2", "4", "8"}
    assert t["measured_t_ratio"]["8"] == pytest.approx(269.5 / 99.5, rel=1e-3)
    json.dumps(report)  # one JSON object


def test_a_trace_carries_its_acceptance_and_a_drafting_nothing_one_is_refused():
    summary = {"method": "draft", "decode_speedup": 1.4, "row": {"per_position": [0.9, 0.8, 0.7]}}
    acc = whatif.from_trace({"summary": summary})
    assert acc.per_position == {"draft": [0.9, 0.8, 0.7]} and acc.measured_speedup == {"draft": 1.4}
    report = whatif.whatif(ZEN4, TARGET, DRAFT, acc, ["draft"])
    assert all(set(r["predicted_speedup"]) == {"draft"} for r in report["devices"])
    with pytest.raises(ValueError, match="drafted nothing"):
        whatif.from_trace({"method": "draft", "row": {"per_position": []}})


def test_a_verify_cap_limits_this_machines_draft_length():
    report = whatif.whatif(ZEN4, TARGET, DRAFT, whatif.from_trace(
        {"method": "lookup", "row": {"per_position": [0.99] * 16}}), ["lookup"], max_verify_tokens=4)
    assert report["devices"][0]["best_gamma"]["lookup"] <= 3
