"""Command line: `python -m specdec_core generate | bench | profile | selfcheck | prepare`.

Arguments are parsed into frozen configs here, at the edge; any problem exits non-zero with a one-line reason."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from specdec_core.backends.models import EMBEDDED, ModelLoadError, embedded_dir
from specdec_core.backends import choice
from specdec_core.backends import llamacpp as llamacpp_backend
from specdec_core.backends.representation import REPRESENTATIONS, describe, load_target
from specdec_core.backends.representation import load_draft as representation_load_draft
from specdec_core.backends import roofline
from specdec_core.backends.profile import LONG_CONTEXT
from specdec_core.bench import llamacpp, selfcheck, whatif
from specdec_core.bench.aggregate import by_category, our_mismatches, peer_mismatches, summarise
from specdec_core.bench.checkpoint import Checkpoint
from specdec_core.bench.hf import hf_settings
from specdec_core.bench.prompts import SUITES, load_jsonl, select, suite
from specdec_core.bench.report import category_table, peer_lines, table, to_json, write_json, write_plot
from specdec_core.bench.runner import ALL_METHODS, NEEDS_DRAFT, BenchConfig, PeakMemory, parse_methods, run_bench
from specdec_core.core.config import (ConfigError, DraftConfig, EagleConfig, GenerationConfig, LayerSkipConfig,
                                      LookupConfig, MedusaConfig, SamplingConfig, parse_layers)
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.run import REFERENCE, compare
from specdec_core.core.session import check_prompt_text, encode_prompt, eos_token_ids, run
from specdec_core.methods import timing
from specdec_core.methods.recommend import KINDS, prompt_kind, recommend
from specdec_core.methods.registry import METHODS, MethodOptions, build_drafter, is_tree, parse_method
from specdec_core import settings as S
from specdec_core.settings import DEFAULT_DRAFT, DEFAULT_TARGET


DEFAULT_BENCH_METHODS = METHODS + ("hf-assisted", "hf-lookup")


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage too; keep it short)
        raise ConfigError(message)


def add_model_args(p) -> None:
    p.add_argument("--target", default=DEFAULT_TARGET, help="embedded name, local dir or Hub id")
    p.add_argument("--draft", default=DEFAULT_DRAFT, help="draft model for --method draft")
    p.add_argument("--device", help="cpu, cuda, ... (default: automatic)")
    p.add_argument("--backend", default=S.DEFAULT_BACKEND, metavar="auto|torch|llamacpp",
                   help="auto (default): the backend whose plain decoding is fastest on this machine (measured once, "
                        "cached), so speedups are against the fastest plain decoding here; torch; or llamacpp: target "
                        "and draft run by llama.cpp from the embedded GGUF files as they ship (Q4_K_M), verified "
                        f"exactly up to the batch size measured at load (optional: {llamacpp_backend.INSTALL})")
    p.add_argument("--target-repr", default="auto",
                   help=f"target representation: {', '.join(REPRESENTATIONS)} (default auto: the fastest exact one "
                        "here; every one runs bit-exact)")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"],
                   help="dense target representation (same as --target-repr bf16/fp16/fp32) and the draft's default")
    p.add_argument("--draft-dtype", choices=["bfloat16", "float16", "float32"], help="the draft model's only")
    p.add_argument("--draft-repr", choices=["auto", "bf16", "fp16", "fp32", "int8", "int4"], default="auto",
                   help="draft representation (no exactness needed: it only changes the guesses). auto: dynamic int8 "
                        "on a CPU (a 0.5B step 118 → 48 ms, docs/performance.md e3), the target's dtype on a GPU; "
                        "int4: 4-bit weight-only (CPU; faster steps on AVX-512, weaker guesses)")
    p.add_argument("--draft-quant", choices=["int8"], help="dynamic int8 quantisation of the draft's linear layers")
    p.add_argument("--draft-quant-granularity", choices=["channel", "tensor"], default="channel",
                   help="int8 weight scales per output channel (default) or per tensor")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--num-draft-tokens", metavar="N|auto",
                   help="draft tokens per round. Default auto (what the page uses): per round, the length that "
                        "maximises expected tokens/s from this machine's cost profile and the running acceptance "
                        f"(measured once, cached); a fixed γ (0-{S.MAX_DRAFT_TOKENS}) is what you ask for; with "
                        f"--adaptive the default is a fixed {S.NUM_DRAFT_TOKENS.default:g} to adapt from")
    p.add_argument("--adaptive", action="store_true", help="+2/-1 draft length and stop below confidence")
    p.add_argument("--confidence-threshold", type=float, default=S.CONFIDENCE_THRESHOLD.default)
    p.add_argument("--ngram-size", type=int, default=LookupConfig.max_ngram_size, help="prompt lookup n-gram")
    p.add_argument("--skip-layers", help="layer-skip drafter: layers to skip, e.g. '8-19' (default: a built-in)")
    p.add_argument("--medusa-heads", help="Medusa heads file (default: the one shipped for the target)")
    p.add_argument("--tree-nodes", type=int, default=MedusaConfig.tree_nodes, help="medusa-tree: candidates/round")
    p.add_argument("--tree-top-k", type=int, default=MedusaConfig.tree_top_k, help="medusa-tree: children/node")
    p.add_argument("--eagle-head", help="EAGLE head file (default: the one shipped for the target)")
    p.add_argument("--eagle-nodes", type=int, default=EagleConfig.tree_nodes, help="eagle-tree: nodes kept/round")
    p.add_argument("--eagle-top-k", type=int, default=EagleConfig.tree_top_k,
                   help="eagle-tree: nodes expanded per depth and children per node")
    p.add_argument("--max-new-tokens", type=int, default=int(S.MAX_NEW_TOKENS.default))
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)


def add_bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="race methods on a prompt set; print a table, write JSON (+ HTML plot)")
    src = bench.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", type=Path, help="JSON lines with a 'prompt' field (optional 'id', 'chat')")
    src.add_argument("--suite", choices=SUITES, help="built-in prompts")
    bench.add_argument("--limit", type=int, help="use the first N prompts")
    bench.add_argument("--skip", type=int, default=0, metavar="N",
                       help="leave out the first N prompts (e.g. to measure on prompts another run did not use)")
    bench.add_argument("--per-category", type=int, metavar="N",
                       help="the first N prompts of each category (chat's first 8 are all translations)")
    bench.add_argument("--methods", default=",".join(DEFAULT_BENCH_METHODS),
                       help=f"comma-separated, from {', '.join(ALL_METHODS)} (ar always runs)")
    bench.add_argument("--repeats", type=int, default=1)
    bench.add_argument("--check-exact", type=int, metavar="N",
                       help="exactness check: the first N prompts, every engine method (unless --methods) against ar; "
                            "prints mismatches and the first diverging token per prompt; exit 1 on any")
    bench.add_argument("--resume", type=Path, metavar="FILE",
                       help="checkpoint file: each finished prompt is saved there, and a rerun with the same "
                            "arguments skips the prompts it holds (long runs survive being stopped)")
    bench.add_argument("--json", type=Path, default=Path("out/bench.json"), help="results file")
    bench.add_argument("--plot", type=Path, help="Plotly HTML report")
    bench.add_argument("--no-progress", action="store_true")
    add_model_args(bench)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m specdec_core", description="Exact speculative decoding.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    gen = sub.add_parser("generate", help="generate text with one method and print it (or --json)")
    src = gen.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    gen.add_argument("--method", default="draft", help=f"one of {', '.join(METHODS)} (default draft)")
    add_model_args(gen)
    gen.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    gen.add_argument("--json", action="store_true", help="print one JSON object: text, token_ids, rounds, stats")
    add_bench_parser(sub)
    prof = sub.add_parser("profile", help="measure this machine's cost curve T(n), drafter costs, bandwidth (cached)")
    add_model_args(prof)
    prof.add_argument("--json", type=Path, help="also write the profile here")
    prof.add_argument("--refresh", action="store_true", help="measure again even if a cached profile exists")
    prof.add_argument("--no-progress", action="store_true")
    check = sub.add_parser("selfcheck", help="is this machine bit-exact, its cost profile, every method equal to ar on "
                                             "3 prompts and their speedups: one JSON, a few minutes")
    add_model_args(check)
    check.set_defaults(max_new_tokens=S.SELFCHECK_NEW_TOKENS)
    check.add_argument("--json", type=Path, default=Path("out/selfcheck.json"), help="report file")
    check.add_argument("--no-progress", action="store_true")
    what = sub.add_parser("whatif", help="this machine's measured T(n) beside a roofline for catalogue devices (H100, "
                                         "A100, L4, RTX 4090, Apple M2, a laptop CPU): each method's best γ and "
                                         "predicted speedup there, utilization plain → speculative")
    add_model_args(what)
    what.add_argument("--json", type=Path, help="also write the report here (one object: devices, this_machine)")
    what.add_argument("--method", help="only this method (default: every one with a measured acceptance)")
    what.add_argument("--from-trace", type=Path, metavar="TRACE",
                      help="a race's trace JSON (the page's download): carry its acceptance to every device")
    what.add_argument("--kind", choices=KINDS, default="code",
                      help="without a trace: the shipped acceptance priors for code (default) or prose prompts")
    what.add_argument("--context", type=int, default=whatif.CONTEXT,
                      help="tokens already in the cache (the KV read grows with it)")
    what.add_argument("--no-progress", action="store_true")
    sub.add_parser("prepare", help="convert the embedded models into the cache now")
    return parser


def read_prompt(args) -> str:
    if args.prompt is not None:
        return args.prompt
    try:
        return args.prompt_file.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read --prompt-file: {e.strerror}: {args.prompt_file}") from None


def parse_draft_tokens(text: str | None, adaptive: bool = False) -> tuple[int, bool]:
    """'5' -> (5, False); 'auto' -> (the default length to start from, cost-aware); no flag -> 'auto', or under
    --adaptive the default fixed length it adapts from."""
    if text is None:
        text = str(int(S.NUM_DRAFT_TOKENS.default)) if adaptive else S.DRAFT_TOKENS_AUTO
    if text == S.DRAFT_TOKENS_AUTO:
        return int(S.NUM_DRAFT_TOKENS.default), True
    try:
        return int(text), False
    except ValueError:
        raise ConfigError(f"--num-draft-tokens must be a whole number or 'auto', got {text!r}") from None


def parse_run_args(args) -> tuple[GenerationConfig, MethodOptions]:
    length, cost_aware = parse_draft_tokens(args.num_draft_tokens, args.adaptive)
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        sampling=SamplingConfig(args.temperature, args.top_k, args.top_p),
        draft=DraftConfig(length, args.adaptive, args.confidence_threshold, cost_aware=cost_aware),
        seed=args.seed,
    )
    options = MethodOptions(
        LookupConfig(max_ngram_size=args.ngram_size),
        LayerSkipConfig(parse_layers(args.skip_layers) if args.skip_layers else None),
        MedusaConfig(args.medusa_heads, args.tree_nodes, args.tree_top_k),
        EagleConfig(args.eagle_head, args.eagle_nodes, args.eagle_top_k),
    )
    if args.threads is not None:
        if not 1 <= args.threads <= 1024:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    return config, options


DTYPE_REPR = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def load_draft(args):
    """The draft model in its representation (settings.draft_representation: the page's policy too): it only changes
    q, never the output."""
    if args.backend == "llamacpp":
        return llamacpp_backend.load(args.draft, args.threads or 0, target=False)[0]
    representation = "int8" if args.draft_quant == "int8" else args.draft_repr
    return representation_load_draft(args.draft, args.device, representation, args.draft_dtype or args.dtype,
                                     per_channel=args.draft_quant_granularity == "channel")


def resolve_backend(args) -> None:
    """--backend auto -> the backend whose plain decoding is fastest here (backends/choice.py), said on stderr; the
    choice is kept in args.backend_choice for the JSON."""
    names = parse_backends(args.backend)
    if len(names) != 1:
        raise ConfigError(f"--backend takes one backend here (a list, e.g. torch,llamacpp, is for bench), got "
                          f"{args.backend!r}")
    args.backend = names[0]
    if args.backend != choice.AUTO:
        args.backend_choice = choice.Choice(args.backend, f"asked for {args.backend}")
        return
    loaders = {b: (lambda b=b: load_target_arg(argparse.Namespace(**{**vars(args), "backend": b}))[0])
               for b in S.BACKENDS}
    representation = DTYPE_REPR[args.dtype] if args.dtype else args.target_repr
    args.backend_choice = choice.choose(args.target, loaders, args.device, representation,
                                        refresh=getattr(args, "refresh", False),
                                        say=lambda m: print(m, file=sys.stderr))
    args.backend = args.backend_choice.backend
    print(f"backend: {args.backend_choice.reason}" + (" [cached]" if args.backend_choice.cached else ""),
          file=sys.stderr)


def load_target_arg(args):
    """The exact target in the representation asked for (--dtype is the dense shorthand), or llama.cpp's."""
    if not hasattr(args, "backend_choice"):
        resolve_backend(args)
    if args.backend == "llamacpp":
        if not llamacpp_backend.available():
            raise ConfigError(f"--backend llamacpp needs llama-cpp-python: {llamacpp_backend.INSTALL}")
        return llamacpp_backend.load(args.target, args.threads or 0)
    representation = args.target_repr
    if args.dtype:
        if representation not in ("auto", DTYPE_REPR[args.dtype]):
            raise ConfigError(f"--dtype {args.dtype} contradicts --target-repr {representation}")
        representation = DTYPE_REPR[args.dtype]
    return load_target(args.target, args.device, representation)


def cmd_generate(args) -> int:
    method = parse_method(args.method)
    config, options = parse_run_args(args)
    text = check_prompt_text(read_prompt(args))  # before the slow model load
    target, tokenizer = load_target_arg(args)
    draft = load_draft(args) if method == "draft" else None
    prompt_ids = encode_prompt(tokenizer, text, chat=args.chat)
    cost = None
    if config.draft.cost_aware and method != REFERENCE:
        cost = timing.cost(load_profile(args, target, draft, options, progress=True), method, prompt_kind(args.chat))
    engine = SpeculativeEngine(target, build_drafter(method, target, draft, options), eos_token_ids(tokenizer, target),
                               cost, method)
    result = run(engine, method, prompt_ids, config)
    row = compare([result], [], tree=is_tree(method), cost=cost)  # one run, no reference: no speedup measured
    out_text = tokenizer.decode(result.token_ids, skip_special_tokens=True)
    if args.json:
        print(json.dumps({
            "method": method,
            "row": row.to_dict(),
            "num_draft_tokens": config.draft.label,  # "auto": the cost-aware length; else the fixed γ
            "draft_length": config.draft.kind,
            "text": out_text,
            "token_ids": result.token_ids,
            "rounds": [r.to_dict() for r in result.rounds],
            "stats": result.stats.to_dict(),
            "config": asdict(config),
            "target_repr": describe(target),
            "target_repr_note": target.representation_note,
            "backend": args.backend,
            "backend_choice": args.backend_choice.reason,
        }))
    else:
        alpha = "n/a" if row.alpha is None else f"{row.alpha:.2f}"
        gamma = "auto (cost-aware)" if config.draft.cost_aware else config.draft.num_draft_tokens
        print(out_text)
        print(f"\n[{method}] {row.tokens} tokens in {row.seconds:.2f}s ({row.decode_tokens_per_second or 0:.2f} tok/s "
              f"decoding), alpha {alpha}, tau {row.tau:.2f}, {result.stats.target_forwards} target forwards, "
              f"draft {row.draft_seconds:.2f}s / verify {row.verify_seconds:.2f}s / prompt {row.prefill_seconds:.2f}s; "
              f"γ {gamma}; target {describe(target)}", file=sys.stderr)
    return 0


def parse_backends(text: str) -> list[str]:
    """'auto' | 'torch' | 'llamacpp' | a comma list of the two ('torch,llamacpp': both, one after the other)."""
    names = [b.strip() for b in str(text).split(",") if b.strip()]
    if len(names) > 1 and (choice.AUTO in names or len(set(names)) != len(names)):
        raise ConfigError(f"--backend: one of auto, {', '.join(S.BACKENDS)}, or a list of distinct backends "
                          f"(e.g. torch,llamacpp), got {text!r}")
    for name in names or [""]:
        if name not in (choice.AUTO,) + S.BACKENDS:
            raise ConfigError(f"--backend: unknown backend {name!r} (one of auto, {', '.join(S.BACKENDS)})")
    return names


def cmd_bench(args) -> int:
    if args.check_exact is not None:
        if args.check_exact < 1:
            raise ConfigError(f"--check-exact must be >= 1, got {args.check_exact}")
        args.limit = args.check_exact
        if args.methods == ",".join(DEFAULT_BENCH_METHODS):
            args.methods = ",".join(METHODS)
    methods = parse_methods(args.methods)
    config, options = parse_run_args(args)
    backends = parse_backends(args.backend)
    if not config.sampling.greedy and any(m in llamacpp.LLAMACPP_METHODS for m in methods):
        raise ConfigError("the llama.cpp peers run greedy only; leave --temperature at 0 or drop them")
    if args.check_exact is not None and not config.sampling.greedy:
        raise ConfigError("--check-exact compares greedy outputs; leave --temperature at 0")
    BenchConfig(methods, config, options, args.repeats)  # checks the numbers before any model loads
    prompts = select(load_jsonl(args.prompts) if args.prompts else suite(args.suite), args.limit, args.skip,
                     args.per_category)
    for path in (args.json, args.plot):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    if len(backends) == 1:
        args.backend = backends[0]
        return bench_one(args, methods, config, options, prompts)
    results, code = {}, 0
    for backend in backends:  # one after the other, same prompts: never both at once on one CPU
        one = argparse.Namespace(**{**vars(args), "backend": backend, "plot": None,
                                    "json": args.json.with_suffix(f".{backend}.json"),
                                    "resume": args.resume and args.resume.with_suffix(f".{backend}.ckpt")})
        print(f"\n## backend {backend}", flush=True)
        code = max(code, bench_one(one, methods, config, options, prompts))
        results[backend] = json.loads(one.json.read_text())
    combined = {"backends": results, "fastest": fastest_lines(results)}
    write_json(args.json, combined)
    print("\n## across backends (same prompts, one run; each speedup above is against its own backend's ar)")
    for line in combined["fastest"]:
        print(line)
    print(f"wrote {args.json}", file=sys.stderr)
    return code


def fastest_lines(results: dict[str, dict]) -> list[str]:
    """Each backend's fastest method against the fastest plain decoding of any backend in this run (our ar on each,
    and llama.cpp's own plain generation where it ran): what a user would otherwise run."""
    plain = {f"{r['method']} on {b}": r["end_to_end_tokens_per_second"] for b, res in results.items()
             for r in res["summary"] if r["method"] in ("ar", "llamacpp-ar") and not r.get("error")}
    if not plain:
        return []
    name, best_plain = max(plain.items(), key=lambda x: x[1])
    lines = [f"fastest plain decoding: {name}, {best_plain:.2f} tok/s end to end"]
    for b, res in results.items():
        ours = [r for r in res["summary"] if not r["peer"] and r["method"] != REFERENCE and not r.get("error")]
        if ours:
            top = max(ours, key=lambda r: r["end_to_end_tokens_per_second"])
            lines.append(f"best on {b}: {top['method']} {top['end_to_end_tokens_per_second']:.2f} tok/s = "
                         f"{top['end_to_end_tokens_per_second'] / best_plain:.2f}× the fastest plain decoding "
                         f"({top['end_to_end_speedup'] or 0:.2f}× its own backend's ar)")
    return lines


def bench_one(args, methods, config, options, prompts) -> int:
    """The bench on one backend (auto resolved here): a table, the JSON (and plot); exit 1 on our mismatch."""
    resolve_backend(args)
    if args.backend == "llamacpp":  # what llama.cpp cannot run: the hidden-state methods and transformers' generate
        off = [m for m in methods if m in llamacpp_backend.REFUSED or m.startswith("hf-")]
        if off:
            print(f"skipping {', '.join(off)} on --backend llamacpp (hidden-state methods and transformers' generate "
                  "need the torch backend)", file=sys.stderr)
        methods = tuple(m for m in methods if m not in off)
    if any(m in llamacpp.LLAMACPP_METHODS for m in methods) and not llamacpp.available():
        print(f"skipping {', '.join(m for m in methods if m in llamacpp.LLAMACPP_METHODS)}: llama-cpp-python is not "
              f"installed. To include them: {llamacpp.INSTALL}", file=sys.stderr)
        methods = tuple(m for m in methods if m not in llamacpp.LLAMACPP_METHODS)
    bench = BenchConfig(methods, config, options, args.repeats)
    target, tokenizer = load_target_arg(args)
    draft = load_draft(args) if any(m in NEEDS_DRAFT for m in methods) else None
    profile = load_profile(args, target, draft, options, progress=not args.no_progress)
    bench = dataclasses.replace(bench, profile=profile)
    checkpoint, resumed = None, 0
    if args.resume:
        checkpoint = Checkpoint(args.resume, {"methods": methods, "config": asdict(config), "target": args.target,
                                              "draft": args.draft, "target_repr": describe(target),
                                              "repeats": args.repeats, "suite": args.suite or str(args.prompts)})
        resumed = len(checkpoint.done)
        if resumed:
            print(f"resuming from {args.resume}: {resumed} prompt run(s) already done", file=sys.stderr)
    records = run_bench(prompts, bench, target, draft, tokenizer, progress=not args.no_progress,
                        checkpoint=checkpoint)
    rows = summarise(records, greedy=config.sampling.greedy, profile=profile,
                     llamacpp_target=args.backend == "llamacpp")
    meta = {
        "command": "python -m specdec_core " + " ".join(shlex.quote(a) for a in args.argv),
        "prompts": [p.id for p in prompts], "methods": list(methods), "config": asdict(config),
        "target": args.target, "draft": args.draft, "target_repr": describe(target),
        "target_repr_note": target.representation_note, "device": str(target.device),
        "backend": args.backend, "backend_choice": args.backend_choice.to_dict(),
        "draft_repr": draft.representation if draft else None,
        "threads": torch.get_num_threads(), "memory": PeakMemory(target.device).kind,
        "num_draft_tokens": config.draft.label,  # "auto": the cost-aware length (the default); else the fixed γ
        "draft_length": config.draft.kind,
        "timing": "wall clock per call, prompt pass included; end_to_end_speedup = end-to-end tokens/s over ar's, "
                  "same run; decode_speedup excludes prompt passes; predicted_speedup = E[tokens/round] x T(1) / "
                  "(nodes x T_draft + T(nodes+1)) from the profile and this run's per-position acceptance, with a "
                  "drafter's one catch-up over the prompt (prompt tokens x its catch-up ms) where it keeps its own "
                  "cache (a decode speedup)",
        "profile": profile.to_dict(),
        "resumed_prompts": resumed,  # read back from --resume, timed by an earlier process
        "hf_settings": {m: hf_settings(m, config, options.lookup) for m in methods if m.startswith("hf-")},
        "llamacpp": {m: llamacpp.label(args.target) + f", {torch.get_num_threads()} threads, greedy (top-k 1), prompt "
                        "pass included; other weights than our target, so not compared token for token"
                     for m in methods if m in llamacpp.LLAMACPP_METHODS},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__, "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    cats = by_category(records, {p.id: p.category for p in prompts}, greedy=config.sampling.greedy, profile=profile,
                       llamacpp_target=args.backend == "llamacpp")
    write_json(args.json, to_json(meta, rows, records, cats))
    if args.plot:
        write_plot(args.plot, meta, rows, records, cats)
    print(table(rows))
    if len(cats) > 1:
        print("\nby category (Spec-Bench's view; a conversation's turns count for its category):")
        print(category_table(cats))
    for line in peer_lines(rows):
        print(line)
    for method, found in our_mismatches(rows).items():
        for m in found:
            print(f"MISMATCH {method}: {m}")
    for method, found in peer_mismatches(rows).items():
        for m in found:
            print(f"PEER DIFFERS {method}: {m} (another library's output, not bit-exact with plain greedy decoding: "
                  "a finding about it, not a failure of this engine)")
    if args.check_exact is not None:
        ours = [r for r in rows if not r.peer]
        compared = sum(r.compared for r in ours)
        wrong = sum(r.mismatch_count for r in ours)
        print(f"exactness: {wrong} mismatches in {compared} method × prompt comparisons "
              f"({len(prompts)} prompts × {len(methods) - 1} methods, target {describe(target)})")
    print(f"\nwrote {args.json}" + (f" and {args.plot}" if args.plot else ""), file=sys.stderr)
    return 1 if our_mismatches(rows) else 0


def load_profile(args, target, draft, options, progress: bool, refresh: bool = False):
    """This machine's profile for the target, the draft and every method's drafter (cached; always complete, so the
    draft model is loaded even when this command does not race it)."""
    draft = draft if draft is not None else load_draft(args)
    return timing.profile(target, draft, options, progress=progress, say=lambda m: print(m, file=sys.stderr),
                          refresh=refresh)


def cmd_profile(args) -> int:
    _, options = parse_run_args(args)
    target, _ = load_target_arg(args)
    draft = load_draft(args)
    p = load_profile(args, target, draft, options, progress=not args.no_progress, refresh=args.refresh)
    print(f"device {p.device} · ISA {p.isa} · torch {p.torch} · target {p.model} {p.target_repr} · draft {p.draft_repr}")
    print("| n tokens | " + " | ".join(str(n) for n in p.target_ms) + " |")
    print("|---|" + "---|" * len(p.target_ms))
    print("| target forward, ms | " + " | ".join(f"{v:.0f}" for v in p.target_ms.values()) + " |")
    print("| ÷ T(1) | " + " | ".join(f"{v / p.target_ms[1]:.2f}" for v in p.target_ms.values()) + " |")
    print("drafter ms per drafted token (γ 5): " + ", ".join(f"{k} {v:.1f}" for k, v in p.draft_ms.items()))
    if p.catch_up_ms:
        print("catch-up, ms per token a drafter with its own cache is behind (weighed against what drafting saves over "
              "the rest of the answer): " + ", ".join(f"{k} {v:.2f}" for k, v in p.catch_up_ms.items()))
    if p.long_context_ms:
        print(f"after {LONG_CONTEXT} cached tokens, ms: " + ", ".join(f"T({n}) {v:.0f}" for n, v in p.long_context_ms.items()))
    print(f"prompt pass {p.prefill_tokens_per_s:.0f} tokens/s · memory copy {p.bandwidth_gb_s:.1f} GB/s · one "
          f"1-token target forward reads {p.target_bytes / 1e9:.2f} GB → utilization {p.utilization:.0%}")
    for kind in KINDS:
        print(recommend(p, kind).text().replace("**", ""))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(p.to_dict(), indent=1) + "\n")
    return 0


def cmd_selfcheck(args) -> int:
    config, options = parse_run_args(args)
    if not config.sampling.greedy:
        raise ConfigError("selfcheck compares greedy outputs; leave --temperature at 0")
    target, tokenizer = load_target_arg(args)
    draft = load_draft(args)
    profile = load_profile(args, target, draft, options, progress=not args.no_progress)
    report = selfcheck.check(target, draft, tokenizer, profile, config, options, progress=not args.no_progress)
    report["command"] = "python -m specdec_core " + " ".join(shlex.quote(a) for a in args.argv)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(selfcheck.lines(report)))
    print(f"wrote {args.json}", file=sys.stderr)
    return 0 if report["ok"] else 1


def cmd_whatif(args) -> int:
    _, options = parse_run_args(args)
    methods = None
    if args.method:
        method = parse_method(args.method)
        if method == REFERENCE:
            raise ConfigError("--method: pick a speculative method (ar is the baseline every row divides by)")
        methods = [method]
    if not 1 <= args.context <= 1 << 20:
        raise ConfigError(f"--context must be between 1 and {1 << 20}, got {args.context}")
    try:
        acceptance = whatif.read_trace(args.from_trace) if args.from_trace else whatif.from_priors(args.kind)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    target, _ = load_target_arg(args)
    draft = load_draft(args)
    profile = load_profile(args, target, draft, options, progress=not args.no_progress)
    report = whatif.whatif(profile, roofline.shape_of_model(args.target, target),
                           roofline.shape_of_model(args.draft, draft), acceptance, methods, args.context,
                           getattr(target, "max_verify_tokens", None))
    report["backend"] = args.backend
    print(whatif.table(report))
    for line in whatif.check_lines(report):
        print(line)
    for r in report["devices"]:
        print(f"- {r['name']}: {r['why']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, report)
    return 0


def cmd_prepare(args) -> int:
    for name in EMBEDDED:
        print(f"{name}: {embedded_dir(name)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)
        commands = {"generate": cmd_generate, "bench": cmd_bench, "profile": cmd_profile, "selfcheck": cmd_selfcheck,
                    "prepare": cmd_prepare, "whatif": cmd_whatif}
        return commands[args.command](args)
    except (ConfigError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
