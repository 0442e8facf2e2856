#!/usr/bin/env python3
"""E2C inference demo: one problem, an exploration then an execution, each phase shown with its tokens.

    python example_inference.py                                 # embedded SmolLM2-135M, CPU, no hub
    python example_inference.py --model_path tiny               # the random tiny test model (seconds)
    python example_inference.py --model_path TingheOliver/Explore-Execute-Chain-Qwen --subfolder 8B

Generation runs in two budgeted calls (explore up to --explore_budget tokens, stopping at the closing
exploration tag, then execute with the rest of --max_tokens). The embedded model was never trained on
E2C: expect a closed-for-it exploration and a weak answer; it shows the pipeline, not the method.
"""

from __future__ import annotations

import argparse
import sys
import time

from e2c.chain import FORMATS, get_format
from e2c.cli import ArgumentParser, fail
from e2c.models import ModelSpecError, load_model_and_tokenizer
from e2c.rewards import grade

CLOSED_FOR_MODEL = {
    "budget": " (exploration closed for the model at its budget)",
    "eos": " (the model ended its turn while exploring; exploration closed for it)",
}
DEFAULT_PROBLEM = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
    "fresh duck egg. How much in dollars does she make every day at the farmers' market?"
)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description="Run E2C inference on one problem.")
    p.add_argument(
        "--model_path",
        default="embedded",
        help="model spec: embedded, tiny, a folder or an HF id (default: embedded)",
    )
    p.add_argument(
        "--subfolder", default=None, help="subfolder of the model repo/folder, e.g. 8B or 4B (default: none)"
    )
    p.add_argument("--problem", default=DEFAULT_PROBLEM, help="problem text (default: a GSM8K problem)")
    p.add_argument(
        "--answer", default="18", help="reference answer to grade against; '' to skip (default: 18)"
    )
    p.add_argument("--max_tokens", type=int, default=384, help="total new tokens, both phases (default: 384)")
    p.add_argument(
        "--explore_budget", type=int, default=128, help="tokens for the exploration (default: 128)"
    )
    p.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature; 0 = greedy (default: 0.7)"
    )
    p.add_argument("--top_p", type=float, default=0.95, help="nucleus sampling mass (default: 0.95)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument(
        "--opener",
        default="I need to make a step-by-step plan.\n1.",
        help="text that starts the exploration for the model; '' for none (default: the release's usual opening)",
    )
    p.add_argument(
        "--trust_remote_code",
        action="store_true",
        help="allow the model repo's own Python code to run (off by default)",
    )
    p.add_argument("--format", default="e2c", choices=list(FORMATS), help="chain format (default: e2c)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.explore_budget <= 0 or args.max_tokens <= args.explore_budget:
        fail(f"--max_tokens ({args.max_tokens}) must exceed --explore_budget ({args.explore_budget}) > 0")
    fmt = get_format(args.format)
    from e2c.generation.hf import generate_chain

    t0 = time.perf_counter()
    try:
        model, tok, res = load_model_and_tokenizer(
            args.model_path,
            args.subfolder,
            fmt=fmt,
            dtype="float32",
            trust_remote_code=args.trust_remote_code,
        )
    except ModelSpecError as e:
        fail(str(e))
    print(f"model: {res.description}  [{res.path}]  loaded in {time.perf_counter() - t0:.1f}s")
    print("=" * 70 + f"\nPROBLEM:\n{args.problem}\n" + "=" * 70)
    t1 = time.perf_counter()
    out = generate_chain(
        model,
        tok,
        args.problem,
        fmt,
        explore_budget=args.explore_budget,
        execute_budget=args.max_tokens - args.explore_budget,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        opener=args.opener,
    )
    secs = time.perf_counter() - t1
    parsed = fmt.parse(out.response)
    print(fmt.render(parsed))
    print("=" * 70)
    result = grade(out.response, args.answer, fmt=fmt) if args.answer else None
    extracted = result.extracted if result else grade(out.response, "0", fmt=fmt).extracted
    print(f"extracted answer : {extracted}")
    if result:
        print(f"reference answer : {args.answer}  -> {'correct' if result.correct else result.reason}")
    print(f"chain status     : {parsed.status}{CLOSED_FOR_MODEL.get(out.explore_stop, '')}")
    total = out.explore_tokens + out.execute_tokens
    print(
        f"tokens           : exploration {out.explore_tokens}, execution {out.execute_tokens}, "
        f"total {total} in {secs:.1f}s ({total / max(secs, 1e-9):.1f} tok/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
