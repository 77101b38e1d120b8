"""Writes assets/bench/longctx.jsonl: retrieval-augmented questions and summaries over long contexts (about 1 000 to
2 000 tokens), the shape of Spec-Bench's rag and summarization prompts, whose long caches make every verify row's
attention cost more. The passages are Python's own standard-library documentation (pydoc's plain-text rendering of
this interpreter's modules), so the file is rebuilt offline, identically for one Python version.

    python docs/scripts/make_longctx.py"""
import json
import pydoc
import re
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "assets" / "bench" / "longctx.jsonl"
CHARS = (4000, 5500, 7000)  # context sizes, cycled: about 1 000, 1 400 and 1 800 tokens

RAG = [  # (modules whose docs are the retrieved passages, question)
    (("textwrap", "shlex"), "How do I remove the common leading whitespace from every line of a string, and how do I "
                            "split a shell command line into arguments?"),
    (("bisect", "heapq"), "Which function gives me the n smallest items of an iterable, and how do I insert into a "
                          "sorted list while keeping it sorted?"),
    (("fnmatch", "glob"), "How do I find all files matching a pattern recursively, and is fnmatch case-sensitive?"),
    (("base64", "binascii"), "How do I encode bytes as URL-safe base64, and what does b64decode do with invalid "
                             "characters by default?"),
    (("secrets", "random"), "Which module should I use to generate a password-reset token, and why not random?"),
    (("statistics",), "What is the difference between median_low, median_high and median, and which one returns "
                      "a value that is in the data?"),
]
SUMMARY = ["json", "string", "calendar", "colorsys", "difflib", "zipfile"]


def passage(modules, chars):
    text = "\n\n".join(pydoc.render_doc(m, "%s", renderer=pydoc.plaintext) for m in modules)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text[:chars].rsplit("\n", 1)[0]


def main():
    rows = []
    for i, (modules, question) in enumerate(RAG, 1):
        context = passage(modules, CHARS[i % len(CHARS)])
        rows.append({"id": f"long-rag-{i}", "category": "rag", "chat": True,
                     "prompt": f"Answer the question using only the documentation below.\n\n{context}\n\n"
                               f"Question: {question}"})
    for i, module in enumerate(SUMMARY, 1):
        context = passage((module,), CHARS[i % len(CHARS)])
        rows.append({"id": f"long-summary-{i}", "category": "summarisation", "chat": True,
                     "prompt": f"Summarise the following documentation in one paragraph.\n\n{context}"})
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} prompts to {OUT}")


if __name__ == "__main__":
    main()
