"""The command line: bad arguments exit non-zero with a one-line reason; --json prints one object."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdec_core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("args, reason", [
    (["generate", "--prompt", ""], "prompt is empty"),
    (["generate", "--prompt", "   "], "prompt is empty"),
    (["generate", "--prompt", "x", "--max-new-tokens", "0"], "max_new_tokens"),
    (["generate", "--prompt", "x", "--max-new-tokens", "100000000"], "max_new_tokens"),
    (["generate", "--prompt", "x", "--temperature", "-0.5"], "temperature"),
    (["generate", "--prompt", "x", "--top-p", "1.5"], "top_p"),
    (["generate", "--prompt", "x", "--num-draft-tokens", "-2"], "num_draft_tokens"),
    (["generate", "--prompt", "x", "--method", "beam"], "unknown method"),
    (["generate", "--prompt", "x", "--skip-layers", "a-b"], "layer list"),
    (["generate", "--prompt", "x", "--max-new-tokens", "ten"], "invalid int"),
    (["generate"], "required"),
    (["generate", "--prompt-file", "/does/not/exist"], "cannot read"),
    (["generate", "--prompt", "x", "--target", "/does/not/exist"], "cannot load model"),
    (["generate", "--prompt", "x", "--tree-nodes", "0"], "tree_nodes"),
    (["generate", "--prompt", "x", "--threads", "0"], "threads"),
    (["bench", "--suite", "humaneval", "--methods", "draft,beam"], "unknown method"),
    (["bench", "--suite", "humaneval", "--limit", "0"], "limit"),
    (["bench", "--prompts", "assets/bench/summarise.jsonl", "--limit", "0"], "limit"),
    (["bench", "--prompts", "/does/not/exist.jsonl"], "cannot read --prompts"),
    (["bench"], "required"),
    (["bench", "--suite", "humaneval", "--repeats", "0"], "repeats"),
    (["generate", "--prompt", "x", "--target-repr", "int4"], "this machine offers auto, bf16, fp32, int8"),
    (["generate", "--prompt", "x", "--target-repr", "fp16", "--device", "cpu"], "not supported on cpu"),
    (["generate", "--prompt", "x", "--target-repr", "int8", "--dtype", "float32"], "contradicts"),
    (["bench", "--suite", "chat", "--check-exact", "0"], "check-exact"),
    (["bench", "--suite", "chat", "--check-exact", "2", "--temperature", "0.7"], "greedy"),
    (["profile", "--target-repr", "int4"], "this machine offers"),
    (["selfcheck", "--temperature", "0.7"], "greedy"),
    (["selfcheck", "--target-repr", "int4"], "this machine offers"),
    (["whatif", "--method", "ar"], "pick a speculative method"),
    (["whatif", "--method", "beam"], "unknown method"),
    (["whatif", "--from-trace", "/does/not/exist.json"], "cannot read a race trace"),
    (["whatif", "--context", "0"], "--context"),
    (["generate", "--prompt", "x", "--backend", "onnx"], "unknown backend 'onnx'"),
    (["generate", "--prompt", "x", "--backend", "torch,llamacpp"], "a list, e.g. torch,llamacpp, is for bench"),
    (["bench", "--suite", "humaneval", "--backend", "torch,torch"], "distinct backends"),
])
def test_bad_arguments_exit_nonzero_with_one_line(args, reason):
    proc = cli(*args)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and reason in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_cost_aware_length_is_the_default_and_a_fixed_one_is_asked_for():
    from specdec_core.cli import build_parser, parse_run_args

    def draft(*flags):
        args = build_parser().parse_args(["generate", "--prompt", "x", *flags])
        return parse_run_args(args)[0].draft

    assert draft().cost_aware and draft().label == "auto" and draft("--num-draft-tokens", "auto").cost_aware
    assert (draft("--num-draft-tokens", "3").label, draft("--num-draft-tokens", "3").kind) == (3, "fixed")
    adaptive = draft("--adaptive")  # adapts from the default fixed length
    assert adaptive.kind == "adaptive" and adaptive.num_draft_tokens == 5 and not adaptive.cost_aware
    for command in ("bench", "selfcheck"):
        extra = ["--suite", "humaneval"] if command == "bench" else []
        args = build_parser().parse_args([command, *extra])
        assert parse_run_args(args)[0].draft.cost_aware


@pytest.mark.embedded
def test_generate_json_on_embedded_pair():
    proc = cli("generate", "--method", "draft", "--prompt", "def add(a, b):\n", "--max-new-tokens", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"text", "token_ids", "rounds", "stats", "row"}
    assert out["num_draft_tokens"] == "auto" and out["draft_length"] == "cost-aware"  # the default, as on the page
    assert out["row"]["method"] == "draft" and out["row"]["tokens"] == 8 and out["row"]["decode_speedup"] is None
    assert len(out["token_ids"]) == 8 == sum(len(r["emitted"]) for r in out["rounds"])
    assert "return" in out["text"]
    stats = out["stats"]
    for key in ("tokens_per_second", "acceptance_rate", "mean_tokens_per_round", "target_forwards", "wall_seconds"):
        assert key in stats
    assert stats["target_forwards"] == len(out["rounds"])


@pytest.mark.embedded
def test_whatif_json_has_this_machine_first_and_the_catalogue(tmp_path):
    out = tmp_path / "whatif.json"
    proc = cli("whatif", "--json", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = report["devices"]
    assert rows[0]["kind"] == "measured" and len(rows) >= 7 and all(r["kind"] == "roofline" for r in rows[1:])
    assert set(report["this_machine"]["measured_t_ratio"]) <= {"2", "4", "8"}
    assert report["backend"] in ("torch", "llamacpp") and "| NVIDIA H100 SXM | roofline |" in proc.stdout
