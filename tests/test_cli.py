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
])
def test_bad_arguments_exit_nonzero_with_one_line(args, reason):
    proc = cli(*args)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and reason in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.embedded
def test_generate_json_on_embedded_pair():
    proc = cli("generate", "--method", "draft", "--prompt", "def add(a, b):\n", "--max-new-tokens", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"text", "token_ids", "rounds", "stats"}
    assert len(out["token_ids"]) == 8 == sum(len(r["emitted"]) for r in out["rounds"])
    assert "return" in out["text"]
    stats = out["stats"]
    for key in ("tokens_per_second", "acceptance_rate", "mean_tokens_per_round", "target_forwards", "wall_seconds"):
        assert key in stats
    assert stats["target_forwards"] == len(out["rounds"])
