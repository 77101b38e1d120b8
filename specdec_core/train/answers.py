"""The target's own answers, as training text for draft heads: `python -m specdec_core.train.answers`.

A draft head is judged on what the target generates, so it learns best from that (EAGLE and Medusa-2 train on the
target's own answers: self-distillation). Prompts are made here from what this machine has, never from HumanEval or
the bench suites:
- `code`: a function stub in HumanEval's shape (signature + docstring) of a public function of Python's standard
  library, for the target to complete (functions named like a HumanEval entry point are left out);
- `chat` (chat template): explain a standard-library module or function, write a function from a docstring's first
  line, summarise or translate a paragraph of an installed package's documentation, a small arithmetic word problem.

Answers are greedy, up to `--max-new-tokens`, generated in batches of `--batch` left-padded prompts by the target in
the given representation (int8 weight-only by default, what the app runs on a CPU) through transformers' `generate`:
batching several prompts costs little more than one on a CPU, so this is several times faster than one at a time.
A batched forward is not bit-exact with the app's engine; the text is training data, not a reference.
One JSON line per prompt, {id, kind, text, answer, new_tokens}; a rerun skips the ids already in the file (resumable).
"""
from __future__ import annotations

import argparse
import ast
import itertools
import json
import random
import re
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from specdec_core.backends.models import load_model
from specdec_core.backends.quantize import int8_weight_only
from specdec_core.backends.representation import DTYPES
from specdec_core.settings import answers_path
from specdec_core.train.corpus import docs_files, humaneval_markers, records


def default_path(target: str) -> Path:
    return answers_path(target)


TRANSLATE_TO = ("French", "German", "Spanish", "Italian", "Portuguese")


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str  # "code" (complete the stub) or "chat" (the chat template goes around it)
    text: str


def _stdlib_modules() -> list[tuple[str, ast.Module]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            out.append((path.stem, ast.parse(path.read_text(errors="replace"))))
        except (SyntaxError, ValueError, OSError):
            continue
    return out


def _functions(modules, markers: list[str]):
    """(module, FunctionDef) for public top-level functions with a docstring of 1-12 lines."""
    for name, tree in modules:
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc.splitlines()) <= 12 and not any(f"def {node.name}(" == m for m in markers):
                yield name, node, doc


def code_stub(node: ast.FunctionDef, doc: str) -> str:
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    body = "\n    ".join(doc.splitlines())
    return f'def {node.name}({ast.unparse(node.args)}){returns}:\n    """{body}\n    """\n'


def _paragraphs(files: list[Path]):
    for path in files:
        text = path.read_text(errors="replace")
        for para in re.split(r"\n\s*\n", text):
            para = " ".join(para.split())
            if 300 <= len(para) <= 1200 and sum(c.isalpha() for c in para) > 0.7 * len(para):
                yield path, para


def _word_problems(rng: random.Random):
    templates = (
        "A shop sells pens at {a} cents each. How much do {b} pens cost in dollars? Show your steps.",
        "A train travels {a} km in {b} hours. What is its average speed? Explain briefly.",
        "Tom has {a} apples and gives {b} to each of his {c} friends. How many are left? Think step by step.",
        "A rectangle is {a} cm by {b} cm. What are its area and perimeter?",
        "What is {a} percent of {b}? Show the calculation.",
        "A recipe needs {a} g of flour for {c} people. How much flour for {b} people?",
    )
    for i in itertools.count():
        a, b, c = rng.randint(2, 90), rng.randint(2, 40), rng.randint(2, 9)
        yield f"math:{i}", templates[i % len(templates)].format(a=a, b=b, c=c)


def prompts(seed: int = 0) -> list[Prompt]:
    """Every prompt, kinds interleaved (any prefix of the list is a mix), in a fixed order."""
    rng = random.Random(seed)
    markers = humaneval_markers()
    modules = _stdlib_modules()
    funcs = list(_functions(modules, markers))
    rng.shuffle(funcs)
    code = [Prompt(f"code:{m}.{n.name}", "code", code_stub(n, d)) for m, n, d in funcs]
    write = [Prompt(f"write:{m}.{n.name}", "chat", f"Write a Python function that does this: {d.splitlines()[0]}")
             for m, n, d in funcs[::3] if re.match(r"[A-Z][a-z]+ \w+ .{10,}", d.splitlines()[0])]
    explain = [Prompt(f"explain:{m}", "chat", f"Explain what Python's `{m}` module is for, with a short example.")
               for m, _ in modules]
    rng.shuffle(explain)
    what = [Prompt(f"what:{m}.{n.name}", "chat", f"What does `{m}.{n.name}` do? Answer in two or three sentences.")
            for m, n, _ in funcs[1::3]]
    paras = list(_paragraphs(docs_files(markers)))
    rng.shuffle(paras)
    summarise = [Prompt(f"summarise:{p.parent.name}/{p.name}:{i}", "chat",
                        f"Summarise the following text in two sentences.\n\n{t}") for i, (p, t) in enumerate(paras[::2])]
    translate = [Prompt(f"translate:{p.parent.name}/{p.name}:{i}", "chat",
                        f"Translate into {TRANSLATE_TO[i % len(TRANSLATE_TO)]}:\n\n{t[:400]}")
                 for i, (p, t) in enumerate(paras[1::2])]
    maths = [Prompt(i, "chat", t) for i, t in itertools.islice(_word_problems(rng), 400)]
    # code stubs are what HumanEval asks: every other prompt is one
    chat = [p for group in itertools.zip_longest(write, explain, what, summarise, translate, maths) for p in group if p]
    mixed = [p for pair in itertools.zip_longest(code, chat) for p in pair if p]
    seen: set[str] = set()
    return [p for p in mixed if not (p.id in seen or seen.add(p.id))]


def encode(tokenizer, p: Prompt) -> str:
    """The prompt as the model reads it (chat template around chat prompts), as text."""
    if p.kind == "chat":
        return tokenizer.apply_chat_template([{"role": "user", "content": p.text}], add_generation_prompt=True,
                                             tokenize=False)
    return p.text


def done_ids(path: Path) -> set[str]:
    return {r["id"] for r in records(path) if "id" in r}


def generate(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[tuple[str, int]]:
    """(answer text, new tokens) per prompt text: one greedy batched `generate`, left-padded."""
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, top_p=None, top_k=None,
                             temperature=None, pad_token_id=tokenizer.pad_token_id)
    answers = []
    stop = model.generation_config.eos_token_id
    eos = {tokenizer.eos_token_id, tokenizer.pad_token_id, *(stop if isinstance(stop, list) else [stop])} - {None}
    for row in out[:, batch.input_ids.shape[1]:].tolist():
        n = next((i for i, t in enumerate(row) if t in eos), len(row))
        answers.append((tokenizer.decode(row[:n]), n))
    return answers


def load(target: str, representation: str):
    lm, tokenizer = load_model.__wrapped__(target, "cpu", str(DTYPES[representation]).replace("torch.", ""))
    if representation == "int8":
        lm = int8_weight_only(lm)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm.model, tokenizer


def run(args) -> int:
    model, tokenizer = load(args.target, args.repr)
    out = Path(args.out or default_path(args.target))
    out.parent.mkdir(parents=True, exist_ok=True)
    done = done_ids(out)
    todo = [p for p in prompts(args.seed)[:args.prompts] if p.id not in done]
    print(f"{len(done)} answers in {out}; {len(todo)} to go (batch {args.batch}, up to {args.max_new_tokens} "
          f"tokens, target {args.target} {args.repr})", file=sys.stderr)
    t0, tokens = time.time(), 0
    with out.open("a") as f, tqdm(total=len(todo), unit="answer", disable=args.no_progress) as bar:
        for i in range(0, len(todo), args.batch):
            group = todo[i:i + args.batch]
            texts = [encode(tokenizer, p) for p in group]
            for p, text, (answer, n) in zip(group, texts, generate(model, tokenizer, texts, args.max_new_tokens)):
                f.write(json.dumps({"id": p.id, "kind": p.kind, "text": text, "answer": answer,
                                    "new_tokens": n}) + "\n")
                tokens += n
            f.flush()
            bar.update(len(group))
            bar.set_postfix(tok_s=f"{tokens / (time.time() - t0):.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="qwen2.5-coder-1.5b")
    p.add_argument("--repr", default="int8", choices=("int8", "bf16", "fp32"))
    p.add_argument("--out", help="JSON lines (default assets/eagle/answers-TARGET.jsonl, what train_eagle reads)")
    p.add_argument("--prompts", type=int, default=1000, help="the first N prompts of the fixed list")
    p.add_argument("--batch", type=int, default=4, help="prompts per batched generate")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.prompts < 1 or args.batch < 1 or args.max_new_tokens < 1:
        p.error("--prompts, --batch and --max-new-tokens must be at least 1")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
