"""Command line: `python -m specdec_core generate ...` and `python -m specdec_core prepare`.

Arguments are parsed into frozen configs here, at the edge; any problem exits non-zero with a one-line reason."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from .config import (ConfigError, DraftConfig, GenerationConfig, LayerSkipConfig, LookupConfig, METHODS,
                     SamplingConfig, parse_layers, parse_method)
from .models import DEFAULT_DRAFT, DEFAULT_TARGET, EMBEDDED, ModelLoadError, embedded_dir, load_model
from .session import MethodOptions, build_drafter, check_prompt_text, encode_prompt, eos_token_ids, run


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage too; keep it short)
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m specdec_core", description="Exact speculative decoding.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    gen = sub.add_parser("generate", help="generate text with one method and print it (or --json)")
    src = gen.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    gen.add_argument("--method", default="draft", help=f"one of {', '.join(METHODS)} (default draft)")
    gen.add_argument("--max-new-tokens", type=int, default=128)
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--num-draft-tokens", type=int, default=DraftConfig.num_draft_tokens)
    gen.add_argument("--adaptive", action="store_true", help="+2/-1 draft length and stop below confidence")
    gen.add_argument("--confidence-threshold", type=float, default=DraftConfig.confidence_threshold)
    gen.add_argument("--ngram-size", type=int, default=LookupConfig.max_ngram_size, help="prompt lookup n-gram")
    gen.add_argument("--skip-layers", help="layer-skip drafter: layers to skip, e.g. '8-19' (default: a built-in)")
    gen.add_argument("--target", default=DEFAULT_TARGET, help="embedded name, local dir or Hub id")
    gen.add_argument("--draft", default=DEFAULT_DRAFT, help="draft model for --method draft")
    gen.add_argument("--device", help="cpu, cuda, ... (default: automatic)")
    gen.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], help="(default: automatic)")
    gen.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    gen.add_argument("--json", action="store_true", help="print one JSON object: text, token_ids, rounds, stats")
    sub.add_parser("prepare", help="convert the embedded models into the cache now")
    return parser


def read_prompt(args) -> str:
    if args.prompt is not None:
        return args.prompt
    try:
        return args.prompt_file.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read --prompt-file: {e.strerror}: {args.prompt_file}") from None


def cmd_generate(args) -> int:
    method = parse_method(args.method)
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        sampling=SamplingConfig(args.temperature, args.top_k, args.top_p),
        draft=DraftConfig(args.num_draft_tokens, args.adaptive, args.confidence_threshold),
        seed=args.seed,
    )
    options = MethodOptions(
        LookupConfig(max_ngram_size=args.ngram_size),
        LayerSkipConfig(parse_layers(args.skip_layers) if args.skip_layers else None),
    )
    text = check_prompt_text(read_prompt(args))  # before the slow model load
    target, tokenizer = load_model(args.target, args.device, args.dtype)
    draft = load_model(args.draft, args.device, args.dtype)[0] if method == "draft" else None
    prompt_ids = encode_prompt(tokenizer, text, chat=args.chat)
    from .engine import SpeculativeEngine

    engine = SpeculativeEngine(target, build_drafter(method, target, draft, options), eos_token_ids(tokenizer, target))
    result = run(engine, method, prompt_ids, config)
    out_text = tokenizer.decode(result.token_ids, skip_special_tokens=True)
    if args.json:
        print(json.dumps({
            "method": method,
            "text": out_text,
            "token_ids": result.token_ids,
            "rounds": [r.to_dict() for r in result.rounds],
            "stats": result.stats.to_dict(),
            "config": asdict(config),
        }))
    else:
        s = result.stats
        alpha = "n/a" if s.acceptance_rate is None else f"{s.acceptance_rate:.2f}"
        print(out_text)
        print(f"\n[{method}] {s.new_tokens} tokens in {s.wall_seconds:.2f}s ({s.tokens_per_second:.2f} tok/s decoding), "
              f"alpha {alpha}, tau {s.mean_tokens_per_round:.2f}, {s.target_forwards} target forwards, "
              f"draft {s.draft_seconds:.2f}s / verify {s.verify_seconds:.2f}s / prompt {s.prefill_seconds:.2f}s",
              file=sys.stderr)
    return 0


def cmd_prepare(args) -> int:
    for name in EMBEDDED:
        print(f"{name}: {embedded_dir(name)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return {"generate": cmd_generate, "prepare": cmd_prepare}[args.command](args)
    except (ConfigError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
