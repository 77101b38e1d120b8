"""Train an EAGLE head by self-distillation: `python -m specdec_core.train.eagle [--target NAME] [--out PATH]`.

1. Corpus (`corpus.py`): the Medusa heads' (Python's standard-library sources + the license texts on this machine),
   with `--corpus code+docs` also installed packages' documentation, with `--corpus answers` the target's own answers
   first (`self_answers.py`); files with a HumanEval function excluded, nothing from the bench suites; cut into
   chunks, every 10th held out.
2. Features: the frozen target, in the representation the app runs (`--repr auto`), reads each chunk once; its final
   hidden states and its top-16 next-token distribution per position are saved per chunk (resumable: a chunk whose
   file holds the same tokens is skipped). A prompt pass: hundreds of tokens per forward.
3. Training: pair i = (embedding of token i+1, the target's feature after token i) -> the head guesses the feature
   after token i+1; loss SmoothL1(guess, true feature) + --ce-weight (0.1) x cross-entropy of the guess's LM-head
   distribution (over the draft vocabulary: the most frequent target predictions) against the target's. With --ttt, a
   second pass feeds the head its own guesses in place of the true features (training-time test: drafting beyond the
   first token runs on guesses) and adds that pass's loss. Checkpoint every --save-every steps (resumable: rerun the
   same command).
4. Report: held-out agreement with the target's top token, teacher-forced (the first drafted token) and on the head's
   own guess (the second), before and after; the loss curve; weights + report written to --out (+ .json).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from specdec_core.train import answers as self_answers
from specdec_core.train.corpus import KINDS, corpus_chunks
from specdec_core.methods.eagle import EagleHead, default_head_path
from specdec_core.backends.exact import prompt_pass
from specdec_core.core.kv import new_cache
from specdec_core.backends.models import cache_root
from specdec_core.settings import DEFAULT_TARGET
from specdec_core.backends.representation import load_target

CORPUS_SAYS = {
    "code": "Python standard library sources + /usr/share/common-licenses (HumanEval functions excluded)",
    "code+docs": "Python standard library sources + /usr/share/common-licenses + installed packages' documentation "
                 "(HumanEval functions and package excluded)",
    "answers": "the target's own greedy answers to prompts made here (self_answers.py: standard-library function "
               "stubs, explain/summarise/translate/arithmetic chat prompts), then the code+docs corpus",
}
TOP = 16  # the target's distribution is kept as its 16 most probable tokens per position


def cached(path: Path, chunk: list[int]) -> bool:
    """A feature file for exactly these tokens is there (a corpus that changed, e.g. more answers, is re-read)."""
    try:
        return path.exists() and torch.load(path, mmap=True)["tokens"].tolist() == chunk
    except Exception:  # noqa: BLE001 - a cut or corrupt file is extracted again
        return False


def extract(target, chunks: list[list[int]], workdir: Path, split: str) -> list[Path]:
    """Per chunk: token ids, hidden states (bf16), the target's top-16 (ids, probabilities) per position."""
    workdir.mkdir(parents=True, exist_ok=True)
    paths = [workdir / f"{split}-{i:05d}.pt" for i in range(len(chunks))]
    todo = [(p, c) for p, c in zip(paths, chunks) if not cached(p, c)]
    if not todo:
        return paths
    weight, bias = target.lm_head_rows()  # dense in the target's dtype: 2.4x faster than float32 for 256 rows
    for path, chunk in tqdm(todo, desc=f"target forwards ({split})", unit="chunk"):
        with prompt_pass():  # teacher forcing needs no token-count invariance
            out = target.forward(chunk, new_cache(), logits_rows=0)
        logits = (out.hidden.to(weight.dtype) @ weight.T).float() + (bias.float() if bias is not None else 0)
        probs, ids = torch.topk(torch.softmax(logits, -1), TOP, dim=-1)
        tmp = path.with_suffix(".tmp")
        torch.save({"tokens": torch.tensor(chunk, dtype=torch.int32), "hidden": out.hidden.to(torch.bfloat16).clone(),
                    "top_ids": ids.int(), "top_p": probs.half()}, tmp)
        tmp.rename(path)
    return paths


def load(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Stacked chunks: tokens [B, n], hidden [B, n, h], top_ids / top_p [B, n, 16]."""
    parts = [torch.load(p) for p in paths]
    return {k: torch.stack([d[k] for d in parts]) for k in parts[0]}


def draft_vocab(data: dict, size: int, vocab_size: int) -> torch.Tensor:
    """The `size` tokens the target predicts most often (its top-1) in the training chunks, ascending ids."""
    counts = torch.bincount(data["top_ids"][..., 0].reshape(-1).long(), minlength=vocab_size)
    ids = torch.argsort(counts, descending=True)[:size]
    return torch.sort(ids[counts[ids] > 0]).values


def grow_vocab(ids: torch.Tensor, data: dict, size: int, vocab_size: int) -> torch.Tensor:
    """A trained head's draft vocabulary plus this data's `size` most frequent predictions (ascending ids). The
    vocabulary is only an index into the frozen LM head, so it grows with new data and nothing needs retraining."""
    return torch.unique(torch.cat([ids.long(), draft_vocab(data, size, vocab_size)]))


class Batch:
    """Training tensors for chunks `idx`: head inputs and targets, the soft targets mapped into the draft vocab."""

    def __init__(self, data: dict, idx: torch.Tensor, embed, index: torch.Tensor):
        tokens = data["tokens"][idx].long()
        hidden = data["hidden"][idx].float()
        with torch.no_grad():  # the target's embedding stays frozen
            self.embeds = embed(tokens[:, 1:]).float()  # token i+1
        self.features = hidden[:, :-1]  # feature after token i
        self.targets = hidden[:, 1:]  # feature after token i+1 (what the head guesses)
        ids, p = data["top_ids"][idx][:, 1:].long(), data["top_p"][idx][:, 1:].float()
        self.soft_ids = index[ids]  # -1 outside the draft vocabulary
        self.soft_p = torch.where(self.soft_ids >= 0, p, torch.zeros_like(p))
        self.soft_p = self.soft_p / self.soft_p.sum(-1, keepdim=True).clamp(min=1e-9)
        self.top1 = index[ids[..., 0]]  # the target's choice in draft-vocab ids (-1 outside)
        n = self.embeds.shape[1]
        self.positions = torch.arange(n)[None].expand(self.embeds.shape[0], n)


def losses(head: EagleHead, w: torch.Tensor, b: Batch, features: torch.Tensor,
           ce_weight: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, guessed features) for one pass with the given input features."""
    guess = head(b.embeds, features, b.positions)
    feat = torch.nn.functional.smooth_l1_loss(guess, b.targets)
    logp = torch.log_softmax(guess @ w.T, dim=-1)
    picked = logp.gather(-1, b.soft_ids.clamp(min=0))
    ce = -(b.soft_p * picked).sum(-1).mean()
    return feat + ce_weight * ce, guess


@torch.no_grad()
def agreement(head: EagleHead, w: torch.Tensor, data: dict, embed, index: torch.Tensor, batch: int = 8) -> dict:
    """Held-out top-1 agreement with the target (where its choice lies in the draft vocab): on true features (the
    first drafted token of a round) and on the head's own guesses (every later one)."""
    right = [0, 0]
    total = 0
    for i in range(0, data["tokens"].shape[0], batch):
        b = Batch(data, torch.arange(i, min(i + batch, data["tokens"].shape[0])), embed, index)
        g1 = head(b.embeds, b.features, b.positions)
        own = torch.cat([b.features[:, :1], g1[:, :-1]], dim=1)  # the head's guess of each input feature
        g2 = head(b.embeds, own, b.positions)
        valid = b.top1 >= 0
        total += int(valid.sum())
        for j, g in enumerate((g1, g2)):
            right[j] += int(((g @ w.T).argmax(-1) == b.top1)[valid].sum())
    return {"first_token": right[0] / max(total, 1), "own_guess": right[1] / max(total, 1), "positions": total}


def worse(after: dict, before: dict) -> bool:
    """A run made the head worse: lower held-out agreement on its own guesses (what decides τ) or on the first token."""
    return (after["own_guess"], after["first_token"]) < (before["own_guess"], before["first_token"])


def train(args) -> dict:

    started = time.time()
    target, tokenizer = load_target(args.target, None, args.repr)
    work = Path(args.workdir or cache_root() / "eagle-work" / args.target)
    if args.corpus != "code":  # features of another corpus's chunks never mix with these
        work = work / args.corpus
    train_chunks, heldout_chunks = corpus_chunks(tokenizer, args.chunk_tokens, args.chunks,
                                                 f"; target {target.representation}", args.corpus,
                                                 Path(args.answers or self_answers.default_path(args.target)))
    heldout = load(extract(target, heldout_chunks, work, "heldout"))
    data = load(extract(target, train_chunks, work, "train"))
    embed = target.model.get_input_embeddings()
    if args.init:  # go on from a trained head (its width kept): sessions add data and steps
        head = EagleHead.load(Path(args.init), target.config, args.target)
        if head.vocab_ids is not None and args.vocab > len(head.vocab_ids):
            head.vocab_ids = grow_vocab(head.vocab_ids, data, args.vocab, target.vocab_size)
    else:
        head = EagleHead(target.config, args.intermediate, draft_vocab(data, args.vocab, target.vocab_size))
        with torch.no_grad():  # start the fc as "take the feature"
            h = head.config.hidden_size
            head.fc.weight.zero_()
            head.fc.weight[:, h:].copy_(torch.eye(h))
            head.fc.bias.zero_()
    vocab_ids = head.vocab_ids if head.vocab_ids is not None else torch.arange(target.vocab_size)
    index = torch.full((target.vocab_size,), -1, dtype=torch.long)
    index[vocab_ids] = torch.arange(len(vocab_ids))
    w = target.lm_head_rows(vocab_ids)[0].float()
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=0.0)
    steps = args.epochs * math.ceil(len(train_chunks) / args.batch)
    warm = min(50, max(1, steps // 10))
    warm_cos = lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * s / steps))  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warm_cos)
    run = {k: getattr(args, k) for k in ("corpus", "chunks", "chunk_tokens", "vocab", "intermediate", "epochs",
                                         "batch", "lr", "noise", "ttt", "ce_weight", "init")}  # resumes the same run
    if args.corpus == "answers":  # the answers file grows between runs: its content names the run too
        run["data"] = hashlib.sha256(repr(train_chunks).encode()).hexdigest()[:12]
    state_path = work / f"train-state-{hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:12]}.pt"
    step, curve, evals = 0, [], []
    if state_path.exists():
        state = torch.load(state_path)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, curve, evals = state["step"], state["curve"], state["evals"]
        print(f"resuming at step {step}/{steps}", file=sys.stderr)
    if step == 0:
        evals.append({"step": 0, **agreement(head, w, heldout, embed, index)})
    per_epoch = math.ceil(len(train_chunks) / args.batch)
    bar = tqdm(total=steps, initial=step, desc="training", unit="step")
    while step < steps:
        epoch, i = divmod(step, per_epoch)
        order = torch.randperm(len(train_chunks), generator=torch.Generator().manual_seed(epoch))
        b = Batch(data, order[i * args.batch:(i + 1) * args.batch], embed, index)
        noise = torch.empty_like(b.features).uniform_(-args.noise, args.noise)  # EAGLE: robustness to guessed input
        loss, guess = losses(head, w, b, b.features + noise, args.ce_weight)
        if args.ttt:
            own = torch.cat([b.features[:, :1], guess[:, :-1].detach()], dim=1)
            loss = loss + losses(head, w, b, own, args.ce_weight)[0]
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        curve.append([step, round(loss.item(), 4)])
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if step % args.save_every == 0 or step == steps:
            if step % args.eval_every == 0 or step == steps:
                evals.append({"step": step, **agreement(head, w, heldout, embed, index)})
                bar.write(f"step {step}: held-out {evals[-1]}")
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "step": step, "curve": curve, "evals": evals}, state_path)
    bar.close()
    report = {
        "target": args.target, "target_repr": target.representation, "intermediate_size": head.intermediate_size,
        "init": {"file": args.init, "report": head.info} if args.init else None,  # totals over runs add up
        "draft_vocab": len(vocab_ids), "train_tokens": int(data["tokens"].numel()),
        "heldout_tokens": int(heldout["tokens"].numel()), "epochs": args.epochs, "steps": steps, "batch": args.batch,
        "lr": args.lr, "ttt": args.ttt, "noise": args.noise, "ce_weight": args.ce_weight,
        "corpus": CORPUS_SAYS[args.corpus],
        "heldout_before": evals[0], "heldout": evals[-1], "evals": evals, "loss_curve": curve,
        "train_seconds_this_run": round(time.time() - started, 1),
        "command": "python -m specdec_core.train.eagle " + " ".join(sys.argv[1:]),
    }
    out = Path(args.out or default_head_path(args.target))
    if args.init and out.resolve() == Path(args.init).resolve() and worse(evals[-1], evals[0]):
        out = out.with_name(out.stem + "-regressed" + out.suffix)  # never overwrite a head with a worse one
        print(f"held-out agreement fell ({evals[0]} -> {evals[-1]}): {args.init} kept, this run written to {out}",
              file=sys.stderr)
    report["out"] = str(out)
    head.save(out, {k: v for k, v in report.items() if k not in ("loss_curve", "evals")})
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specdec_core.train.eagle", description=__doc__.split("\n")[0])
    p.add_argument("--target", default=DEFAULT_TARGET)
    p.add_argument("--repr", default="auto", help="the target representation the features come from (the app's)")
    p.add_argument("--out", help="weights file (.safetensors; a .json report is written next to it)")
    p.add_argument("--workdir", help="features and checkpoints (default ~/.cache/specdec/eagle-work/TARGET)")
    p.add_argument("--corpus", choices=KINDS, default="code", help="code: Python's standard library + license "
                   "texts; code+docs: with installed packages' documentation woven in (more prose); answers: the "
                   "target's own answers (--answers) first, then code+docs")
    p.add_argument("--answers", help="self_answers' file (default assets/eagle/answers-TARGET.jsonl)")
    p.add_argument("--chunks", type=int, default=300, help="corpus chunks (every 10th held out)")
    p.add_argument("--chunk-tokens", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192, help="draft vocabulary: the target's most frequent predictions "
                   "(with --init: grows a smaller one by this data's most frequent)")
    p.add_argument("--intermediate", type=int, default=4480, help="the head layer's MLP width")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=8, help="chunks per step")
    p.add_argument("--lr", type=float, help="peak learning rate (default 1e-3 for a new head, 3e-4 with --init: "
                   "1e-3 on a trained head undid it here)")
    p.add_argument("--noise", type=float, default=0.05, help="uniform noise on input features while training")
    p.add_argument("--ce-weight", type=float, default=0.1, help="weight of the cross-entropy beside the feature loss")
    p.add_argument("--ttt", action="store_true", help="training-time test: also train on the head's own guesses")
    p.add_argument("--init", help="start from this trained head file (keeps its width)")
    p.add_argument("--save-every", type=int, default=20, help="checkpoint every N steps")
    p.add_argument("--eval-every", type=int, default=100, help="held-out agreement every N steps (at a checkpoint)")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked, with the learning rate's default resolved (it depends on --init)."""
    p = parser()
    args = p.parse_args(argv)
    if args.lr is None:
        args.lr = 3e-4 if args.init else 1e-3
    if not (args.chunks >= 10 and args.chunk_tokens >= 16 and args.epochs >= 1 and args.batch >= 1
            and args.vocab >= 16 and args.intermediate >= 8 and args.lr > 0):
        p.error("need chunks >= 10, chunk-tokens >= 16, epochs >= 1, batch >= 1, vocab >= 16, intermediate >= 8, "
                "lr > 0")
    if args.eval_every % args.save_every:
        p.error("--eval-every must be a multiple of --save-every")
    return args


def main(argv: list[str] | None = None) -> int:
    report = train(parse(argv))
    print(json.dumps({"before": report["heldout_before"], "after": report["heldout"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
