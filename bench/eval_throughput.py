"""Evaluation throughput: the batched generator against a one-problem-at-a-time loop.

    python bench/eval_throughput.py [--model embedded] [--problems 8] [--samples 4] [--max-tokens 128]

Both arms use the same transformers model, the same GSM8K prompts (E2C chain prompts), the same sampling
settings and token budget. The loop arm generates each problem's samples in its own call (how the
paper's evaluation script walks a dataset); the batched arm sends every prompt x sample through one
``generate`` call of the eval runner's generator (rows sorted by length, ``--batch-size`` rows per
forward batch). Prints a table, then one JSON line with samples/s of each arm and their ratio.
"""

from __future__ import annotations

import json
import time

from e2c.chain import E2C
from e2c.cli import ArgumentParser
from e2c.data.registry import load_benchmark, question_text
from e2c.generation import chain_prompts, make_generator
from e2c.generation.base import Sampling
from e2c.paths import project_root

# The benchmark files shared beside the checkout (``../shared/data/benchmarks``).
DEFAULT_DATA = project_root().parent / "shared" / "data" / "benchmarks"


def arm(gen, prompts: list[str], samples: int, max_tokens: int, batched: bool, seed: int) -> dict:
    """Time one arm; returns samples, generated tokens and seconds."""
    t0 = time.perf_counter()
    tokens_before = gen.usage.generated_tokens
    sampling = Sampling(samples, max_tokens, stop=E2C.stop_strings("full"), seed=seed)
    outs = gen.generate(prompts, sampling) if batched else [gen.generate([p], sampling)[0] for p in prompts]
    secs = time.perf_counter() - t0
    n = sum(len(r) for r in outs)
    tokens = gen.usage.generated_tokens - tokens_before
    return {
        "samples": n,
        "tokens": tokens,
        "seconds": round(secs, 2),
        "samples_per_s": round(n / secs, 3),
        "tokens_per_s": round(tokens / secs, 1),
    }


def main() -> None:
    ap = ArgumentParser(prog="eval_throughput")
    ap.add_argument("--model", default="embedded", help="model spec (default: embedded)")
    ap.add_argument(
        "--data-dir", default=str(DEFAULT_DATA), help="folder with gsm8k.jsonl (default: ../shared)"
    )
    ap.add_argument("--problems", type=int, default=8, help="GSM8K problems (default: 8)")
    ap.add_argument("--samples", type=int, default=4, help="samples per problem (default: 4)")
    ap.add_argument("--max-tokens", type=int, default=128, help="new tokens per sample (default: 128)")
    ap.add_argument(
        "--batch-size", type=int, default=32, help="rows per forward batch, batched arm (default: 32)"
    )
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    args = ap.parse_args()

    records = load_benchmark("gsm8k", args.data_dir, args.problems, use_hub=False)
    gen, res = make_generator("hf", args.model, batch_size=args.batch_size)
    prompts = chain_prompts(gen.tokenizer, [question_text(r) for r in records])
    gen.generate(prompts[:1], Sampling(max_tokens=4, seed=0))  # warm-up: first-call allocations off the clock

    loop = arm(gen, prompts, args.samples, args.max_tokens, batched=False, seed=args.seed)
    batched = arm(gen, prompts, args.samples, args.max_tokens, batched=True, seed=args.seed)
    ratio = batched["samples_per_s"] / loop["samples_per_s"]
    print(
        f"model {res.description}; {len(prompts)} problems x {args.samples} samples, <= {args.max_tokens} tokens"
    )
    print(f"{'arm':<22}{'samples':>8}{'tokens':>8}{'seconds':>9}{'samples/s':>11}{'tok/s':>8}")
    for name, r in (("one problem at a time", loop), (f"batched ({args.batch_size})", batched)):
        print(
            f"{name:<22}{r['samples']:>8}{r['tokens']:>8}{r['seconds']:>9}{r['samples_per_s']:>11}{r['tokens_per_s']:>8}"
        )
    print(f"speed-up (samples/s): {ratio:.2f}x")
    out = {
        "model": args.model,
        "problems": len(prompts),
        "samples": args.samples,
        "max_tokens": args.max_tokens,
        "batch_size": args.batch_size,
        "loop": loop,
        "batched": batched,
        "ratio": round(ratio, 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
