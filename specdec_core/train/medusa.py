"""Train Medusa heads by self-distillation: `python -m specdec_core.train.medusa [--target NAME] [--out PATH]`.

1. Corpus: Python's standard-library sources + the license texts in /usr/share/common-licenses (code + prose, all on
   the machine), files shuffled with a fixed seed, files containing a HumanEval function excluded; cut into chunks,
   every 10th chunk held out.
2. Features: the frozen target runs once over each chunk; its final hidden states and its own argmax predictions are
   saved per chunk (resumable: finished chunks are skipped).
3. Training: head k at position t learns the target's prediction at t+k+1 (the token k+2 places ahead), cross-entropy
   over the most frequent predicted tokens (the shipped vocabulary subset). Checkpointed per epoch (resumable).
4. Report: per-head top-1 agreement with the target on the held-out chunks; weights + report written to --out.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from specdec_core.train.corpus import corpus_chunks
from specdec_core.methods.medusa import MedusaHeads, default_heads_path
from specdec_core.core.kv import new_cache
from specdec_core.backends.models import cache_root, load_model
from specdec_core.settings import DEFAULT_TARGET


def extract(target, chunks: list[list[int]], workdir: Path, split: str) -> list[Path]:
    """Hidden states + the target's argmax per position, one file per chunk (skips finished ones)."""
    workdir.mkdir(parents=True, exist_ok=True)
    paths = [workdir / f"{split}-{i:05d}.pt" for i in range(len(chunks))]
    todo = [(p, c) for p, c in zip(paths, chunks) if not p.exists()]
    for path, chunk in tqdm(todo, desc=f"target forwards ({split})", unit="chunk", disable=not todo):
        out = target.forward(chunk, new_cache())
        tmp = path.with_suffix(".tmp")
        torch.save({"hidden": out.hidden.to(torch.bfloat16).clone(), "labels": out.logits.argmax(-1).int()}, tmp)
        tmp.rename(path)
    return paths


def load_features(paths: list[Path], num_heads: int):
    """X [N, H] bf16 hidden states; Y [N, K] the target's token k+2 places ahead (-1 past a chunk's end)."""
    xs, ys = [], []
    for path in paths:
        d = torch.load(path)
        h, labels = d["hidden"], d["labels"].long()
        n = labels.shape[0]
        y = torch.full((n, num_heads), -1, dtype=torch.long)
        for k in range(num_heads):
            y[: n - k - 1, k] = labels[k + 1:]
        xs.append(h)
        ys.append(y)
    return torch.cat(xs), torch.cat(ys)


def agreement(heads: MedusaHeads, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, batch: int = 512) -> dict:
    """Per-head top-1 agreement with the target and the chance that heads 1..k all agree (a chain's acceptance)."""
    valid_rows = (y >= 0).all(dim=1)
    parts = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = heads(x[i:i + batch].float(), w)
            guess = heads.vocab_ids[logits.argmax(-1)].T  # [B, K]
            parts.append(guess == y[i:i + batch])
    correct = torch.cat(parts)
    per_head = [float(correct[y[:, k] >= 0, k].float().mean()) for k in range(heads.num_heads)]
    chain = [float(correct[valid_rows, : k + 1].all(dim=1).float().mean()) for k in range(heads.num_heads)]
    return {"top1_agreement": per_head, "chain_all_correct": chain, "positions": int(valid_rows.sum())}


def train(args) -> dict:
    started = time.time()
    target, tokenizer = load_model(args.target, None, args.dtype)
    work = Path(args.workdir or cache_root() / "medusa-work" / args.target)
    train_chunks, heldout_chunks = corpus_chunks(tokenizer, args.chunk_tokens, args.chunks)
    train_paths = extract(target, train_chunks, work, "train")
    heldout_paths = extract(target, heldout_chunks, work, "heldout")
    x, y = load_features(train_paths, args.heads)
    xh, yh = load_features(heldout_paths, args.heads)
    counts = torch.bincount(y[y >= 0], minlength=target.vocab_size)
    vocab_ids = torch.sort(torch.argsort(counts, descending=True)[: args.vocab]).values
    vocab_ids = vocab_ids[counts[vocab_ids] > 0]
    index = torch.full((target.vocab_size,), -100, dtype=torch.long)
    index[vocab_ids] = torch.arange(len(vocab_ids))
    y_sub = torch.where(y >= 0, index[y.clamp(min=0)], torch.full_like(y, -100))
    w = target.lm_head_rows(vocab_ids)[0].float()
    hidden_size = x.shape[1]

    heads = MedusaHeads(hidden_size, args.heads, vocab_ids)
    opt = torch.optim.AdamW(heads.parameters(), lr=args.lr, weight_decay=0.0)
    state_path = work / f"train-state-{args.heads}h.pt"
    epoch0 = 0
    if state_path.exists():
        state = torch.load(state_path)
        heads.load_state_dict(state["heads"])
        opt.load_state_dict(state["opt"])
        epoch0 = state["epoch"]
        print(f"resuming after epoch {epoch0}", file=sys.stderr)
    before = agreement(heads, w, xh, yh) if epoch0 == 0 else None
    weights = torch.tensor([args.decay ** k for k in range(args.heads)])
    for epoch in range(epoch0, args.epochs):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))  # same order when resumed
        bar = tqdm(range(0, len(x), args.batch), desc=f"epoch {epoch + 1}/{args.epochs}", unit="batch")
        for i in bar:
            idx = order[i:i + args.batch]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = heads(x[idx].float(), w)
            losses = torch.stack([
                torch.nn.functional.cross_entropy(logits[k].float(), y_sub[idx, k], ignore_index=-100)
                for k in range(args.heads)
            ])
            loss = (losses * weights).sum() / weights.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.set_postfix(loss=f"{loss.item():.3f}", head1=f"{losses[0].item():.2f}")
        torch.save({"heads": heads.state_dict(), "opt": opt.state_dict(), "epoch": epoch + 1}, state_path)
    after = agreement(heads, w, xh, yh)
    report = {
        "target": args.target,
        "num_heads": args.heads,
        "vocab_subset": len(vocab_ids),
        "train_tokens": int(len(x)),
        "heldout_tokens": int(len(xh)),
        "epochs": args.epochs,
        "lr": args.lr,
        "corpus": "Python standard library sources + /usr/share/common-licenses (HumanEval functions excluded)",
        "heldout_before_training": before,
        "heldout": after,
        "train_seconds_this_run": round(time.time() - started, 1),
        "command": "python -m specdec_core.train.medusa " + " ".join(sys.argv[1:]),
    }
    out = Path(args.out or default_heads_path(args.target))
    heads.save(out, report)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec_core.train.medusa", description=__doc__.split("\n")[0])
    parser.add_argument("--target", default=DEFAULT_TARGET)
    parser.add_argument("--out", help="weights file (.safetensors; a .json report is written next to it)")
    parser.add_argument("--workdir", help="features and checkpoints (default ~/.cache/specdec/medusa-work/TARGET)")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=200, help="corpus chunks (every 10th held out)")
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=16384, help="vocabulary subset: most frequent target tokens")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--decay", type=float, default=0.8, help="loss weight of head k is decay**k")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default=None)
    args = parser.parse_args(argv)
    if not (1 <= args.heads <= 8 and args.chunks >= 10 and args.chunk_tokens >= 16 and args.epochs >= 1):
        parser.error("need 1 <= heads <= 8, chunks >= 10, chunk-tokens >= 16, epochs >= 1")
    report = train(args)
    print(json.dumps(report["heldout"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
